// Data-dependent ops (data_dependent.cc) on the CPU plugin: padded results
// plus a count, nonzero_static, masked_scatter, unique, repeat_interleave,
// bincount, and a golden text for equal. Every expected value below is
// worked out by hand from PyTorch's documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::Dims;
using hlo::DType;
using hlo::Value;
using testing::any_failed;
using testing::Arg;
using testing::expect_values;
using testing::Prog;
using testing::run_op;
using testing::hosts::bools;
using testing::hosts::f32;
using testing::hosts::f64;
using testing::hosts::i64;

// ---- nonzero

TEST(Nonzero, PaddedRowsAndCount) {
  Prog p;
  auto r = run_op(p, "aten::nonzero", {p.t(f32({3, 2}, {0, 1, 2, 0, 0, 3}))});
  ASSERT_EQ(r.outs.size(), 2u);
  expect_values(r.outs[0], DType::I64, {6, 2}, {0, 1, 1, 0, 2, 1, 0, 0, 0, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {3});
}

TEST(Nonzero, BoolAndEmpty) {
  Prog p;
  auto r = run_op(p, "aten::nonzero", {p.t(bools({4}, {0, 0, 0, 1}))});
  expect_values(r.outs[0], DType::I64, {4, 1}, {3, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {1});
  Prog q;
  auto e = run_op(q, "aten::nonzero", {q.t(f32({0, 3}, {}))});
  expect_values(e.outs[0], DType::I64, {0, 2}, {});
  expect_values(e.outs[1], DType::I64, {}, {0});
}

TEST(NonzeroStatic, PadsWithFillAndTruncates) {
  Prog p;
  auto r = run_op(p, "aten::nonzero_static", {p.t(f32({4}, {0, 5, 0, 7})), Arg::integer(4), Arg::integer(-1)});
  expect_values(r.outs[0], DType::I64, {4, 1}, {1, 3, -1, -1});
  Prog q;
  auto t = run_op(q, "aten::nonzero_static", {q.t(f32({4}, {0, 5, 0, 7})), Arg::integer(1), Arg::integer(-1)});
  expect_values(t.outs[0], DType::I64, {1, 1}, {1});
}

// ---- masked_select / masked_scatter

TEST(MaskedSelect, PaddedValuesAndCount) {
  Prog p;
  auto r = run_op(p, "aten::masked_select", {p.t(f32({4}, {1, 2, 3, 4})), p.t(bools({4}, {1, 0, 1, 1}))});
  expect_values(r.outs[0], DType::F32, {4}, {1, 3, 4, 0});
  expect_values(r.outs[1], DType::I64, {}, {3});
}

TEST(MaskedSelect, MaskBroadcastsOverRows) {
  Prog p;
  auto r = run_op(p, "aten::masked_select", {p.t(f32({2, 2}, {1, 2, 3, 4})), p.t(bools({2}, {0, 1}))});
  expect_values(r.outs[0], DType::F32, {4}, {2, 4, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {2});
}

TEST(MaskedScatter, TakesSourceInOrder) {
  Prog p;
  auto r = run_op(p, "aten::masked_scatter",
                  {p.t(f32({4}, {0, 0, 0, 0})), p.t(bools({4}, {1, 0, 1, 0})), p.t(f32({3}, {7, 8, 9}))});
  expect_values(r.outs[0], DType::F32, {4}, {7, 0, 8, 0});
  EXPECT_FALSE(any_failed(r));
}

TEST(MaskedScatter, ShortSourceFailsItsCheck) {
  Prog p;
  auto r = run_op(p, "aten::masked_scatter",
                  {p.t(f32({4}, {0, 0, 0, 0})), p.t(bools({4}, {1, 0, 1, 0})), p.t(f32({1}, {7}))});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_TRUE(r.checks[0]);
  EXPECT_EQ(r.messages[0], "masked_scatter: Number of elements of source < number of ones in mask");
}

// ---- unique

TEST(Unique, SortedInverseCounts) {
  Prog p;
  auto r = run_op(p, "aten::_unique2",
                  {p.t(f32({4}, {3, 1, 3, 2})), Arg::boolean(true), Arg::boolean(true), Arg::boolean(true)});
  ASSERT_EQ(r.outs.size(), 4u);
  expect_values(r.outs[0], DType::F32, {4}, {1, 2, 3, 0});
  expect_values(r.outs[1], DType::I64, {4}, {2, 0, 2, 1});
  expect_values(r.outs[2], DType::I64, {4}, {1, 1, 2, 0});
  expect_values(r.outs[3], DType::I64, {}, {3});
}

TEST(UniqueConsecutive, Runs) {
  Prog p;
  auto r = run_op(p, "aten::unique_consecutive",
                  {p.t(i64({5}, {1, 1, 2, 2, 1})), Arg::boolean(true), Arg::boolean(true), Arg::none()});
  expect_values(r.outs[0], DType::I64, {5}, {1, 2, 1, 0, 0});
  expect_values(r.outs[1], DType::I64, {5}, {0, 0, 1, 1, 2});
  expect_values(r.outs[2], DType::I64, {5}, {2, 2, 1, 0, 0});
  expect_values(r.outs[3], DType::I64, {}, {3});
}

TEST(UniqueDim, SortedRows) {
  Prog p;
  auto r = run_op(p, "aten::unique_dim",
                  {p.t(i64({4, 2}, {1, 2, 1, 2, 0, 5, 1, 2})), Arg::integer(0), Arg::boolean(true), Arg::boolean(true),
                   Arg::boolean(true)});
  expect_values(r.outs[0], DType::I64, {4, 2}, {0, 5, 1, 2, 0, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {4}, {1, 1, 0, 1});
  expect_values(r.outs[2], DType::I64, {4}, {1, 3, 0, 0});
  expect_values(r.outs[3], DType::I64, {}, {2});
}

// ---- repeat_interleave, bincount

TEST(RepeatInterleave, RepeatsIndices) {
  Prog p;
  auto r = run_op(p, "aten::repeat_interleave.Tensor", {p.t(i64({3}, {2, 0, 1})), Arg::integer(3)});
  expect_values(r.outs[0], DType::I64, {3}, {0, 0, 2});
}

TEST(Bincount, CountsAndWeights) {
  Prog p;
  auto r = run_op(p, "aten::bincount", {p.t(i64({3}, {1, 1, 3})), Arg::none(), Arg::integer(5)});
  expect_values(r.outs[0], DType::I64, {5}, {0, 2, 0, 1, 0});
  Prog q;
  auto w = run_op(q, "aten::bincount", {q.t(i64({3}, {1, 1, 3})), q.t(f32({3}, {0.5, 1, 2})), Arg::integer(5)});
  expect_values(w.outs[0], DType::F32, {5}, {0, 1.5, 0, 2, 0});
}

// ---- equal

TEST(Equal, Values) {
  Prog p;
  auto r = run_op(p, "aten::equal", {p.t(f32({2}, {1, 2})), p.t(f32({2}, {1, 2}))});
  expect_values(r.outs[0], DType::Bool, {}, {1});
  Prog q;
  auto d = run_op(q, "aten::equal", {q.t(f32({2}, {1, 2})), q.t(f32({2}, {1, 3}))});
  expect_values(d.outs[0], DType::Bool, {}, {0});
  Prog s;
  auto shapes = run_op(s, "aten::equal", {s.t(f32({2}, {1, 2})), s.t(f32({1, 2}, {1, 2}))});
  expect_values(shapes.outs[0], DType::Bool, {}, {0});
}

TEST(Equal, Golden) {
  hlo::Builder b;
  Value x = b.parameter({DType::F32, {2}});
  Value y = b.parameter({DType::F32, {2}});
  lowering::Context cx(b, {Arg::tensor(x), Arg::tensor(y)}, "aten::equal");
  auto outs = lowering::find_lowering("aten::equal")(cx);
  b.set_results(outs);
  EXPECT_EQ(b.module_text(),
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2xf32>, %1: tensor<2xf32>) -> (tensor<i1>) {\n"
            "    %2 = \"stablehlo.compare\"(%0, %1) {comparison_direction = #stablehlo<comparison_direction EQ>, "
            "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>\n"
            "    %3 = \"stablehlo.constant\"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>\n"
            "    %4 = \"stablehlo.reduce\"(%2, %3) ({\n"
            "    ^bb0(%5: tensor<i1>, %6: tensor<i1>):\n"
            "      %7 = \"stablehlo.and\"(%5, %6) : (tensor<i1>, tensor<i1>) -> tensor<i1>\n"
            "      \"stablehlo.return\"(%7) : (tensor<i1>) -> ()\n"
            "    }) {dimensions = array<i64: 0>} : (tensor<2xi1>, tensor<i1>) -> tensor<i1>\n"
            "    \"func.return\"(%4) : (tensor<i1>) -> ()\n"
            "  }\n"
            "}\n");
}

}  // namespace
}  // namespace torch_pjrt
