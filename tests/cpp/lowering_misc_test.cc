// Golden StableHLO text and numeric checks on the CPU plugin for the
// creation (linspace, eye), scan (cummax, logcumsumexp), order-statistic
// (median, mode), index (index_fill, take, unfold_backward) and search
// (searchsorted, histc) lowerings. Expected values are worked out by hand
// from PyTorch's definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::lower;
using testing::scalar;
using testing::tensor;
using testing::values;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- creation

TEST(Misc, EyeGolden) {
  auto l = lower("aten::eye.m_out", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::integer(2), Arg::integer(3), tensor(b, DType::F32, {2, 3})};
  });
  EXPECT_EQ(
      l.text,
      "module @torch_pjrt {\n"
      "  func.func public @main(%0: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
      "    %1 = \"stablehlo.iota\"() {iota_dimension = 0 : i64} : () -> tensor<2x3xi64>\n"
      "    %2 = \"stablehlo.iota\"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi64>\n"
      "    %3 = \"stablehlo.compare\"(%1, %2) {comparison_direction = #stablehlo<comparison_direction EQ>, "
      "compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>\n"
      "    %4 = \"stablehlo.convert\"(%3) : (tensor<2x3xi1>) -> tensor<2x3xf32>\n"
      "    \"func.return\"(%4) : (tensor<2x3xf32>) -> ()\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(values<float>(exec(l, {bytes(std::vector<float>(6, 7))})[0]), (std::vector<float>{1, 0, 0, 0, 1, 0}));
}

TEST(Misc, LinspaceFloat) {
  auto l = lower("aten::linspace.out", [](hlo::Builder& b) {
    return std::vector<Arg>{scalar(b, DType::F64), scalar(b, DType::F64), Arg::integer(5), tensor(b, DType::F32, {5})};
  });
  auto r = values<float>(
      exec(l, {bytes(std::vector<double>{-1}), bytes(std::vector<double>{1}), bytes(std::vector<float>(5, 0))})[0]);
  EXPECT_EQ(r, (std::vector<float>{-1, -0.5, 0, 0.5, 1}));
}

// Integral linspace truncates: step 10/3 in double, first half from start,
// second half back from end: 0, 3.33 -> 3, 10 - 3.33 -> 6, 10.
TEST(Misc, LinspaceInt) {
  auto l = lower("aten::linspace.out", [](hlo::Builder& b) {
    return std::vector<Arg>{scalar(b, DType::I64), scalar(b, DType::I64), Arg::integer(4), tensor(b, DType::I64, {4})};
  });
  auto r = values<int64_t>(
      exec(l, {bytes(std::vector<int64_t>{0}), bytes(std::vector<int64_t>{10}), bytes(std::vector<int64_t>(4, 0))})[0]);
  EXPECT_EQ(r, (std::vector<int64_t>{0, 3, 6, 10}));
}

TEST(Misc, EyeOutMustHaveTheShape) {
  EXPECT_THROW(lower("aten::eye.out",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::integer(3), tensor(b, DType::F32, {0})};
                     }),
               lowering::LoweringError);
}

// ---- scans

// Ties move the index forward; a NaN wins and stays until the next NaN.
TEST(Misc, CummaxHelper) {
  auto l = lower("aten::_cummax_helper", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {6}), tensor(b, DType::F32, {6}), tensor(b, DType::I64, {6}),
                            Arg::integer(0)};
  });
  auto r = exec(l, {bytes(std::vector<float>{1, 3, 3, 2, kNaN, 5}), bytes(std::vector<float>(6, 0)),
                    bytes(std::vector<int64_t>(6, 0))});
  auto v = values<float>(r[0]);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{1, 3, 3, 3}));
  EXPECT_TRUE(std::isnan(v[4]) && std::isnan(v[5]));
  EXPECT_EQ(values<int64_t>(r[1]), (std::vector<int64_t>{0, 1, 2, 2, 4, 4}));
}

// log(e^0) = 0, log(e^0 + e^0) = log 2, log(2 + 2) = log 4; -inf adds nothing.
TEST(Misc, Logcumsumexp) {
  auto l = lower("aten::_logcumsumexp", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {4}), Arg::integer(-1)};
  });
  float ninf = -std::numeric_limits<float>::infinity();
  auto r = values<float>(exec(l, {bytes(std::vector<float>{0, 0, std::log(2.0f), ninf})})[0]);
  std::vector<float> want{0, std::log(2.0f), std::log(4.0f), std::log(4.0f)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r[i], want[i], 1e-6) << i;
}

// ---- order statistics

// Row 0 holds a NaN: median gives it (index 3), nanmedian the lower median
// of {3, 1, 2}. Row 1 sorts to 1 (1), 2 (3), 4 (0), 4 (2): lower median 2 at 3.
TEST(Misc, MedianAndNanmedianDim) {
  std::vector<float> x{3, 1, 2, kNaN, 4, 1, 4, 2};
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
TEST(Misc, Mode) {
  auto l = lower("aten::mode", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {5}), Arg::integer(0), Arg::boolean(false)};
  });
  auto r = exec(l, {bytes(std::vector<float>{2, 1, 2, 1, 3})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{1}));
  EXPECT_EQ(values<int64_t>(r[1]), (std::vector<int64_t>{3}));
}

TEST(Misc, KthvalueOutOfRange) {
  EXPECT_THROW(
      lower(
          "aten::kthvalue",
          [](hlo::Builder& b) {
            return std::vector<Arg>{tensor(b, DType::F32, {3}), Arg::integer(4), Arg::integer(0), Arg::boolean(false)};
          }),
      lowering::LoweringError);
}

// ---- index ops

TEST(Misc, IndexFillWrapsNegativeIndices) {
  auto l = lower("aten::index_fill.int_Scalar", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integer(0), tensor(b, DType::I64, {1}),
                            scalar(b, DType::F64)};
  });
  auto r = exec(l, {bytes(std::vector<float>(6, 0)), bytes(std::vector<int64_t>{-1}), bytes(std::vector<double>{5})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{0, 0, 0, 0, 5, 5}));
}

TEST(Misc, TakeWrapsNegativeIndices) {
  auto l = lower("aten::take", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), tensor(b, DType::I64, {3})};
  });
  auto r = exec(l, {bytes(std::vector<float>{1, 2, 3, 4}), bytes(std::vector<int64_t>{-1, 0, 2})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{4, 1, 3}));
}

// x.unfold(0, 2, 1) of a 4-vector has windows [0,1], [1,2], [2,3]: the
// middle elements are in two windows each.
TEST(Misc, UnfoldBackward) {
  auto l = lower("aten::unfold_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integers({4}), Arg::integer(0), Arg::integer(2),
                            Arg::integer(1)};
  });
  EXPECT_EQ(values<float>(exec(l, {bytes(std::vector<float>(6, 1))})[0]), (std::vector<float>{1, 2, 2, 1}));
}

// ---- search and histograms

TEST(Misc, SearchsortedLeftAndRight) {
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
TEST(Misc, Histc) {
  auto l = lower("aten::histc", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {6}), Arg::integer(5), scalar(b, DType::F64), scalar(b, DType::F64)};
  });
  auto r = exec(
      l, {bytes(std::vector<float>{0, 1, 2, 2, 5, -1}), bytes(std::vector<double>{0}), bytes(std::vector<double>{5})});
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{1, 1, 2, 0, 1}));
}

// ---- triangle indices, segment_reduce

// The strict upper triangle of a 3x3 matrix, row-major: (0,1), (0,2), (1,2).
TEST(Misc, TriuIndices) {
  auto l = lower("aten::triu_indices", [](hlo::Builder&) {
    return std::vector<Arg>{Arg::integer(3), Arg::integer(3), Arg::integer(1), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 3}));
  EXPECT_EQ(values<int64_t>(exec(l, {})[0]), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
}

// Segments {1, 2}, {}, {3, 4, 5}: sums 3, 0, 12; means 1.5, NaN (empty,
// no initial), 4.
TEST(Misc, SegmentReduceSumAndMean) {
  for (std::string red : {"sum", "mean"}) {
    auto l = lower("aten::segment_reduce", [&](hlo::Builder& b) {
      return std::vector<Arg>{tensor(b, DType::F32, {5}),
                              Arg::string(red),
                              tensor(b, DType::I64, {3}),
                              Arg::none(),
                              Arg::none(),
                              Arg::integer(0),
                              Arg::boolean(false),
                              Arg::none()};
    });
    auto r =
        values<float>(exec(l, {bytes(std::vector<float>{1, 2, 3, 4, 5}), bytes(std::vector<int64_t>{2, 0, 3})})[0]);
    if (red == "sum") {
      EXPECT_EQ(r, (std::vector<float>{3, 0, 12}));
    } else {
      EXPECT_EQ(r[0], 1.5f);
      EXPECT_TRUE(std::isnan(r[1]));
      EXPECT_EQ(r[2], 4.0f);
    }
  }
}

}  // namespace
}  // namespace torch_pjrt
