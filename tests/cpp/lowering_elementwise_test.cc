// Golden StableHLO text and numeric checks for the elementwise lowerings
// (elementwise.cc): arithmetic, comparisons, gelu, lerp and pow's fixed
// exponents, then the bit-level and number-theory ops (signbit, shifts,
// nextafter, frexp, gcd/lcm, ...), whose expected numbers come from the C++
// standard library or from arithmetic.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::read;
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

// ---- bit-level and number-theory ops

// A host array for one program parameter.
struct Input {
  const void* data;
  DType dtype;
  std::vector<int64_t> dims;
};

// Runs a lowered program; returns every result buffer.
std::vector<runtime::BufferPtr> execute(const testing::Lowered& l, const std::vector<Input>& inputs) {
  std::vector<runtime::BufferPtr> bufs;
  for (const auto& in : inputs) bufs.push_back(testing::upload(in.data, in.dtype, in.dims));
  return testing::run_all(l, bufs);
}

// Binary op on two tensors of dtype t and shape {n}.
testing::Lowered lower_binary(const std::string& op, DType t, int64_t n) {
  return lower(op, [t, n](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({t, {n}})), Arg::tensor(b.parameter({t, {n}}))};
  });
}

TEST(Elementwise, SignbitGolden) {
  auto l = lower("aten::signbit", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}}))};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<3xf32>) -> (tensor<3xi1>) {\n"
            "    %1 = \"stablehlo.bitcast_convert\"(%0) : (tensor<3xf32>) -> tensor<3xi32>\n"
            "    %2 = \"stablehlo.constant\"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>\n"
            "    %3 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> "
            "tensor<3xi32>\n"
            "    %4 = \"stablehlo.compare\"(%1, %3) {comparison_direction = #stablehlo<comparison_direction LT>, "
            "compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>\n"
            "    \"func.return\"(%4) : (tensor<3xi1>) -> ()\n"
            "  }\n"
            "}\n");
  float x[4] = {-0.0f, 0.0f, -NAN, -2.0f};
  auto l4 = lower("aten::signbit", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}}))};
  });
  auto out = read<uint8_t>(execute(l4, {{x, DType::F32, {4}}})[0], 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i] != 0, std::signbit(x[i])) << i;
}

// Out-of-range shift amounts: ATen gives 0 to the left and the sign fill to
// the right; in range, the usual two's complement shifts.
TEST(Elementwise, ShiftsOutOfRange) {
  int32_t a[7] = {1, 1, 1, -8, -8, 8, -8}, s[7] = {31, 32, -1, 1, 40, 40, -1};
  auto left = read<int32_t>(execute(lower_binary("aten::bitwise_left_shift.Tensor", DType::I32, 7),
                                    {{a, DType::I32, {7}}, {s, DType::I32, {7}}})[0],
                            7);
  EXPECT_EQ(left, (std::vector<int32_t>{INT32_MIN, 0, 0, -16, 0, 0, 0}));
  auto right = read<int32_t>(execute(lower_binary("aten::bitwise_right_shift.Tensor", DType::I32, 7),
                                     {{a, DType::I32, {7}}, {s, DType::I32, {7}}})[0],
                             7);
  EXPECT_EQ(right, (std::vector<int32_t>{0, 0, 0, -4, -1, 0, -1}));
  uint8_t ua[3] = {200, 200, 200}, us[3] = {1, 7, 8};
  auto uright = read<uint8_t>(execute(lower_binary("aten::bitwise_right_shift.Tensor", DType::U8, 3),
                                      {{ua, DType::U8, {3}}, {us, DType::U8, {3}}})[0],
                              3);
  EXPECT_EQ(uright, (std::vector<uint8_t>{100, 1, 0}));
}

TEST(Elementwise, NextafterMatchesStd) {
  float x[7] = {1.f, 1.f, 0.f, 0.f, 2.f, -1.f, NAN}, y[7] = {2.f, 0.f, 1.f, -1.f, 2.f, -INFINITY, 1.f};
  auto out = read<float>(
      execute(lower_binary("aten::nextafter", DType::F32, 7), {{x, DType::F32, {7}}, {y, DType::F32, {7}}})[0], 7);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], std::nextafter(x[i], y[i])) << i;
  EXPECT_TRUE(std::isnan(out[6]));
}

// frexp agrees with std::frexp, subnormals included (the CPU backend flushes
// subnormal operands of float arithmetic, so the lowering must not use any).
TEST(Elementwise, FrexpMatchesStd) {
  float x[8] = {0.f, 1.f, -1.f, 0.75f, 123456.f, -1e-3f, 1e-40f, -2e-42f};
  auto l = lower("aten::frexp.Tensor", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {8}}))};
  });
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[1].dtype(), DType::I32);
  auto outs = execute(l, {{x, DType::F32, {8}}});
  auto mantissa = read<float>(outs[0], 8);
  auto exponent = read<int32_t>(outs[1], 8);
  for (int i = 0; i < 8; ++i) {
    int e = 0;
    float m = std::frexp(x[i], &e);
    EXPECT_EQ(mantissa[i], m) << x[i];
    EXPECT_EQ(exponent[i], e) << x[i];
  }
}

// Euclid's algorithm in a stablehlo.while over all elements at once.
TEST(Elementwise, GcdAndLcm) {
  int64_t a[6] = {12, -4, 0, 0, 7, 21}, b[6] = {18, 6, 0, -5, 13, -6};
  auto lg = lower_binary("aten::gcd", DType::I64, 6);
  EXPECT_NE(lg.text.find("\"stablehlo.while\""), std::string::npos);
  auto g = read<int64_t>(execute(lg, {{a, DType::I64, {6}}, {b, DType::I64, {6}}})[0], 6);
  EXPECT_EQ(g, (std::vector<int64_t>{6, 2, 0, 5, 1, 3}));
  auto l = read<int64_t>(
      execute(lower_binary("aten::lcm", DType::I64, 6), {{a, DType::I64, {6}}, {b, DType::I64, {6}}})[0], 6);
  EXPECT_EQ(l, (std::vector<int64_t>{36, 12, 0, 0, 91, 42}));
}

TEST(Elementwise, GcdRefusesFloats) { EXPECT_THROW(lower_binary("aten::gcd", DType::F32, 2), lowering::LoweringError); }

// round(x, decimals) is nearbyint(x * 10^d) / 10^d in float, divided, not
// multiplied by the reciprocal (which would be off by an ulp).
TEST(Elementwise, RoundDecimalsDividesByPowerOfTen) {
  float x[5] = {-581.2322998046875f, 19.254898071289062f, 2.5f, 0.0005f, 1234.5f};
  for (int d : {3, 0, -3}) {
    auto l = lower("aten::round.decimals", [d](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {5}})), Arg::integer(d)};
    });
    auto out = read<float>(execute(l, {{x, DType::F32, {5}}})[0], 5);
    float p = static_cast<float>(std::pow(10, std::abs(d)));
    for (int i = 0; i < 5; ++i) {
      float want = d < 0 ? std::nearbyint(x[i] / p) * p : std::nearbyint(x[i] * p) / p;
      EXPECT_EQ(out[i], want) << x[i] << " decimals " << d;
    }
  }
}

TEST(Elementwise, NanToNumDefaults) {
  float x[4] = {NAN, INFINITY, -INFINITY, 1.5f};
  auto l = lower("aten::nan_to_num", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::none(), Arg::none(), Arg::none()};
  });
  auto out = read<float>(execute(l, {{x, DType::F32, {4}}})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{0.f, FLT_MAX, -FLT_MAX, 1.5f}));
}

TEST(Elementwise, LogaddexpAndHypot) {
  float a[4] = {0.f, -INFINITY, INFINITY, 3e30f}, b[4] = {1.f, -INFINITY, INFINITY, 4e30f};
  auto lae = read<float>(
      execute(lower_binary("aten::logaddexp", DType::F32, 4), {{a, DType::F32, {4}}, {b, DType::F32, {4}}})[0], 4);
  EXPECT_NEAR(lae[0], std::log(1.0 + std::exp(1.0)), 1e-6);
  EXPECT_EQ(lae[1], -INFINITY);
  EXPECT_EQ(lae[2], INFINITY);
  auto h = read<float>(
      execute(lower_binary("aten::hypot", DType::F32, 4), {{a, DType::F32, {4}}, {b, DType::F32, {4}}})[0], 4);
  EXPECT_NEAR(h[0], 1.f, 1e-7);
  EXPECT_EQ(h[1], INFINITY);
  EXPECT_EQ(h[2], INFINITY);
  EXPECT_FLOAT_EQ(h[3], 5e30f);  // a * a would overflow float
}

TEST(Elementwise, XlogyZeroTimesLogZeroIsZero) {
  float x[4] = {0.f, 0.f, 2.f, 3.f}, y[4] = {0.f, NAN, static_cast<float>(M_E), 1.f};
  auto out = read<float>(
      execute(lower_binary("aten::xlogy.Tensor", DType::F32, 4), {{x, DType::F32, {4}}, {y, DType::F32, {4}}})[0], 4);
  EXPECT_EQ(out[0], 0.f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_NEAR(out[2], 2.f, 1e-6);
  EXPECT_EQ(out[3], 0.f);
}

// logit clamps to [eps, 1 - eps] when eps is given and not negative.
TEST(Elementwise, LogitClampsToEps) {
  float x[3] = {0.f, 0.5f, 1.f};
  double eps = 0.25;
  auto l = lower("aten::logit", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(execute(l, {{x, DType::F32, {3}}, {&eps, DType::F64, {}}})[0], 3);
  EXPECT_NEAR(out[0], std::log(0.25 / 0.75), 1e-6);
  EXPECT_EQ(out[1], 0.f);
  EXPECT_NEAR(out[2], std::log(0.75 / 0.25), 1e-6);
}

TEST(Elementwise, IsinAndInvert) {
  int64_t e[4] = {1, 2, 3, 4}, t[3] = {2, 4, 9};
  for (bool invert : {false, true}) {
    auto l = lower("aten::isin.Tensor_Tensor", [invert](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::tensor(b.parameter({DType::I64, {3}})),
                              Arg::boolean(false), Arg::boolean(invert)};
    });
    auto out = read<uint8_t>(execute(l, {{e, DType::I64, {4}}, {t, DType::I64, {3}}})[0], 4);
    uint8_t in = !invert, out_ = invert;
    EXPECT_EQ(out, (std::vector<uint8_t>{out_, in, out_, in}));
  }
}

}  // namespace
}  // namespace torch_pjrt
