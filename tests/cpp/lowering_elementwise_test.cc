// Golden StableHLO text and numeric checks for elementwise lowerings.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::run_all;
using testing::upload;

TEST(Elementwise, AddTensorGolden) {
  auto l = lower("aten::add.Tensor", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::scalar(b.parameter({DType::I64, {}}))};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x3xf32>, %1: tensor<3xf32>, %2: tensor<i64>) -> (tensor<2x3xf32>) {\n"
            "    %3 = \"stablehlo.convert\"(%2) : (tensor<i64>) -> tensor<f32>\n"
            "    %4 = \"stablehlo.broadcast_in_dim\"(%3) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
            "tensor<3xf32>\n"
            "    %5 = \"stablehlo.multiply\"(%1, %4) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
            "    %6 = \"stablehlo.broadcast_in_dim\"(%5) {broadcast_dimensions = array<i64: 1>} : (tensor<3xf32>) -> "
            "tensor<2x3xf32>\n"
            "    %7 = \"stablehlo.add\"(%0, %6) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    \"func.return\"(%7) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Elementwise, IntTensorPlusPythonFloatIsFloat32) {
  auto l = lower("aten::add.Tensor", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  EXPECT_EQ(l.results[0].dtype(), DType::F32);
}

TEST(Elementwise, GeluMatchesFormula) {
  auto l = lower("aten::gelu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::string("none")};
  });
  auto out = testing::run<float, float>(l, {{-1.f, 0.f, 2.f}}, DType::F32);
  for (int i = 0; i < 3; ++i) {
    double x = std::vector<double>{-1, 0, 2}[i];
    EXPECT_NEAR(out[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6);
  }
}

TEST(Elementwise, FloorDivideOfNegativeIntsRoundsDown) {
  auto l = lower("aten::div.Tensor_mode", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::tensor(b.parameter({DType::I64, {4}})),
                            Arg::string("floor")};
  });
  int64_t a[4] = {-7, 7, -6, 5}, d[4] = {2, -2, 3, 5};
  int64_t out[4];
  run_all(l, {upload(a, DType::I64, {4}), upload(d, DType::I64, {4})})[0]->to_host(out, sizeof out);
  EXPECT_EQ(out[0], -4);
  EXPECT_EQ(out[1], -4);
  EXPECT_EQ(out[2], -2);
  EXPECT_EQ(out[3], 1);
}

// Python's float floor division (numpy.floor_divide agrees): 1 // 0.1 is 9 because float 0.1 is a little
// more than a tenth; floor(1 / 0.1) would round the quotient up to 10 first. Division by zero gives a / b.
TEST(Elementwise, FloorDivideOfFloatsFollowsPython) {
  auto l = lower("aten::div.Tensor_mode", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {6}})), Arg::tensor(b.parameter({DType::F32, {6}})),
                            Arg::string("floor")};
  });
  float a[6] = {1, -1, 5, -7, 0.5f, 3}, d[6] = {0.1f, 0.1f, 0.5f, 2, 0, -0.7f};
  float out[6];
  run_all(l, {upload(a, DType::F32, {6}), upload(d, DType::F32, {6})})[0]->to_host(out, sizeof out);
  EXPECT_EQ(out[0], 9);
  EXPECT_EQ(out[1], -10);
  EXPECT_EQ(out[2], 10);
  EXPECT_EQ(out[3], -4);
  EXPECT_EQ(out[4], INFINITY);
  EXPECT_EQ(out[5], -5);
}

// PyTorch's maximum/minimum/clamp give NaN when either operand is NaN (the
// plugin's stablehlo.maximum drops a NaN second operand).
TEST(Elementwise, MaximumMinimumPropagateNaNFromEitherSide) {
  for (const char* op : {"aten::maximum", "aten::minimum", "aten::clamp_min.Tensor", "aten::clamp_max.Tensor"}) {
    auto l = lower(op, [](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::F32, {3}}))};
    });
    float x[3] = {1, NAN, 2}, y[3] = {NAN, 1, 3};
    float out[3];
    run_all(l, {upload(x, DType::F32, {3}), upload(y, DType::F32, {3})})[0]->to_host(out, sizeof out);
    EXPECT_TRUE(std::isnan(out[0])) << op;
    EXPECT_TRUE(std::isnan(out[1])) << op;
    EXPECT_FALSE(std::isnan(out[2])) << op;
  }
}

// sign is (x > 0) - (x < 0): 0 for NaN, and a bool is its own sign.
TEST(Elementwise, SignOfNaNIsZeroAndBoolIsIdentity) {
  auto l = lower("aten::sign", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}}))};
  });
  auto out = testing::run<float, float>(l, {{NAN, -2.f, 0.f, 3.f}}, DType::F32);
  EXPECT_EQ(out, (std::vector<float>{0, -1, 0, 1}));
  auto lb = lower("aten::sign", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::Bool, {2}}))};
  });
  EXPECT_EQ(lb.results[0].dtype(), DType::Bool);
}

// gelu far in the negative tail is 0 (x * Phi(x) underflows), not x * (1 + erf(x / sqrt 2)) with an erf that stops
// short of -1.
TEST(Elementwise, GeluNegativeTailIsZero) {
  auto l = lower("aten::gelu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::string("none")};
  });
  auto out = testing::run<float, float>(l, {{-1000.f, -100.f, -20.f}}, DType::F32);
  for (float v : out) EXPECT_EQ(v, 0.f);
}

// lerp in bfloat16 computes in float32 and rounds once, as PyTorch does: lerp(256, -254, 0.7) is
// -254 - (-510) * 0.3 = -101. The old bfloat16 arithmetic (weight rounded to bfloat16, self + w * (end - self))
// gave -100.
TEST(Elementwise, LerpOfBfloat16RoundsOnce) {
  auto l = lower("aten::lerp.Scalar", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {1}})), Arg::tensor(b.parameter({DType::BF16, {1}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  ASSERT_EQ(l.results[0].dtype(), DType::BF16);
  uint16_t self = 0x4380, end = 0xC37E;  // 256, -254 in bfloat16
  double w = 0.7;
  uint16_t out = 0;
  run_all(l, {upload(&self, DType::BF16, {1}), upload(&end, DType::BF16, {1}), upload(&w, DType::F64, {})})[0]->to_host(
      &out, sizeof out);
  EXPECT_EQ(out, 0xC2CA);  // -101 in bfloat16
}

TEST(Elementwise, RefusesWhatPyTorchRefuses) {
  auto error = [](const std::string& op, const std::function<std::vector<Arg>(hlo::Builder&)>& args) {
    try {
      lower(op, args);
    } catch (const lowering::LoweringError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto t = [](hlo::Builder& b, DType d) { return Arg::tensor(b.parameter({d, {2}})); };
  EXPECT_NE(error("aten::sub.Tensor",
                  [&](hlo::Builder& b) {
                    return std::vector<Arg>{t(b, DType::Bool), t(b, DType::F32)};
                  })
                .find("with a bool tensor is not supported"),
            std::string::npos);
  EXPECT_NE(error("aten::neg", [&](hlo::Builder& b) { return std::vector<Arg>{t(b, DType::Bool)}; })
                .find("on a bool tensor is not supported"),
            std::string::npos);
  EXPECT_NE(error("aten::addcdiv",
                  [&](hlo::Builder& b) {
                    return std::vector<Arg>{t(b, DType::F32), t(b, DType::I64), t(b, DType::I32)};
                  })
                .find("Integer division with addcdiv"),
            std::string::npos);
  EXPECT_NE(error("aten::lerp.Tensor",
                  [&](hlo::Builder& b) {
                    return std::vector<Arg>{t(b, DType::F32), t(b, DType::F16), t(b, DType::F32)};
                  })
                .find("for `end`"),
            std::string::npos);
}

// pow(x, 2.0) with the exponent a program constant (Traits::fixed_values) squares;
// with the exponent a parameter it stays stablehlo.power.
TEST(Elementwise, PowOfAFixedSquareMultipliesGolden) {
  auto fixed = lower("aten::pow.Tensor_Scalar", [](hlo::Builder& b) {
    Arg x = Arg::tensor(b.parameter({DType::F32, {4}})), e = Arg::scalar(b.constant(2.0, DType::F64));
    e.fixed = 2.0;
    return std::vector<Arg>{x, e};
  });
  EXPECT_EQ(fixed.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<4xf32>) -> (tensor<4xf32>) {\n"
            "    %1 = \"stablehlo.constant\"() {value = dense<2.00000000000000000e+00> : tensor<f64>} : () -> "
            "tensor<f64>\n"
            "    %2 = \"stablehlo.multiply\"(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
            "    \"func.return\"(%2) : (tensor<4xf32>) -> ()\n"
            "  }\n"
            "}\n");
  auto runtime = lower("aten::pow.Tensor_Scalar", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  EXPECT_NE(runtime.text.find("stablehlo.power"), std::string::npos);
  EXPECT_EQ(fixed.text.find("stablehlo.power"), std::string::npos);
}

// Each fixed exponent computes what pow does, on the plugin.
TEST(Elementwise, PowOfFixedExponentsMatchesStdPow) {
  const std::vector<float> x = {0.25f, 1.5f, 2.0f, 3.0f, 10.0f};
  for (double k : {1.0, 2.0, 3.0, -2.0, 0.5, -0.5, -1.0}) {
    auto l = lower("aten::pow.Tensor_Scalar", [&](hlo::Builder& b) {
      Arg x = Arg::tensor(b.parameter({DType::F32, {5}})), e = Arg::scalar(b.constant(k, DType::F64));
      e.fixed = k;
      return std::vector<Arg>{x, e};
    });
    auto y = testing::run<float, float>(l, {x}, DType::F32);
    for (size_t i = 0; i < x.size(); ++i) {
      double want = std::pow(static_cast<double>(x[i]), k);
      // A few float32 ulps: XLA's CPU sqrt may be an estimate refined by Newton steps, which differ by ISA.
      EXPECT_NEAR(y[i], want, 1e-6 * want) << "k=" << k << " x=" << x[i];
    }
  }
}

}  // namespace
}  // namespace torch_pjrt
