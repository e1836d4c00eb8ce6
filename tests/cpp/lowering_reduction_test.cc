// Golden StableHLO text and numeric checks on the CPU plugin for the
// reduction lowerings. Expected values are worked out by hand.
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
using testing::lowering_error;
using testing::scalar;
using testing::tensor;
using testing::values;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const std::vector<float> k123456 = {1, 2, 3, 4, 5, 6};  // as [2, 3]: [[1, 2, 3], [4, 5, 6]]

TEST(Reduction, SumDimGolden) {
  auto l = lower("aten::sum.dim_IntList", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({-1}), Arg::boolean(false), Arg::none()};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x3xf32>) -> (tensor<2xf32>) {\n"
            "    %1 = \"stablehlo.constant\"() {value = dense<0.00000000000000000e+00> : tensor<f32>} : () -> tensor<f32>\n"
            "    %2 = \"stablehlo.reduce\"(%0, %1) ({\n"
            "    ^bb0(%3: tensor<f32>, %4: tensor<f32>):\n"
            "      %5 = \"stablehlo.add\"(%3, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
            "      \"stablehlo.return\"(%5) : (tensor<f32>) -> ()\n"
            "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"
            "    \"func.return\"(%2) : (tensor<2xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Reduction, SumDimKeepdim) {
  auto l = lower("aten::sum.dim_IntList", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({0}), Arg::boolean(true), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 3}));
  EXPECT_EQ(values<float>(exec(l, {bytes(k123456)})[0]), (std::vector<float>{5, 7, 9}));
}

TEST(Reduction, SumDimNoneOrEmptyMeansAll) {
  for (Arg dim : {Arg::none(), Arg::integers({})}) {
    auto l = lower("aten::sum.dim_IntList", [&](hlo::Builder& b) {
      return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), dim, Arg::boolean(false), Arg::none()};
    });
    ASSERT_EQ(l.results[0].rank(), 0);
    EXPECT_EQ(values<float>(exec(l, {bytes(k123456)})[0]), (std::vector<float>{21}));
  }
}

TEST(Reduction, SumOfIntsIsInt64) {
  auto l = lower("aten::sum", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::I32, {2, 3}), Arg::none()}; });
  ASSERT_EQ(l.results[0].dtype(), DType::I64);
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<int32_t>{1, 2, 3, 4, 5, 2000000000})})[0]),
            (std::vector<int64_t>{2000000015}));
}

TEST(Reduction, SumOfBoolIsInt64) {
  auto l = lower("aten::sum", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::Bool, {4}), Arg::none()}; });
  ASSERT_EQ(l.results[0].dtype(), DType::I64);
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<uint8_t>{1, 0, 1, 1})})[0]), (std::vector<int64_t>{3}));
}

TEST(Reduction, SumWithDtype) {
  auto l = lower("aten::sum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I32, {3}), Arg::dtype(DType::F64)};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::F64);
  EXPECT_EQ(values<double>(exec(l, {bytes(std::vector<int32_t>{1, -2, 7})})[0]), (std::vector<double>{6}));
}

TEST(Reduction, HalfSumAccumulatesInFloat32) {
  // In float16, 2048 + 1 rounds back to 2048 (spacing 2); in float32 the sum
  // 2048 + 1 + 1 = 2050 is exact and representable in float16 (0x6801).
  auto l = lower("aten::sum.dim_IntList", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F16, {3}), Arg::none(), Arg::boolean(false), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::F16);
  EXPECT_NE(l.text.find("-> tensor<3xf32>"), std::string::npos);
  EXPECT_EQ(values<uint16_t>(exec(l, {bytes(std::vector<uint16_t>{0x6800, 0x3C00, 0x3C00})})[0]),
            (std::vector<uint16_t>{0x6801}));
}

TEST(Reduction, DuplicateDimsFail) {
  auto msg = lowering_error("aten::sum.dim_IntList", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({1, -1}), Arg::boolean(false), Arg::none()};
  });
  EXPECT_NE(msg.find("dim 1 appears multiple times"), std::string::npos) << msg;
}

TEST(Reduction, Mean) {
  auto all = lower("aten::mean", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::none()}; });
  EXPECT_EQ(values<float>(exec(all, {bytes(k123456)})[0]), (std::vector<float>{3.5f}));
  auto dim = lower("aten::mean.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({1}), Arg::boolean(true), Arg::none()};
  });
  ASSERT_EQ(dim.results[0].dims(), (hlo::Dims{2, 1}));
  EXPECT_EQ(values<float>(exec(dim, {bytes(k123456)})[0]), (std::vector<float>{2, 5}));
}

TEST(Reduction, MeanOfIntsNeedsDtype) {
  auto msg = lowering_error("aten::mean", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::I64, {3}), Arg::none()}; });
  EXPECT_NE(msg.find("mean(): could not infer output dtype"), std::string::npos) << msg;
  auto l = lower("aten::mean", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::I64, {4}), Arg::dtype(DType::F64)}; });
  EXPECT_EQ(values<double>(exec(l, {bytes(std::vector<int64_t>{1, 2, 3, 5})})[0]), (std::vector<double>{2.75}));
}

TEST(Reduction, Prod) {
  auto all = lower("aten::prod", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::I32, {4}), Arg::none()}; });
  ASSERT_EQ(all.results[0].dtype(), DType::I64);
  EXPECT_EQ(values<int64_t>(exec(all, {bytes(std::vector<int32_t>{1, -2, 3, 4})})[0]), (std::vector<int64_t>{-24}));
  auto dim = lower("aten::prod.dim_int", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integer(-1), Arg::boolean(false), Arg::none()};
  });
  EXPECT_EQ(values<float>(exec(dim, {bytes(k123456)})[0]), (std::vector<float>{6, 120}));
}

TEST(Reduction, AmaxAmin) {
  const std::vector<float> x = {1, 5, 3, 4, 2, 6};
  auto mx = lower("aten::amax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({1}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<float>(exec(mx, {bytes(x)})[0]), (std::vector<float>{5, 6}));
  auto mn = lower("aten::amin", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({0}), Arg::boolean(true)};
  });
  ASSERT_EQ(mn.results[0].dims(), (hlo::Dims{1, 3}));
  EXPECT_EQ(values<float>(exec(mn, {bytes(x)})[0]), (std::vector<float>{1, 2, 3}));
  auto all = lower("aten::amax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<float>(exec(all, {bytes(x)})[0]), (std::vector<float>{6}));
}

TEST(Reduction, AmaxAminOfInt64Extremes) {
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  auto mx = lower("aten::amax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {2, 2}), Arg::integers({1}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<int64_t>(exec(mx, {bytes(std::vector<int64_t>{lo, lo, hi, -1})})[0]), (std::vector<int64_t>{lo, hi}));
  auto mn = lower("aten::amin", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {2, 2}), Arg::integers({1}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<int64_t>(exec(mn, {bytes(std::vector<int64_t>{hi, hi, lo, 7})})[0]), (std::vector<int64_t>{hi, lo}));
}

TEST(Reduction, MaxMinAll) {
  auto mx = lower("aten::max", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::F32, {2, 3})}; });
  ASSERT_EQ(mx.results[0].rank(), 0);
  EXPECT_EQ(values<float>(exec(mx, {bytes(std::vector<float>{1, -5, 3, 4, 2, -6})})[0]), (std::vector<float>{4}));
  auto mn = lower("aten::min", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::I32, {2, 3})}; });
  EXPECT_EQ(values<int32_t>(exec(mn, {bytes(std::vector<int32_t>{1, -5, 3, 4, 2, -6})})[0]), (std::vector<int32_t>{-6}));
  // NaN wins, wherever it sits.
  for (int at = 0; at < 6; ++at) {
    std::vector<float> x = {1, -5, 3, 4, 2, -6};
    x[at] = float(kNaN);
    EXPECT_TRUE(std::isnan(values<float>(exec(mx, {bytes(x)})[0])[0])) << at;
  }
  auto mnf = lower("aten::min", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::F32, {40})}; });
  std::vector<float> x(40, 1.f);
  x[0] = -3;
  x[21] = float(kNaN);
  EXPECT_TRUE(std::isnan(values<float>(exec(mnf, {bytes(x)})[0])[0]));
}

TEST(Reduction, AmaxPropagatesNaN) {
  auto l = lower("aten::amax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integers({1}), Arg::boolean(false)};
  });
  auto out = values<float>(exec(l, {bytes(std::vector<float>{float(kNaN), 5, 3, 4, 2, 6})})[0]);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 6);
}

TEST(Reduction, MaxMinOfEmptyFail) {
  auto msg = lowering_error("aten::max", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::F32, {0, 3})}; });
  EXPECT_NE(msg.find("Expected reduction dim to be specified for input.numel() == 0"), std::string::npos) << msg;
}

TEST(Reduction, MaxDimFirstIndexOnTies) {
  auto l = lower("aten::max.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integer(1), Arg::boolean(false)};
  });
  ASSERT_EQ(l.results.size(), 2u);
  ASSERT_EQ(l.results[1].dtype(), DType::I64);
  auto out = exec(l, {bytes(std::vector<float>{1, 5, 5, 7, 2, 7})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{5, 7}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 0}));
}

TEST(Reduction, MaxDimLongRowAndNaN) {
  // 40 columns so that the reduction is not a single sequential pass.
  auto l = lower("aten::max.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 40}), Arg::integer(-1), Arg::boolean(true)};
  });
  ASSERT_EQ(l.results[1].dims(), (hlo::Dims{2, 1}));
  std::vector<float> x(80, 0.f);
  x[17] = x[30] = x[39] = 5;                    // row 0: first max at 17
  x[40 + 3] = 9;                                // row 1: a larger value before the NaNs
  x[40 + 25] = x[40 + 11] = float(kNaN);        // first NaN at 11
  auto out = exec(l, {bytes(x)});
  auto v = values<float>(out[0]);
  EXPECT_EQ(v[0], 5);
  EXPECT_TRUE(std::isnan(v[1]));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{17, 11}));
}

TEST(Reduction, MinDim) {
  auto l = lower("aten::min.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {2, 3}), Arg::integer(0), Arg::boolean(false)};
  });
  auto out = exec(l, {bytes(std::vector<int64_t>{3, 1, 2, 0, 1, 9})});
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 0, 0}));
}

TEST(Reduction, ArgmaxFlattened) {
  auto l = lower("aten::argmax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::none(), Arg::boolean(false)};
  });
  ASSERT_EQ(l.results[0].rank(), 0);
  ASSERT_EQ(l.results[0].dtype(), DType::I64);
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<float>{1, 9, 9, 0})})[0]), (std::vector<int64_t>{1}));
  auto keep = lower("aten::argmax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::none(), Arg::boolean(true)};
  });
  ASSERT_EQ(keep.results[0].dims(), (hlo::Dims{1, 1}));
  EXPECT_EQ(values<int64_t>(exec(keep, {bytes(std::vector<float>{1, 2, 9, 0})})[0]), (std::vector<int64_t>{2}));
}

TEST(Reduction, ArgminDim) {
  auto l = lower("aten::argmin", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<float>{3, 1, 2, 4})})[0]), (std::vector<int64_t>{1, 0}));
}

TEST(Reduction, VarStdDefaultCorrection) {
  // x = [1, 2, 3, 4]: mean 2.5, squared deviations sum to 5; var = 5 / 3.
  auto v = lower("aten::var.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {4}), Arg::none(), Arg::none(), Arg::boolean(false)};
  });
  const std::vector<float> x = {1, 2, 3, 4};
  EXPECT_NEAR(values<float>(exec(v, {bytes(x)})[0])[0], 5.0 / 3.0, 1e-6);
  auto s = lower("aten::std.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {4}), Arg::none(), Arg::none(), Arg::boolean(false)};
  });
  EXPECT_NEAR(values<float>(exec(s, {bytes(x)})[0])[0], std::sqrt(5.0 / 3.0), 1e-6);
}

TEST(Reduction, VarRuntimeCorrection) {
  auto v = lower("aten::var.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F64, {4}), Arg::integers({0}), scalar(b, DType::I64), Arg::boolean(true)};
  });
  ASSERT_EQ(v.results[0].dims(), (hlo::Dims{1}));
  const std::vector<double> x = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(values<double>(exec(v, {bytes(x), bytes(std::vector<int64_t>{0})})[0])[0], 1.25);
  EXPECT_DOUBLE_EQ(values<double>(exec(v, {bytes(x), bytes(std::vector<int64_t>{2})})[0])[0], 2.5);
  // N - correction <= 0 divides by 0: inf.
  EXPECT_EQ(values<double>(exec(v, {bytes(x), bytes(std::vector<int64_t>{4})})[0])[0], kInf);
}

TEST(Reduction, VarMean) {
  // Rows [1, 2] and [3, 5]: means 1.5 and 4, unbiased vars 0.5 and 2.
  auto l = lower("aten::var_mean.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::integers({1}), Arg::none(), Arg::boolean(false)};
  });
  ASSERT_EQ(l.results.size(), 2u);
  auto out = exec(l, {bytes(std::vector<float>{1, 2, 3, 5})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0.5f, 2.f}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1.5f, 4.f}));
}

TEST(Reduction, StdMean) {
  auto l = lower("aten::std_mean.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::integers({1}), Arg::none(), Arg::boolean(false)};
  });
  auto out = exec(l, {bytes(std::vector<float>{1, 2, 3, 5})});
  auto s = values<float>(out[0]);
  EXPECT_NEAR(s[0], std::sqrt(0.5), 1e-6);
  EXPECT_NEAR(s[1], std::sqrt(2.0), 1e-6);
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1.5f, 4.f}));
}

TEST(Reduction, VarOfIntsFails) {
  auto msg = lowering_error("aten::var.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {4}), Arg::none(), Arg::none(), Arg::boolean(false)};
  });
  EXPECT_NE(msg.find("std and var only support floating point"), std::string::npos) << msg;
}

TEST(Reduction, AnyAll) {
  auto any = lower("aten::any", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::Bool, {3})}; });
  auto all = lower("aten::all", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::Bool, {3})}; });
  ASSERT_EQ(any.results[0].dtype(), DType::Bool);
  EXPECT_EQ(values<uint8_t>(exec(any, {bytes(std::vector<uint8_t>{0, 0, 1})})[0]), (std::vector<uint8_t>{1}));
  EXPECT_EQ(values<uint8_t>(exec(any, {bytes(std::vector<uint8_t>{0, 0, 0})})[0]), (std::vector<uint8_t>{0}));
  EXPECT_EQ(values<uint8_t>(exec(all, {bytes(std::vector<uint8_t>{1, 0, 1})})[0]), (std::vector<uint8_t>{0}));
  EXPECT_EQ(values<uint8_t>(exec(all, {bytes(std::vector<uint8_t>{1, 1, 1})})[0]), (std::vector<uint8_t>{1}));
}

TEST(Reduction, AnyAllDimOfFloats) {
  // NaN counts as true (it is non-zero).
  const std::vector<float> x = {0, 0, 0, float(kNaN), 2, 3};
  auto any = lower("aten::any.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integer(1), Arg::boolean(false)};
  });
  ASSERT_EQ(any.results[0].dtype(), DType::Bool);
  EXPECT_EQ(values<uint8_t>(exec(any, {bytes(x)})[0]), (std::vector<uint8_t>{0, 1, 1}));
  auto all = lower("aten::all.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integer(-1), Arg::boolean(true)};
  });
  ASSERT_EQ(all.results[0].dims(), (hlo::Dims{3, 1}));
  EXPECT_EQ(values<uint8_t>(exec(all, {bytes(x)})[0]), (std::vector<uint8_t>{0, 0, 1}));
  auto alls = lower("aten::all.dims", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integers({0, 1}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<uint8_t>(exec(alls, {bytes(x)})[0]), (std::vector<uint8_t>{0}));
  auto anys = lower("aten::any.dims", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integers({0}), Arg::boolean(false)};
  });
  EXPECT_EQ(values<uint8_t>(exec(anys, {bytes(x)})[0]), (std::vector<uint8_t>{1, 1}));
}

TEST(Reduction, AnyOfUint8KeepsUint8) {
  auto l = lower("aten::any", [](hlo::Builder& b) { return std::vector<Arg>{tensor(b, DType::U8, {3})}; });
  ASSERT_EQ(l.results[0].dtype(), DType::U8);
  EXPECT_EQ(values<uint8_t>(exec(l, {bytes(std::vector<uint8_t>{0, 7, 0})})[0]), (std::vector<uint8_t>{1}));
}

TEST(Reduction, Logsumexp) {
  auto l = lower("aten::logsumexp", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 2}), Arg::integers({1}), Arg::boolean(false)};
  });
  auto out = values<float>(exec(l, {bytes(std::vector<float>{1, 2, 1000, 1000, float(-kInf), float(-kInf)})})[0]);
  EXPECT_NEAR(out[0], std::log(std::exp(1.0) + std::exp(2.0)), 1e-5);
  EXPECT_NEAR(out[1], 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(out[2], -kInf);
}

TEST(Reduction, LogsumexpOfIntsIsFloat) {
  auto l = lower("aten::logsumexp", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {2}), Arg::integers({0}), Arg::boolean(true)};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::F32);
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1}));
  EXPECT_NEAR(values<float>(exec(l, {bytes(std::vector<int64_t>{0, 0})})[0])[0], std::log(2.0), 1e-6);
}

TEST(Reduction, VectorNormRuntimeOrd) {
  // One program, ord fed at run time. x = [3, -4, 0].
  auto l = lower("aten::linalg_vector_norm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3}), scalar(b, DType::F64), Arg::none(), Arg::boolean(false),
                            Arg::none()};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::F32);
  auto norm = [&](double ord) {
    return values<float>(exec(l, {bytes(std::vector<float>{3, -4, 0}), bytes(std::vector<double>{ord})})[0])[0];
  };
  EXPECT_FLOAT_EQ(norm(2), 5);
  EXPECT_FLOAT_EQ(norm(1), 7);
  EXPECT_FLOAT_EQ(norm(kInf), 4);
  EXPECT_FLOAT_EQ(norm(-kInf), 0);
  EXPECT_FLOAT_EQ(norm(0), 2);
  EXPECT_NEAR(norm(3), std::cbrt(27.0 + 64.0), 1e-5);
}

TEST(Reduction, VectorNormDimKeepdimIntOrd) {
  auto l = lower("aten::linalg_vector_norm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), scalar(b, DType::I64), Arg::integers({1}),
                            Arg::boolean(true), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 1}));
  auto out = exec(l, {bytes(std::vector<float>{3, 4, -6, 8}), bytes(std::vector<int64_t>{2})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{5, 10}));
  out = exec(l, {bytes(std::vector<float>{3, 4, -6, 8}), bytes(std::vector<int64_t>{1})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{7, 14}));
}

TEST(Reduction, VectorNormOfIntsFails) {
  auto msg = lowering_error("aten::linalg_vector_norm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I64, {3}), scalar(b, DType::F64), Arg::none(), Arg::boolean(false),
                            Arg::none()};
  });
  EXPECT_NE(msg.find("Expected a floating point"), std::string::npos) << msg;
}

TEST(Reduction, Cumsum) {
  auto d1 = lower("aten::cumsum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integer(1), Arg::none()};
  });
  EXPECT_NE(d1.text.find("stablehlo.reduce_window"), std::string::npos);
  EXPECT_EQ(values<float>(exec(d1, {bytes(k123456)})[0]), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  auto d0 = lower("aten::cumsum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integer(-2), Arg::none()};
  });
  EXPECT_EQ(values<float>(exec(d0, {bytes(k123456)})[0]), (std::vector<float>{1, 2, 3, 5, 7, 9}));
}

TEST(Reduction, CumsumOfIntsIsInt64) {
  auto l = lower("aten::cumsum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I32, {4}), Arg::integer(0), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::I64);
  EXPECT_EQ(values<int64_t>(exec(l, {bytes(std::vector<int32_t>{2000000000, 2000000000, -1, 5})})[0]),
            (std::vector<int64_t>{2000000000, 4000000000, 3999999999, 4000000004}));
  auto f = lower("aten::cumsum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I32, {3}), Arg::integer(0), Arg::dtype(DType::F64)};
  });
  EXPECT_EQ(values<double>(exec(f, {bytes(std::vector<int32_t>{1, 2, 3})})[0]), (std::vector<double>{1, 3, 6}));
}

TEST(Reduction, Cumprod) {
  auto l = lower("aten::cumprod", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {2, 3}), Arg::integer(1), Arg::none()};
  });
  EXPECT_EQ(values<float>(exec(l, {bytes(k123456)})[0]), (std::vector<float>{1, 2, 6, 4, 20, 120}));
}

TEST(Reduction, ZeroDimInput) {
  auto sum = lower("aten::sum.dim_IntList", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::I32, {}), Arg::integers({-1}), Arg::boolean(true), Arg::none()};
  });
  ASSERT_EQ(sum.results[0].rank(), 0);
  EXPECT_EQ(values<int64_t>(exec(sum, {bytes(std::vector<int32_t>{7})})[0]), (std::vector<int64_t>{7}));
  auto mx = lower("aten::max.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {}), Arg::integer(0), Arg::boolean(false)};
  });
  auto out = exec(mx, {bytes(std::vector<float>{2.5f})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{2.5f}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0}));
  auto cs = lower("aten::cumsum", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {}), Arg::integer(0), Arg::none()};
  });
  EXPECT_EQ(values<float>(exec(cs, {bytes(std::vector<float>{2.5f})})[0]), (std::vector<float>{2.5f}));
}

TEST(Reduction, BoolExtrema) {
  auto md = lower("aten::max.dim", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::Bool, {2, 3}), Arg::integer(1), Arg::boolean(false)};
  });
  auto md_out = exec(md, {bytes(std::vector<uint8_t>{0, 1, 1, 0, 0, 0})});
  EXPECT_EQ(values<uint8_t>(md_out[0]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(values<int64_t>(md_out[1]), (std::vector<int64_t>{1, 0}));
  // PyTorch refuses argmax/argmin of bool (max.dim above is its spelling).
  for (const char* op : {"aten::argmax", "aten::argmin"})
    EXPECT_NE(lowering_error(op, [](hlo::Builder& b) {
                return std::vector<Arg>{tensor(b, DType::Bool, {2, 3}), Arg::integer(1), Arg::boolean(false)};
              }).find("does not support bool input"),
              std::string::npos)
        << op;
  auto mx = lower("aten::amax", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::Bool, {2, 3}), Arg::integers({1}), Arg::boolean(false)};
  });
  ASSERT_EQ(mx.results[0].dtype(), DType::Bool);
  EXPECT_EQ(values<uint8_t>(exec(mx, {bytes(std::vector<uint8_t>{0, 1, 1, 0, 0, 0})})[0]), (std::vector<uint8_t>{1, 0}));
}

TEST(Reduction, VectorNormInfOfNaNIsNaN) {
  auto l = lower("aten::linalg_vector_norm", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3}), scalar(b, DType::F64), Arg::none(), Arg::boolean(false),
                            Arg::none()};
  });
  auto out = exec(l, {bytes(std::vector<float>{1, float(kNaN), 2}), bytes(std::vector<double>{kInf})});
  EXPECT_TRUE(std::isnan(values<float>(out[0])[0]));
}

// any.dims / all.dims with an empty dim list reduce nothing (sum and amax reduce everything instead).
TEST(Reduction, AnyAllOfEmptyDimListIsIdentity) {
  for (const char* op : {"aten::any.dims", "aten::all.dims"}) {
    auto l = lower(op, [](hlo::Builder& b) {
      return std::vector<Arg>{tensor(b, DType::F32, {2, 2}), Arg::integers({}), Arg::boolean(false)};
    });
    ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 2})) << op;
    EXPECT_EQ(values<uint8_t>(exec(l, {bytes(std::vector<float>{0, 2, -1, 0})})[0]), (std::vector<uint8_t>{0, 1, 1, 0}));
  }
}

// ---- scans, segment_reduce

// Ties move the index forward; a NaN wins and stays until the next NaN.
TEST(Reduction, CummaxHelper) {
  auto l = lower("aten::_cummax_helper", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {6}), tensor(b, DType::F32, {6}), tensor(b, DType::I64, {6}),
                            Arg::integer(0)};
  });
  auto r = exec(l, {bytes(std::vector<float>{1, 3, 3, 2, kNaNf, 5}), bytes(std::vector<float>(6, 0)),
                    bytes(std::vector<int64_t>(6, 0))});
  auto v = values<float>(r[0]);
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{1, 3, 3, 3}));
  EXPECT_TRUE(std::isnan(v[4]) && std::isnan(v[5]));
  EXPECT_EQ(values<int64_t>(r[1]), (std::vector<int64_t>{0, 1, 2, 2, 4, 4}));
}

// log(e^0) = 0, log(e^0 + e^0) = log 2, log(2 + 2) = log 4; -inf adds nothing.
TEST(Reduction, Logcumsumexp) {
  auto l = lower("aten::_logcumsumexp", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {4}), Arg::integer(-1)};
  });
  float ninf = -std::numeric_limits<float>::infinity();
  auto r = values<float>(exec(l, {bytes(std::vector<float>{0, 0, std::log(2.0f), ninf})})[0]);
  std::vector<float> want{0, std::log(2.0f), std::log(4.0f), std::log(4.0f)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r[i], want[i], 1e-6) << i;
}

// Segments {1, 2}, {}, {3, 4, 5}: sums 3, 0, 12; means 1.5, NaN (empty,
// no initial), 4.
TEST(Reduction, SegmentReduceSumAndMean) {
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
