// Sorting and order statistics (sorting.cc) on the CPU plugin: sort (NaN
// last, stable), topk, kthvalue, median and nanmedian, mode, searchsorted and
// histc. Expected values are worked out by hand from PyTorch's definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::expect_values;
using testing::lower;
using testing::Prog;
using testing::run_op;
using testing::scalar;
using testing::tensor;
using testing::values;
using testing::hosts::bools;
using testing::hosts::f32;
using testing::hosts::i64;

const double kNaN = std::nan("");
const float kNaNf = std::numeric_limits<float>::quiet_NaN();

// ---- sort / topk

TEST(Sort, NaNIsLargestAndSortIsStable) {
  {
    Prog p;
    auto r = run_op(p, "aten::sort", {p.t(f32({5}, {3, float(kNaN), 1, 2, 1})), Arg::integer(-1), Arg::boolean(false)});
    expect_values(r.outs[0], DType::F32, {5}, {1, 1, 2, 3, kNaN});
    expect_values(r.outs[1], DType::I64, {5}, {2, 4, 3, 0, 1});
  }
  {
    Prog p;
    auto r =
        run_op(p, "aten::sort.stable",
               {p.t(f32({5}, {3, float(kNaN), 1, 2, 1})), Arg::boolean(true), Arg::integer(0), Arg::boolean(true)});
    expect_values(r.outs[0], DType::F32, {5}, {kNaN, 3, 2, 1, 1});
    expect_values(r.outs[1], DType::I64, {5}, {1, 0, 3, 2, 4});
  }
}

TEST(Sort, AlongDim0OfInts) {
  Prog p;
  auto r = run_op(p, "aten::sort", {p.t(i64({2, 2}, {4, 1, 2, 3})), Arg::integer(0), Arg::boolean(false)});
  expect_values(r.outs[0], DType::I64, {2, 2}, {2, 1, 4, 3});
  expect_values(r.outs[1], DType::I64, {2, 2}, {1, 0, 0, 1});
}

TEST(Sort, ZeroDimInput) {
  {
    Prog p;
    auto r = run_op(p, "aten::sort", {p.t(f32({}, {5})), Arg::integer(-1), Arg::boolean(false)});
    expect_values(r.outs[0], DType::F32, {}, {5});
    expect_values(r.outs[1], DType::I64, {}, {0});
  }
}

TEST(Sort, Bool) {
  {
    Prog p;
    auto r = run_op(p, "aten::sort", {p.t(bools({3}, {1, 0, 1})), Arg::integer(0), Arg::boolean(false)});
    expect_values(r.outs[0], DType::Bool, {3}, {0, 1, 1});
    expect_values(r.outs[1], DType::I64, {3}, {1, 0, 2});
  }
}

TEST(Topk, LargestAndSmallest) {
  {
    Prog p;
    auto r = run_op(
        p, "aten::topk",
        {p.t(f32({4}, {1, 5, 3, 4})), Arg::integer(2), Arg::integer(-1), Arg::boolean(true), Arg::boolean(true)});
    expect_values(r.outs[0], DType::F32, {2}, {5, 4});
    expect_values(r.outs[1], DType::I64, {2}, {1, 3});
  }
  {
    Prog p;
    auto r = run_op(
        p, "aten::topk",
        {p.t(f32({4}, {1, 5, 3, 4})), Arg::integer(2), Arg::integer(-1), Arg::boolean(false), Arg::boolean(true)});
    expect_values(r.outs[0], DType::F32, {2}, {1, 3});
    expect_values(r.outs[1], DType::I64, {2}, {0, 2});
  }
}

TEST(Topk, ZeroDimInputWithKZeroGivesTheElement) {
  // CPU: topk(tensor(5.), 0) is (tensor(5.), tensor(0)), as for k = 1.
  for (int64_t k : {0, 1}) {
    Prog p;
    auto r = run_op(p, "aten::topk",
                    {p.t(f32({}, {5})), Arg::integer(k), Arg::integer(-1), Arg::boolean(true), Arg::boolean(true)});
    expect_values(r.outs[0], DType::F32, {}, {5});
    expect_values(r.outs[1], DType::I64, {}, {0});
  }
}

// ---- order statistics

// Row 0 holds a NaN: median gives it (index 3), nanmedian the lower median
// of {3, 1, 2}. Row 1 sorts to 1 (1), 2 (3), 4 (0), 4 (2): lower median 2 at 3.
TEST(Sorting, MedianAndNanmedianDim) {
  std::vector<float> x{3, 1, 2, kNaNf, 4, 1, 4, 2};
  for (bool nan : {false, true}) {
    auto l = lower(nan ? "aten::nanmedian.dim" : "aten::median.dim", [](hlo::Builder& b) {
      return std::vector<Arg>{tensor(b, DType::F32, {2, 4}), Arg::integer(1), Arg::boolean(false)};
    });
    auto r = exec(l, {bytes(x)});
    auto v = values<float>(r[0]);
    auto i = values<int64_t>(r[1]);
    if (nan) {
      EXPECT_EQ(v, (std::vector<float>{2, 2}));
      EXPECT_EQ(i, (std::vector<int64_t>{2, 3}));
    } else {
      EXPECT_TRUE(std::isnan(v[0]));
      EXPECT_EQ(v[1], 2);
      EXPECT_EQ(i, (std::vector<int64_t>{3, 3}));
    }
  }
}

// 1 and 2 both occur twice: the smaller value wins, with its last index.
TEST(Sorting, Mode) {
  auto l = lower("aten::mode", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {5}), Arg::integer(0), Arg::boolean(false)};
  });
  auto r = exec(l, {bytes(std::vector<float>{2, 1, 2, 1, 3})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{1}));
  EXPECT_EQ(values<int64_t>(r[1]), (std::vector<int64_t>{3}));
}

TEST(Sorting, KthvalueOutOfRange) {
  EXPECT_THROW(
      lower(
          "aten::kthvalue",
          [](hlo::Builder& b) {
            return std::vector<Arg>{tensor(b, DType::F32, {3}), Arg::integer(4), Arg::integer(0), Arg::boolean(false)};
          }),
      lowering::LoweringError);
}

// ---- search and histograms

TEST(Sorting, SearchsortedLeftAndRight) {
  for (bool right : {false, true}) {
    auto l = lower("aten::searchsorted.Tensor", [&](hlo::Builder& b) {
      return std::vector<Arg>{tensor(b, DType::F32, {4}),
                              tensor(b, DType::F32, {4}),
                              Arg::boolean(false),
                              Arg::boolean(right),
                              Arg::none(),
                              Arg::none()};
    });
    auto r =
        values<int64_t>(exec(l, {bytes(std::vector<float>{1, 3, 5, 7}), bytes(std::vector<float>{0, 3, 6, 9})})[0]);
    EXPECT_EQ(r, right ? (std::vector<int64_t>{0, 2, 3, 4}) : (std::vector<int64_t>{0, 1, 3, 4}));
  }
}

// Bins [0,1), [1,2), ..., [4,5]: 5 lands in the last (closed) bin, -1 is ignored.
TEST(Sorting, Histc) {
  auto l = lower("aten::histc", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {6}), Arg::integer(5), scalar(b, DType::F64), scalar(b, DType::F64)};
  });
  auto r = exec(
      l, {bytes(std::vector<float>{0, 1, 2, 2, 5, -1}), bytes(std::vector<double>{0}), bytes(std::vector<double>{5})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{1, 1, 2, 0, 1}));
}

}  // namespace
}  // namespace torch_pjrt
