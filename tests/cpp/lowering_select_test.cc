// Numeric checks on the CPU plugin for the data-dependent selection
// lowerings (select.cc): padded results plus a count, nonzero_static,
// masked_scatter, unique, repeat_interleave, bincount, and a golden text for
// equal. Every expected value below is worked out by hand from PyTorch's
// documented semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::Dims;
using hlo::DType;
using hlo::Value;
using testing::Arg;

// One host array fed to a program parameter.
struct Host {
  DType dtype;
  Dims dims;
  std::vector<uint8_t> bytes;
};
template <typename T>
Host host(DType t, Dims dims, const std::vector<T>& v) {
  Host h{t, std::move(dims), std::vector<uint8_t>(v.size() * sizeof(T))};
  if (!v.empty()) std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  return h;
}
Host f32(Dims d, std::vector<float> v) { return host(DType::F32, std::move(d), v); }
Host f64(Dims d, std::vector<double> v) { return host(DType::F64, std::move(d), v); }
Host i64(Dims d, std::vector<int64_t> v) { return host(DType::I64, std::move(d), v); }
Host bools(Dims d, std::vector<uint8_t> v) { return host(DType::Bool, std::move(d), v); }
struct Output {
  DType dtype;
  Dims dims;
  std::vector<double> v;
};

// A program under construction: parameters are declared with their host data.
struct Prog {
  hlo::Builder b;
  std::vector<Host> inputs;
  Value in(Host h) {
    inputs.push_back(h);
    return b.parameter({h.dtype, h.dims});
  }
  Arg t(Host h) { return Arg::tensor(in(std::move(h))); }
  Arg scalar(double v) { return Arg::scalar(in(f64({}, {v}))); }
  Arg ints(std::vector<int64_t> v) { return Arg::integers(std::move(v)); }
};

double to_double(const uint8_t* p, DType t) {
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return *p;
    case DType::I8:
      return *reinterpret_cast<const int8_t*>(p);
    case DType::I16:
      return *reinterpret_cast<const int16_t*>(p);
    case DType::I32:
      return *reinterpret_cast<const int32_t*>(p);
    case DType::I64:
      return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::F32:
      return *reinterpret_cast<const float*>(p);
    case DType::F64:
      return *reinterpret_cast<const double*>(p);
    case DType::BF16: {
      uint32_t u = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    default:
      throw std::runtime_error("unsupported output dtype in test");
  }
}

struct Result {
  std::vector<Output> outs;  // the op's results
  std::vector<bool> checks;  // its runtime checks: true = failed
  std::vector<std::string> messages;
  std::string text;
};

// Lowers `op` with `args`, returns its results plus its checks as extra
// program results, compiled and run on the CPU plugin.
Result run_op(Prog& p, const std::string& op, std::vector<Arg> args) {
  auto fn = lowering::find_lowering(op);
  if (!fn) throw std::runtime_error("no lowering for " + op);
  lowering::Context cx(p.b, std::move(args), op);
  std::vector<Value> outs = fn(cx);
  std::vector<Value> all = outs;
  for (const auto& c : cx.checks()) all.push_back(c.failed);
  p.b.set_results(all);
  Result r;
  r.text = p.b.module_text();
  auto exe = testing::client().compile(r.text, 0);
  std::vector<runtime::BufferPtr> bufs;
  std::vector<PJRT_Buffer*> raw;
  for (const Host& h : p.inputs) {
    bufs.push_back(testing::client().from_host(h.bytes.data(), h.dtype, h.dims, 0));
    raw.push_back(bufs.back()->get());
  }
  auto res = exe->execute(raw);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& type = all[i].type;
    std::vector<uint8_t> bytes(type.numel() * hlo::byte_size(type.dtype));
    if (!bytes.empty()) res[i]->to_host(bytes.data(), bytes.size());
    std::vector<double> v;
    for (size_t k = 0; k < bytes.size(); k += hlo::byte_size(type.dtype)) v.push_back(to_double(&bytes[k], type.dtype));
    if (i < outs.size()) {
      r.outs.push_back({type.dtype, type.dims, v});
    } else {
      r.checks.push_back(v.at(0) != 0);
      r.messages.push_back(cx.checks()[i - outs.size()].message);
    }
  }
  return r;
}

bool any_failed(const Result& r) {
  for (bool c : r.checks)
    if (c) return true;
  return false;
}

void expect_values(const Output& o, DType dtype, const Dims& dims, const std::vector<double>& want) {
  EXPECT_EQ(o.dtype, dtype);
  EXPECT_EQ(o.dims, dims);
  ASSERT_EQ(o.v.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(o.v[i])) << "at " << i;
    else
      EXPECT_NEAR(o.v[i], want[i], 1e-5) << "at " << i;
  }
}

// ---- nonzero

TEST(SelectNonzero, PaddedRowsAndCount) {
  Prog p;
  auto r = run_op(p, "aten::nonzero", {p.t(f32({3, 2}, {0, 1, 2, 0, 0, 3}))});
  ASSERT_EQ(r.outs.size(), 2u);
  expect_values(r.outs[0], DType::I64, {6, 2}, {0, 1, 1, 0, 2, 1, 0, 0, 0, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {3});
}

TEST(SelectNonzero, BoolAndEmpty) {
  Prog p;
  auto r = run_op(p, "aten::nonzero", {p.t(bools({4}, {0, 0, 0, 1}))});
  expect_values(r.outs[0], DType::I64, {4, 1}, {3, 0, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {1});
  Prog q;
  auto e = run_op(q, "aten::nonzero", {q.t(f32({0, 3}, {}))});
  expect_values(e.outs[0], DType::I64, {0, 2}, {});
  expect_values(e.outs[1], DType::I64, {}, {0});
}

TEST(SelectNonzeroStatic, PadsWithFillAndTruncates) {
  Prog p;
  auto r = run_op(p, "aten::nonzero_static", {p.t(f32({4}, {0, 5, 0, 7})), Arg::integer(4), Arg::integer(-1)});
  expect_values(r.outs[0], DType::I64, {4, 1}, {1, 3, -1, -1});
  Prog q;
  auto t = run_op(q, "aten::nonzero_static", {q.t(f32({4}, {0, 5, 0, 7})), Arg::integer(1), Arg::integer(-1)});
  expect_values(t.outs[0], DType::I64, {1, 1}, {1});
}

// ---- masked_select / masked_scatter

TEST(SelectMaskedSelect, PaddedValuesAndCount) {
  Prog p;
  auto r = run_op(p, "aten::masked_select", {p.t(f32({4}, {1, 2, 3, 4})), p.t(bools({4}, {1, 0, 1, 1}))});
  expect_values(r.outs[0], DType::F32, {4}, {1, 3, 4, 0});
  expect_values(r.outs[1], DType::I64, {}, {3});
}

TEST(SelectMaskedSelect, MaskBroadcastsOverRows) {
  Prog p;
  auto r = run_op(p, "aten::masked_select", {p.t(f32({2, 2}, {1, 2, 3, 4})), p.t(bools({2}, {0, 1}))});
  expect_values(r.outs[0], DType::F32, {4}, {2, 4, 0, 0});
  expect_values(r.outs[1], DType::I64, {}, {2});
}

TEST(SelectMaskedScatter, TakesSourceInOrder) {
  Prog p;
  auto r = run_op(p, "aten::masked_scatter",
                  {p.t(f32({4}, {0, 0, 0, 0})), p.t(bools({4}, {1, 0, 1, 0})), p.t(f32({3}, {7, 8, 9}))});
  expect_values(r.outs[0], DType::F32, {4}, {7, 0, 8, 0});
  EXPECT_FALSE(any_failed(r));
}

TEST(SelectMaskedScatter, ShortSourceFailsItsCheck) {
  Prog p;
  auto r = run_op(p, "aten::masked_scatter",
                  {p.t(f32({4}, {0, 0, 0, 0})), p.t(bools({4}, {1, 0, 1, 0})), p.t(f32({1}, {7}))});
  ASSERT_EQ(r.checks.size(), 1u);
  EXPECT_TRUE(r.checks[0]);
  EXPECT_EQ(r.messages[0], "masked_scatter: Number of elements of source < number of ones in mask");
}

// ---- unique

TEST(SelectUnique, SortedInverseCounts) {
  Prog p;
  auto r = run_op(p, "aten::_unique2",
                  {p.t(f32({4}, {3, 1, 3, 2})), Arg::boolean(true), Arg::boolean(true), Arg::boolean(true)});
  ASSERT_EQ(r.outs.size(), 4u);
  expect_values(r.outs[0], DType::F32, {4}, {1, 2, 3, 0});
  expect_values(r.outs[1], DType::I64, {4}, {2, 0, 2, 1});
  expect_values(r.outs[2], DType::I64, {4}, {1, 1, 2, 0});
  expect_values(r.outs[3], DType::I64, {}, {3});
}

TEST(SelectUniqueConsecutive, Runs) {
  Prog p;
  auto r = run_op(p, "aten::unique_consecutive",
                  {p.t(i64({5}, {1, 1, 2, 2, 1})), Arg::boolean(true), Arg::boolean(true), Arg::none()});
  expect_values(r.outs[0], DType::I64, {5}, {1, 2, 1, 0, 0});
  expect_values(r.outs[1], DType::I64, {5}, {0, 0, 1, 1, 2});
  expect_values(r.outs[2], DType::I64, {5}, {2, 2, 1, 0, 0});
  expect_values(r.outs[3], DType::I64, {}, {3});
}

TEST(SelectUniqueDim, SortedRows) {
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

TEST(SelectRepeatInterleave, RepeatsIndices) {
  Prog p;
  auto r = run_op(p, "aten::repeat_interleave.Tensor", {p.t(i64({3}, {2, 0, 1})), Arg::integer(3)});
  expect_values(r.outs[0], DType::I64, {3}, {0, 0, 2});
}

TEST(SelectBincount, CountsAndWeights) {
  Prog p;
  auto r = run_op(p, "aten::bincount", {p.t(i64({3}, {1, 1, 3})), Arg::none(), Arg::integer(5)});
  expect_values(r.outs[0], DType::I64, {5}, {0, 2, 0, 1, 0});
  Prog q;
  auto w = run_op(q, "aten::bincount", {q.t(i64({3}, {1, 1, 3})), q.t(f32({3}, {0.5, 1, 2})), Arg::integer(5)});
  expect_values(w.outs[0], DType::F32, {5}, {0, 1.5, 0, 2, 0});
}

// ---- equal

TEST(SelectEqual, Values) {
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

TEST(SelectEqual, Golden) {
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
