// Indexing and scatter (indexing.cc) on the CPU plugin: index_select (and
// a golden text), gather, the scatter family, index_add, advanced indexing,
// index_put, embedding's dense backward, index_fill and take, with their
// index range checks. Every expected value below is worked out by hand from
// PyTorch's documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::Dims;
using hlo::DType;
using hlo::Value;
using testing::any_failed;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::expect_values;
using testing::Host;
using testing::lower;
using testing::Prog;
using testing::Result;
using testing::run_op;
using testing::scalar;
using testing::tensor;
using testing::values;
using testing::hosts::arange;
using testing::hosts::bf16;
using testing::hosts::bools;
using testing::hosts::f32;
using testing::hosts::f64;
using testing::hosts::i32;
using testing::hosts::i64;

const double kNaN = std::nan("");

// ---- index_select

TEST(IndexSelect, Golden) {
  hlo::Builder b;
  Value x = b.parameter({DType::F32, {3, 4}});
  Value idx = b.parameter({DType::I64, {2}});
  lowering::Context cx(b, {Arg::tensor(x), Arg::integer(0), Arg::tensor(idx)}, "aten::index_select");
  auto outs = lowering::find_lowering("aten::index_select")(cx);
  ASSERT_EQ(cx.checks().size(), 1u);
  EXPECT_EQ(cx.checks()[0].message, "aten::index_select: index out of range in self (dimension 0 with size 3)");
  b.set_results({outs[0], cx.checks()[0].failed});
  EXPECT_EQ(b.module_text(),
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<3x4xf32>, %1: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<i1>) {\n"
            "    %2 = \"stablehlo.constant\"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>\n"
            "    %3 = \"stablehlo.constant\"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>\n"
            "    %4 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> "
            "tensor<2xi64>\n"
            "    %5 = \"stablehlo.compare\"(%1, %4) {comparison_direction = #stablehlo<comparison_direction LT>, "
            "compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>\n"
            "    %6 = \"stablehlo.broadcast_in_dim\"(%3) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> "
            "tensor<2xi64>\n"
            "    %7 = \"stablehlo.compare\"(%1, %6) {comparison_direction = #stablehlo<comparison_direction GE>, "
            "compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>\n"
            "    %8 = \"stablehlo.or\"(%5, %7) : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>\n"
            "    %9 = \"stablehlo.constant\"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>\n"
            "    %10 = \"stablehlo.reduce\"(%8, %9) ({\n"
            "    ^bb0(%11: tensor<i1>, %12: tensor<i1>):\n"
            "      %13 = \"stablehlo.or\"(%11, %12) : (tensor<i1>, tensor<i1>) -> tensor<i1>\n"
            "      \"stablehlo.return\"(%13) : (tensor<i1>) -> ()\n"
            "    }) {dimensions = array<i64: 0>} : (tensor<2xi1>, tensor<i1>) -> tensor<i1>\n"
            "    %14 = \"stablehlo.reshape\"(%1) : (tensor<2xi64>) -> tensor<2x1xi64>\n"
            "    %15 = \"stablehlo.gather\"(%0, %14) {dimension_numbers = #stablehlo.gather<offset_dims = [1], "
            "collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, "
            "slice_sizes = array<i64: 1, 4>} : (tensor<3x4xf32>, tensor<2x1xi64>) -> tensor<2x4xf32>\n"
            "    \"func.return\"(%15, %10) : (tensor<2x4xf32>, tensor<i1>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(IndexSelect, Columns) {
  Prog p;
  auto r = run_op(p, "aten::index_select", {p.t(arange({3, 4})), Arg::integer(1), p.t(i64({3}, {3, 0, 3}))});
  expect_values(r.outs[0], DType::F32, {3, 3}, {3, 0, 3, 7, 4, 7, 11, 8, 11});
  EXPECT_FALSE(any_failed(r));
}

TEST(IndexSelect, Int32IndexAndIntData) {
  Prog p;
  auto r = run_op(p, "aten::index_select",
                  {p.t(i64({3, 2}, {10, 11, 20, 21, 30, 31})), Arg::integer(0), p.t(i32({2}, {2, 1}))});
  expect_values(r.outs[0], DType::I64, {2, 2}, {30, 31, 20, 21});
  EXPECT_FALSE(any_failed(r));
}

TEST(IndexSelect, OutOfRangeAndNegativeIndicesFailTheCheck) {
  for (int64_t bad : {3, -1}) {
    Prog p;
    auto r = run_op(p, "aten::index_select", {p.t(arange({3, 4})), Arg::integer(0), p.t(i64({2}, {0, bad}))});
    ASSERT_EQ(r.checks.size(), 1u);
    EXPECT_TRUE(r.checks[0]) << "index " << bad;
  }
}

// ---- gather / scatter

TEST(Gather, AlongDims) {
  {
    Prog p;
    auto r = run_op(
        p, "aten::gather",
        {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), Arg::integer(1), p.t(i64({2, 2}, {0, 0, 2, 1})), Arg::boolean(false)});
    expect_values(r.outs[0], DType::F32, {2, 2}, {1, 1, 6, 5});
    EXPECT_FALSE(any_failed(r));
  }
  {
    Prog p;
    auto r = run_op(
        p, "aten::gather",
        {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), Arg::integer(0), p.t(i64({1, 3}, {1, 0, 1})), Arg::boolean(false)});
    expect_values(r.outs[0], DType::F32, {1, 3}, {4, 2, 6});
    EXPECT_FALSE(any_failed(r));
  }
}

TEST(Gather, OutOfRangeFailsTheCheck) {
  for (int64_t bad : {3, -1}) {
    Prog p;
    auto r = run_op(
        p, "aten::gather",
        {p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6})), Arg::integer(1), p.t(i64({2, 1}, {0, bad})), Arg::boolean(false)});
    EXPECT_TRUE(any_failed(r)) << "index " << bad;
    EXPECT_NE(r.messages[0].find("aten::gather"), std::string::npos);
  }
}

TEST(Scatter, SrcUsesOnlyTheIndexedPart) {
  Prog p;
  auto r = run_op(p, "aten::scatter.src",
                  {p.t(f32({2, 3}, {0, 0, 0, 0, 0, 0})), Arg::integer(1), p.t(i64({2, 2}, {2, 0, 1, 2})),
                   p.t(f32({2, 3}, {1, 2, 3, 4, 5, 6}))});
  expect_values(r.outs[0], DType::F32, {2, 3}, {2, 0, 1, 0, 4, 5});
  EXPECT_FALSE(any_failed(r));
}

TEST(Scatter, Value) {
  Prog p;
  auto r =
      run_op(p, "aten::scatter.value", {p.t(f32({3}, {1, 1, 1})), Arg::integer(0), p.t(i64({2}, {0, 2})), p.scalar(7)});
  expect_values(r.outs[0], DType::F32, {3}, {7, 1, 7});
}

TEST(Scatter, AddAndMultiply) {
  {
    Prog p;
    auto r = run_op(p, "aten::scatter_add",
                    {p.t(f32({3}, {1, 1, 1})), Arg::integer(0), p.t(i64({3}, {0, 0, 2})), p.t(f32({3}, {1, 2, 3}))});
    expect_values(r.outs[0], DType::F32, {3}, {4, 1, 4});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::scatter.reduce",
                    {p.t(f32({3}, {2, 2, 2})), Arg::integer(0), p.t(i64({3}, {0, 0, 2})), p.t(f32({3}, {3, 4, 5})),
                     Arg::string("multiply")});
    expect_values(r.outs[0], DType::F32, {3}, {24, 2, 10});
  }
}

TEST(Scatter, OutOfRangeFailsTheCheck) {
  Prog p;
  auto r = run_op(p, "aten::scatter_add",
                  {p.t(f32({3}, {1, 1, 1})), Arg::integer(0), p.t(i64({2}, {0, 3})), p.t(f32({2}, {1, 2}))});
  EXPECT_TRUE(any_failed(r));
}

// self {1, 2, 3, 4}, index {0, 0, 2, 2}, src {5, 6, 7, -8}.
std::vector<double> scatter_reduce(const std::string& how, bool include_self, DType t = DType::F32) {
  Prog p;
  Host self = t == DType::F32 ? f32({4}, {1, 2, 3, 4}) : i64({4}, {1, 2, 3, 4});
  Host src = t == DType::F32 ? f32({4}, {5, 6, 7, -8}) : i64({4}, {5, 6, 7, -8});
  auto r = run_op(p, "aten::scatter_reduce.two",
                  {p.t(self), Arg::integer(0), p.t(i64({4}, {0, 0, 2, 2})), p.t(src), Arg::string(how),
                   Arg::boolean(include_self)});
  EXPECT_EQ(r.outs[0].dtype, t);
  return r.outs[0].v;
}

TEST(Scatter, ReduceTwo) {
  using D = std::vector<double>;
  EXPECT_EQ(scatter_reduce("sum", true), (D{12, 2, 2, 4}));
  EXPECT_EQ(scatter_reduce("sum", false), (D{11, 2, -1, 4}));
  EXPECT_EQ(scatter_reduce("prod", false), (D{30, 2, -56, 4}));
  EXPECT_EQ(scatter_reduce("amax", true), (D{6, 2, 7, 4}));
  EXPECT_EQ(scatter_reduce("amax", false), (D{6, 2, 7, 4}));
  EXPECT_EQ(scatter_reduce("amin", true), (D{1, 2, -8, 4}));
  EXPECT_EQ(scatter_reduce("amin", false), (D{5, 2, -8, 4}));
  D mean_in = scatter_reduce("mean", true);
  EXPECT_NEAR(mean_in[0], 4, 1e-6);        // (1 + 5 + 6) / 3
  EXPECT_NEAR(mean_in[2], 2.0 / 3, 1e-6);  // (3 + 7 - 8) / 3
  EXPECT_EQ(mean_in[1], 2);
  EXPECT_EQ(scatter_reduce("mean", false), (D{5.5, 2, -0.5, 4}));
  // Integer mean floors: 11 / 2 -> 5, -1 / 2 -> -1.
  EXPECT_EQ(scatter_reduce("mean", false, DType::I64), (D{5, 2, -1, 4}));
}

TEST(Scatter, ExtremaPropagateNaN) {
  // PyTorch's amax/amin keep a NaN from self or src; a bare stablehlo.maximum
  // combiner on the CPU plugin drops it.
  for (bool include_self : {true, false}) {
    for (const char* how : {"amax", "amin"}) {
      Prog p;
      auto r = run_op(p, "aten::scatter_reduce.two",
                      {p.t(f32({3}, {1, 2, kNaN})), Arg::integer(0), p.t(i64({4}, {0, 0, 1, 2})),
                       p.t(f32({4}, {kNaN, 5, 1, 1})), Arg::string(how), Arg::boolean(include_self)});
      double second = std::string(how) == "amax" ? (include_self ? 2 : 1) : 1;
      expect_values(r.outs[0], DType::F32, {3}, {kNaN, second, include_self ? kNaN : 1});
    }
    Prog p;  // the NaN comes second
    auto r = run_op(p, "aten::scatter_reduce.two",
                    {p.t(f32({1}, {1})), Arg::integer(0), p.t(i64({2}, {0, 0})), p.t(f32({2}, {5, kNaN})),
                     Arg::string("amax"), Arg::boolean(include_self)});
    expect_values(r.outs[0], DType::F32, {1}, {kNaN});
  }
}

TEST(Scatter, BFloat16SumsAccumulateInFloat) {
  // 256 + 1 rounds back to 256 in bfloat16; eight ones added in float32 give
  // 264, which bfloat16 holds. CPU's scatter_add and scatter_reduce sum do so.
  Prog p;
  auto r = run_op(p, "aten::scatter_add",
                  {p.t(bf16({2}, {256, 0})), Arg::integer(0), p.t(i64({8}, {0, 0, 0, 0, 0, 0, 0, 0})),
                   p.t(bf16({8}, std::vector<float>(8, 1)))});
  expect_values(r.outs[0], DType::BF16, {2}, {264, 0});
  Prog q;
  auto s = run_op(q, "aten::scatter_reduce.two",
                  {q.t(bf16({2}, {256, 0})), Arg::integer(0), q.t(i64({8}, {0, 0, 0, 0, 0, 0, 0, 0})),
                   q.t(bf16({8}, std::vector<float>(8, 1))), Arg::string("sum"), Arg::boolean(true)});
  expect_values(s.outs[0], DType::BF16, {2}, {264, 0});
}

TEST(IndexAdd, WithAlphaAlongRowsAndColumns) {
  {
    Prog p;
    auto r = run_op(p, "aten::index_add",
                    {p.t(f32({3, 2}, {1, 1, 1, 1, 1, 1})), Arg::integer(0), p.t(i64({3}, {0, 2, 0})),
                     p.t(f32({3, 2}, {1, 2, 3, 4, 5, 6})), p.scalar(2)});
    expect_values(r.outs[0], DType::F32, {3, 2}, {13, 17, 1, 1, 7, 9});
    EXPECT_FALSE(any_failed(r));
  }
  {
    Prog p;
    auto r = run_op(p, "aten::index_add",
                    {p.t(f32({2, 3}, {0, 0, 0, 0, 0, 0})), Arg::integer(1), p.t(i64({2}, {2, 0})),
                     p.t(f32({2, 2}, {1, 2, 3, 4})), p.scalar(1)});
    expect_values(r.outs[0], DType::F32, {2, 3}, {2, 0, 1, 4, 0, 3});
  }
  {
    Prog p;
    auto r = run_op(p, "aten::index_add",
                    {p.t(f32({3}, {0, 0, 0})), Arg::integer(0), p.t(i64({1}, {-1})), p.t(f32({1}, {1})), p.scalar(1)});
    EXPECT_TRUE(any_failed(r));
  }
}

// ---- advanced indexing

// x[indices] where `present` marks the list positions that hold a tensor.
Result index_op(Prog& p, Host self, std::vector<Host> idx, std::vector<int64_t> present) {
  Value x = p.in(std::move(self));
  std::vector<Value> vs;
  for (auto& h : idx) vs.push_back(p.in(std::move(h)));
  Arg list = Arg::tensor_list(vs);
  list.ints = std::move(present);
  return run_op(p, "aten::index.Tensor", {Arg::tensor(x), list});
}

TEST(AdvancedIndex, LeadingDim) {
  Prog p;
  auto r = index_op(p, arange({3, 4}), {i64({2}, {2, 0})}, {1});
  expect_values(r.outs[0], DType::F32, {2, 4}, {8, 9, 10, 11, 0, 1, 2, 3});
  EXPECT_FALSE(any_failed(r));
}

TEST(AdvancedIndex, NoneThenNegativeIndex) {
  Prog p;
  auto r = index_op(p, arange({3, 4}), {i64({2}, {-1, 1})}, {0, 1});
  expect_values(r.outs[0], DType::F32, {3, 2}, {3, 1, 7, 5, 11, 9});
  EXPECT_FALSE(any_failed(r));
}

TEST(AdvancedIndex, PointsAndBroadcast) {
  {
    Prog p;
    auto r = index_op(p, arange({3, 4}), {i64({2}, {0, 2}), i64({2}, {1, -1})}, {1, 1});
    expect_values(r.outs[0], DType::F32, {2}, {1, 11});
  }
  {
    Prog p;  // [[0], [2]] with [1, 3] -> 2x2 grid of x[r, c]
    auto r = index_op(p, arange({3, 4}), {i64({2, 1}, {0, 2}), i32({2}, {1, 3})}, {1, 1});
    expect_values(r.outs[0], DType::F32, {2, 2}, {1, 3, 9, 11});
  }
}

TEST(AdvancedIndex, NonAdjacentIndicesGoFirst) {
  Prog p;  // y[[0, 1], :, [3, 0]] -> rows y[0, :, 3] and y[1, :, 0]
  auto r = index_op(p, arange({2, 3, 4}), {i64({2}, {0, 1}), i64({2}, {3, 0})}, {1, 0, 1});
  expect_values(r.outs[0], DType::F32, {2, 3}, {3, 7, 11, 12, 16, 20});
}

TEST(AdvancedIndex, AdjacentIndicesStayInPlace) {
  {
    Prog p;  // y[:, [2, 0], [1, 1]] -> [y[a, 2, 1], y[a, 0, 1]] for a = 0, 1
    auto r = index_op(p, arange({2, 3, 4}), {i64({2}, {2, 0}), i64({2}, {1, 1})}, {0, 1, 1});
    expect_values(r.outs[0], DType::F32, {2, 2}, {9, 1, 21, 13});
  }
  {
    Prog p;  // y[:, [1]] keeps the trailing dim
    auto r = index_op(p, arange({2, 3, 4}), {i64({1}, {1})}, {0, 1});
    expect_values(r.outs[0], DType::F32, {2, 1, 4}, {4, 5, 6, 7, 16, 17, 18, 19});
  }
}

TEST(AdvancedIndex, RangeCheckAllowsNegativeWrap) {
  auto failed = [](int64_t i) {
    Prog p;
    return any_failed(index_op(p, arange({3, 4}), {i64({1}, {i})}, {1}));
  };
  EXPECT_FALSE(failed(2));
  EXPECT_FALSE(failed(-3));
  EXPECT_TRUE(failed(3));
  EXPECT_TRUE(failed(-4));
}

TEST(AdvancedIndex, BoolMaskIsRefused) {
  Prog p;
  EXPECT_THROW(index_op(p, arange({3}), {bools({3}, {1, 0, 1})}, {1}), lowering::LoweringError);
}

Result index_put_op(Prog& p, Host self, std::vector<Host> idx, std::vector<int64_t> present, Host values,
                    bool accumulate) {
  Value x = p.in(std::move(self));
  std::vector<Value> vs;
  for (auto& h : idx) vs.push_back(p.in(std::move(h)));
  Arg list = Arg::tensor_list(vs);
  list.ints = std::move(present);
  Value v = p.in(std::move(values));
  return run_op(p, "aten::index_put", {Arg::tensor(x), list, Arg::tensor(v), Arg::boolean(accumulate)});
}

TEST(IndexPut, AccumulateSumsDuplicates) {
  Prog p;
  auto r = index_put_op(p, f32({3}, {1, 2, 3}), {i64({3}, {0, 2, 0})}, {1}, f32({3}, {10, 20, 30}), true);
  expect_values(r.outs[0], DType::F32, {3}, {41, 2, 23});
  EXPECT_FALSE(any_failed(r));
}

TEST(IndexPut, IndexPutImplIsIndexPut) {
  // x[idx]'s backward and index_put_(accumulate=True) call _index_put_impl_.
  Prog p;
  Value x = p.in(f32({3}, {1, 2, 3}));
  Arg list = Arg::tensor_list({p.in(i64({3}, {0, 2, 0}))});
  list.ints = {1};
  Value v = p.in(f32({3}, {10, 20, 30}));
  auto r = run_op(p, "aten::_index_put_impl",
                  {Arg::tensor(x), list, Arg::tensor(v), Arg::boolean(true), Arg::boolean(false)});
  expect_values(r.outs[0], DType::F32, {3}, {41, 2, 23});
  EXPECT_FALSE(any_failed(r));
}

TEST(IndexPut, BoolMaskIsASelect) {
  {
    Prog p;  // x[mask] = 9 on a [2, 2] x
    auto r = index_put_op(p, f32({2, 2}, {1, 2, 3, 4}), {bools({2, 2}, {1, 0, 0, 1})}, {1}, f32({}, {9}), false);
    expect_values(r.outs[0], DType::F32, {2, 2}, {9, 2, 3, 9});
    EXPECT_FALSE(any_failed(r));
  }
  {
    Prog p;  // x[:, mask] += [10, 20] over the columns of the masked rows: values per non-masked element
    auto r =
        index_put_op(p, f32({2, 3}, {1, 2, 3, 4, 5, 6}), {bools({3}, {0, 1, 1})}, {0, 1}, f32({2, 1}, {10, 20}), true);
    expect_values(r.outs[0], DType::F32, {2, 3}, {1, 12, 13, 4, 25, 26});
  }
  {
    Prog p;  // values with one entry per true element: data-dependent, refused
    EXPECT_THROW(index_put_op(p, f32({2}, {1, 2}), {bools({2}, {1, 1})}, {1}, f32({2}, {5, 6}), false),
                 lowering::LoweringError);
  }
}

TEST(IndexPut, ValuesOfAnotherDtypeAreRefused) {
  Prog p;  // CPU: "Index put requires the source and destination dtypes match"
  EXPECT_THROW(index_put_op(p, f32({3}, {1, 2, 3}), {i64({1}, {0})}, {1}, f64({1}, {5}), false),
               lowering::LoweringError);
}

TEST(IndexPut, ReplaceWithNegativeIndex) {
  Prog p;
  auto r = index_put_op(p, f32({3}, {1, 2, 3}), {i64({2}, {2, -3})}, {1}, f32({2}, {7, 8}), false);
  expect_values(r.outs[0], DType::F32, {3}, {8, 2, 7});
}

TEST(IndexPut, BroadcastValueAndTwoIndices) {
  {
    Prog p;  // x[:, [1]] = 5
    auto r = index_put_op(p, f32({2, 3}, {0, 0, 0, 0, 0, 0}), {i64({1}, {1})}, {0, 1}, f32({}, {5}), false);
    expect_values(r.outs[0], DType::F32, {2, 3}, {0, 5, 0, 0, 5, 0});
  }
  {
    Prog p;  // x[[1, 0], [2, 2]] += [1, 2]
    auto r = index_put_op(p, i64({2, 3}, {0, 0, 0, 0, 0, 0}), {i64({2}, {1, 0}), i64({2}, {2, 2})}, {1, 1},
                          i64({2}, {1, 2}), true);
    expect_values(r.outs[0], DType::I64, {2, 3}, {0, 0, 2, 0, 0, 1});
  }
}

TEST(IndexPut, OutOfRangeFailsTheCheck) {
  Prog p;
  auto r = index_put_op(p, f32({3}, {1, 2, 3}), {i64({1}, {5})}, {1}, f32({1}, {1}), false);
  EXPECT_TRUE(any_failed(r));
}

// ---- embedding backward

// indices {1, 0, 1}; grad rows {1, 2}, {3, 4}, {5, 6}; 4 weights.
Result embedding_backward(int64_t padding_idx, bool scale, Dims idx_dims = {3}) {
  Prog p;
  Dims gdims = idx_dims;
  gdims.push_back(2);
  return run_op(p, "aten::embedding_dense_backward",
                {p.t(f32(gdims, {1, 2, 3, 4, 5, 6})), p.t(i64(idx_dims, {1, 0, 1})), Arg::integer(4),
                 Arg::integer(padding_idx), Arg::boolean(scale)});
}

TEST(EmbeddingDenseBackward, SumsRows) {
  auto r = embedding_backward(-1, false);
  expect_values(r.outs[0], DType::F32, {4, 2}, {3, 4, 6, 8, 0, 0, 0, 0});
  EXPECT_FALSE(any_failed(r));
  expect_values(embedding_backward(-1, false, {1, 3}).outs[0], DType::F32, {4, 2}, {3, 4, 6, 8, 0, 0, 0, 0});
}

TEST(EmbeddingDenseBackward, SkipsPaddingIdx) {
  expect_values(embedding_backward(1, false).outs[0], DType::F32, {4, 2}, {3, 4, 0, 0, 0, 0, 0, 0});
}

TEST(EmbeddingDenseBackward, ScaleGradByFreq) {
  // Row 1 is hit twice: (1 + 5) / 2, (2 + 6) / 2.
  expect_values(embedding_backward(-1, true).outs[0], DType::F32, {4, 2}, {3, 4, 3, 4, 0, 0, 0, 0});
}

// ---- index_fill, take

TEST(Indexing, IndexFillWrapsNegativeIndices) {
  auto l = lower("aten::index_fill.int_Scalar", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integer(0), tensor(b, DType::I64, {1}),
                            scalar(b, DType::F64)};
  });
  auto r = exec(l, {bytes(std::vector<float>(6, 0)), bytes(std::vector<int64_t>{-1}), bytes(std::vector<double>{5})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{0, 0, 0, 0, 5, 5}));
}

TEST(Indexing, TakeWrapsNegativeIndices) {
  auto l = lower("aten::take", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), tensor(b, DType::I64, {3})};
  });
  auto r = exec(l, {bytes(std::vector<float>{1, 2, 3, 4}), bytes(std::vector<int64_t>{-1, 0, 2})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{4, 1, 3}));
}

// ---- edge cases: scalars, empty tensors, bools

TEST(IndexingEdge, IndexSelectFromEmptyDimFailsTheCheck) {
  Prog p;
  auto r = run_op(p, "aten::index_select", {p.t(f32({0, 2}, {})), Arg::integer(0), p.t(i64({1}, {0}))});
  expect_values(r.outs[0], DType::F32, {1, 2}, {0, 0});
  EXPECT_TRUE(any_failed(r));
}

TEST(IndexingEdge, GatherWithIndexSmallerThanSelf) {
  Prog p;  // out[i][0] = x[index[i][0]][0] with x = 0..8 as 3x3
  auto r =
      run_op(p, "aten::gather", {p.t(arange({3, 3})), Arg::integer(0), p.t(i64({2, 1}, {2, 0})), Arg::boolean(false)});
  expect_values(r.outs[0], DType::F32, {2, 1}, {6, 0});
}

TEST(IndexingEdge, ZeroDimInputs) {
  {
    Prog p;
    auto r = run_op(p, "aten::gather", {p.t(f32({}, {5})), Arg::integer(0), p.t(i64({}, {0})), Arg::boolean(false)});
    expect_values(r.outs[0], DType::F32, {}, {5});
    EXPECT_FALSE(any_failed(r));
  }
  {
    Prog p;
    auto r = run_op(p, "aten::index_select", {p.t(f32({}, {5})), Arg::integer(0), p.t(i64({1}, {0}))});
    expect_values(r.outs[0], DType::F32, {}, {5});
  }
  {
    Prog p;  // x[1, 2] with two 0-d index tensors
    auto r = index_op(p, arange({3, 4}), {i64({}, {1}), i64({}, {2})}, {1, 1});
    expect_values(r.outs[0], DType::F32, {}, {6});
  }
}

TEST(IndexingEdge, BoolScatterAdd) {
  {
    Prog p;
    auto r = run_op(p, "aten::scatter_add",
                    {p.t(bools({3}, {0, 0, 1})), Arg::integer(0), p.t(i64({2}, {1, 2})), p.t(bools({2}, {1, 1}))});
    expect_values(r.outs[0], DType::Bool, {3}, {0, 1, 1});
  }
}

}  // namespace
}  // namespace torch_pjrt
