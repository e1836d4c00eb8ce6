// Activations (activation.cc): golden StableHLO text and numeric checks for
// softmax and log_softmax, leaky_relu, hardtanh, elu, hardshrink, softplus,
// hardswish and glu, and the float16/bfloat16 paths of a few nn ops.
// Expected values are computed by hand in each test, never by the code under
// test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
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
using testing::buffers::f32;
using testing::buffers::f64;
using testing::buffers::i64;

// ---- softmax

TEST(Softmax, Golden) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(-1), Arg::boolean(false)};
  });
  EXPECT_EQ(
      l.text,
      "module @torch_pjrt {\n"
      "  func.func public @main(%0: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
      "    %1 = \"stablehlo.constant\"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>\n"
      "    %2 = \"stablehlo.reduce\"(%0, %1) ({\n"
      "    ^bb0(%3: tensor<f32>, %4: tensor<f32>):\n"
      "      %5 = \"stablehlo.maximum\"(%3, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "      \"stablehlo.return\"(%5) : (tensor<f32>) -> ()\n"
      "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"
      "    %6 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> "
      "tensor<2x3xf32>\n"
      "    %7 = \"stablehlo.subtract\"(%0, %6) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    %8 = \"stablehlo.exponential\"(%7) : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    %9 = \"stablehlo.constant\"() {value = dense<0.00000000000000000e+00> : tensor<f32>} : () -> tensor<f32>\n"
      "    %10 = \"stablehlo.reduce\"(%8, %9) ({\n"
      "    ^bb0(%11: tensor<f32>, %12: tensor<f32>):\n"
      "      %13 = \"stablehlo.add\"(%11, %12) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "      \"stablehlo.return\"(%13) : (tensor<f32>) -> ()\n"
      "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"
      "    %14 = \"stablehlo.broadcast_in_dim\"(%10) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> "
      "tensor<2x3xf32>\n"
      "    %15 = \"stablehlo.divide\"(%8, %14) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    \"func.return\"(%15) : (tensor<2x3xf32>) -> ()\n"
      "  }\n"
      "}\n");
}

const std::vector<float> kRows = {1.f, 2.f, 3.f, -1.f, 0.f, 100.f};

TEST(Softmax, RowsSumToOneAndMatchFormula) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(1), Arg::boolean(false)};
  });
  auto out = read<float>(run_all(l, {f32(kRows, {2, 3})})[0], 6);
  for (int r = 0; r < 2; ++r) {
    double m = std::max({kRows[3 * r], kRows[3 * r + 1], kRows[3 * r + 2]}), s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(kRows[3 * r + c] - m);
    double total = 0;
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(out[3 * r + c], std::exp(kRows[3 * r + c] - m) / s, 1e-6);
      total += out[3 * r + c];
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
  }
}

TEST(Softmax, AlongDimZero) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(0), Arg::boolean(false)};
  });
  auto out = read<float>(run_all(l, {f32(kRows, {2, 3})})[0], 6);
  for (int c = 0; c < 3; ++c) {
    double a = kRows[c], b = kRows[3 + c], m = std::max(a, b);
    EXPECT_NEAR(out[c], std::exp(a - m) / (std::exp(a - m) + std::exp(b - m)), 1e-6);
    EXPECT_NEAR(out[c] + out[3 + c], 1.0, 1e-6);
  }
}

TEST(Softmax, LogSoftmaxMatchesFormula) {
  auto l = lower("aten::_log_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(-1), Arg::boolean(false)};
  });
  auto out = read<float>(run_all(l, {f32(kRows, {2, 3})})[0], 6);
  for (int r = 0; r < 2; ++r) {
    double m = std::max({kRows[3 * r], kRows[3 * r + 1], kRows[3 * r + 2]}), s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(kRows[3 * r + c] - m);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(out[3 * r + c], kRows[3 * r + c] - m - std::log(s), 1e-5);
  }
}

TEST(Softmax, HalfComputesInFloatAndHalfToFloatReturnsF32) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {4}})), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_EQ(l.results[0].dtype(), DType::BF16);
  EXPECT_NE(l.text.find("stablehlo.exponential\"(%"), std::string::npos);
  EXPECT_NE(l.text.find("-> tensor<4xf32>"), std::string::npos);  // math in f32
  auto h = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F16, {4}})), Arg::integer(0), Arg::boolean(true)};
  });
  EXPECT_EQ(h.results[0].dtype(), DType::F32);
}

TEST(Softmax, ScalarInputGivesOne) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_EQ(l.results[0].rank(), 0);
  EXPECT_FLOAT_EQ(read<float>(run_all(l, {f32({7.f}, {})})[0], 1)[0], 1.f);
}

TEST(Softmax, BackwardMatchesFormula) {
  // softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g)
  std::vector<float> y = {0.2f, 0.3f, 0.5f}, g = {1.f, -2.f, 0.5f};
  auto l = lower("aten::_softmax_backward_data", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::integer(1), Arg::dtype(DType::F32)};
  });
  auto out = read<float>(run_all(l, {f32(g, {1, 3}), f32(y, {1, 3})})[0], 3);
  double dot = 0.2 * 1 + 0.3 * -2 + 0.5 * 0.5;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], y[i] * (g[i] - dot), 1e-6);

  auto ll = lower("aten::_log_softmax_backward_data", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::integer(-1), Arg::dtype(DType::F32)};
  });
  std::vector<float> logy = {std::log(0.2f), std::log(0.3f), std::log(0.5f)};
  auto lout = read<float>(run_all(ll, {f32(g, {1, 3}), f32(logy, {1, 3})})[0], 3);
  double gs = 1 - 2 + 0.5;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(lout[i], g[i] - y[i] * gs, 1e-6);
}

// ---- leaky_relu, hardtanh, elu

TEST(NnActivation, LeakyReluAndBackward) {
  auto l = lower("aten::leaky_relu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(run_all(l, {f32({-2, 0, 3}, {3}), f64(0.1)})[0], 3);
  EXPECT_FLOAT_EQ(out[0], -0.2f);
  EXPECT_FLOAT_EQ(out[1], 0.f);
  EXPECT_FLOAT_EQ(out[2], 3.f);
  auto bw = lower("aten::leaky_relu_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::scalar(b.parameter({DType::F64, {}})), Arg::boolean(false)};
  });
  auto g = read<float>(run_all(bw, {f32({5, 5, 5}, {3}), f32({-2, 0, 3}, {3}), f64(0.1)})[0], 3);
  EXPECT_FLOAT_EQ(g[0], 0.5f);
  EXPECT_FLOAT_EQ(g[1], 0.5f);  // x == 0 takes the negative branch
  EXPECT_FLOAT_EQ(g[2], 5.f);
}

TEST(NnActivation, HardtanhAndBackward) {
  auto l = lower("aten::hardtanh", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(run_all(l, {f32({-3, -0.5f, 0.5f, 2}, {4}), f64(-1), f64(1)})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  auto bw = lower("aten::hardtanh_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::tensor(b.parameter({DType::F32, {4}})),
                            Arg::scalar(b.parameter({DType::F64, {}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto g = read<float>(run_all(bw, {f32({7, 7, 7, 7}, {4}), f32({-3, -1, 0.5f, 2}, {4}), f64(-1), f64(1)})[0], 4);
  EXPECT_EQ(g, (std::vector<float>{0, 0, 7, 0}));  // the bounds themselves get no gradient
}

TEST(NnActivation, HardtanhKeepsNaN) {
  // clamp(NaN) is NaN in PyTorch; the result must not depend on how the
  // plugin's maximum/minimum treat NaN operands.
  auto l = lower("aten::hardtanh", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(run_all(l, {f32({NAN, -INFINITY, INFINITY}, {3}), f64(-1), f64(1)})[0], 3);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], -1.f);
  EXPECT_EQ(out[2], 1.f);
  EXPECT_EQ(l.text.find("stablehlo.maximum"), std::string::npos);
  EXPECT_EQ(l.text.find("stablehlo.minimum"), std::string::npos);
}

TEST(NnActivation, EluAndBackward) {
  auto scalar = [](hlo::Builder& b) { return Arg::scalar(b.parameter({DType::F64, {}})); };
  auto l = lower("aten::elu", [&](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2}})), scalar(b), scalar(b), scalar(b)};
  });
  auto out = read<float>(run_all(l, {f32({-1, 2}, {2}), f64(1.5), f64(2), f64(0.5)})[0], 2);
  EXPECT_NEAR(out[0], (std::exp(-0.5) - 1) * 1.5 * 2, 1e-6);
  EXPECT_NEAR(out[1], 4.0, 1e-6);
  auto bw = lower("aten::elu_backward", [&](hlo::Builder& b) {
    return std::vector<Arg>{
        Arg::tensor(b.parameter({DType::F32, {2}})), scalar(b), scalar(b), scalar(b), Arg::boolean(false),
        Arg::tensor(b.parameter({DType::F32, {2}}))};
  });
  auto g = read<float>(run_all(bw, {f32({1, 1}, {2}), f64(1.5), f64(2), f64(0.5), f32({-1, 2}, {2})})[0], 2);
  EXPECT_NEAR(g[0], 0.5 * 1.5 * 2 * std::exp(-0.5), 1e-6);
  EXPECT_NEAR(g[1], 2.0, 1e-6);
}

// ---- hardshrink, softplus, hardswish, glu

TEST(Hardshrink, Golden) {
  auto l = lower("aten::hardshrink", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  EXPECT_EQ(
      l.text,
      "module @torch_pjrt {\n"
      "  func.func public @main(%0: tensor<3xf32>, %1: tensor<f64>) -> (tensor<3xf32>) {\n"
      "    %2 = \"stablehlo.convert\"(%1) : (tensor<f64>) -> tensor<f32>\n"
      "    %3 = \"stablehlo.negate\"(%2) : (tensor<f32>) -> tensor<f32>\n"
      "    %4 = \"stablehlo.broadcast_in_dim\"(%3) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
      "tensor<3xf32>\n"
      "    %5 = \"stablehlo.compare\"(%0, %4) {comparison_direction = #stablehlo<comparison_direction GE>, "
      "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>\n"
      "    %6 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
      "tensor<3xf32>\n"
      "    %7 = \"stablehlo.compare\"(%0, %6) {comparison_direction = #stablehlo<comparison_direction LE>, "
      "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>\n"
      "    %8 = \"stablehlo.and\"(%5, %7) : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>\n"
      "    %9 = \"stablehlo.constant\"() {value = dense<0.00000000000000000e+00> : tensor<f32>} : () -> tensor<f32>\n"
      "    %10 = \"stablehlo.broadcast_in_dim\"(%9) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
      "tensor<3xf32>\n"
      "    %11 = \"stablehlo.select\"(%8, %10, %0) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
      "    \"func.return\"(%11) : (tensor<3xf32>) -> ()\n"
      "  }\n"
      "}\n");
}

TEST(Hardshrink, ZeroesInsideLambda) {
  auto l = lower("aten::hardshrink", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {6}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<float> x{-2.0f, -0.5f, 0.0f, 0.5f, 0.6f, 3.0f};
  auto out = read<float>(run_all(l, {f32(x, {6}), f64(0.5)})[0], 6);
  std::vector<float> want{-2.0f, 0.0f, 0.0f, 0.0f, 0.6f, 3.0f};  // |x| <= 0.5 -> 0
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(Softplus, MatchesFormulaAndThreshold) {
  auto l = lower("aten::softplus", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {5}})), Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<float> x{-3.0f, -0.5f, 0.0f, 1.0f, 12.0f};
  auto out = read<float>(run_all(l, {f32(x, {5}), f64(2.0), f64(20.0)})[0], 5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], std::log1p(std::exp(2.0 * x[i])) / 2.0, 1e-6) << i;
  EXPECT_EQ(out[4], 12.0f);  // x * beta = 24 > threshold: x itself
}

TEST(Hardswish, Pieces) {
  auto l = lower("aten::hardswish", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}}))};
  });
  auto out = read<float>(run_all(l, {f32({-4.0f, -1.0f, 1.5f, 5.0f}, {4})})[0], 4);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], -1.0 * 2.0 / 6.0, 1e-7);
  EXPECT_NEAR(out[2], 1.5 * 4.5 / 6.0, 1e-7);
  EXPECT_EQ(out[3], 5.0f);
}

TEST(Glu, HalvesAlongDim) {
  auto l = lower("aten::glu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 2}})), Arg::integer(-1)};
  });
  auto out = read<float>(run_all(l, {f32({1.0f, 0.0f, 2.0f, -1.0f}, {2, 2})})[0], 2);
  EXPECT_NEAR(out[0], 1.0 * 0.5, 1e-7);
  EXPECT_NEAR(out[1], 2.0 / (1.0 + std::exp(1.0)), 1e-7);
}

TEST(Glu, OddDimFails) {
  EXPECT_THROW(lower("aten::glu",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(1)};
                     }),
               lowering::LoweringError);
}

// ---- reduced precision (layer norm and nll_loss too)

TEST(ReducedPrecision, BFloat16OpsCompileRunAndKeepTheirDtype) {
  auto bf = [](hlo::Builder& b, hlo::Dims d) { return Arg::tensor(b.parameter({DType::BF16, d})); };
  auto sc = [](hlo::Builder& b) { return Arg::scalar(b.parameter({DType::F64, {}})); };
  std::vector<testing::Lowered> ls;
  ls.push_back(lower("aten::native_layer_norm", [&](hlo::Builder& b) {
    return std::vector<Arg>{bf(b, {2, 8}), Arg::integers({8}), Arg::none(), Arg::none(), sc(b)};
  }));
  ls.push_back(lower("aten::_log_softmax", [&](hlo::Builder& b) {
    return std::vector<Arg>{bf(b, {2, 8}), Arg::integer(1), Arg::boolean(false)};
  }));
  ls.push_back(lower("aten::nll_loss_forward", [&](hlo::Builder& b) {
    return std::vector<Arg>{bf(b, {2, 8}), Arg::tensor(b.parameter({DType::I64, {2}})), Arg::none(), Arg::integer(1),
                            Arg::integer(-100)};
  }));
  ls.push_back(lower("aten::leaky_relu", [&](hlo::Builder& b) { return std::vector<Arg>{bf(b, {2, 8}), sc(b)}; }));
  for (auto& l : ls) {
    EXPECT_EQ(l.results[0].dtype(), DType::BF16) << l.text;
    EXPECT_NO_THROW(testing::client().compile(l.text, 0)) << l.text;
  }
  // mean/rstd of a bf16 layer norm without weight are bf16, as on CPU.
  EXPECT_EQ(ls[0].results[1].type, (hlo::TensorType{DType::BF16, {2, 1}}));
}

TEST(ReducedPrecision, Float16SoftmaxIsAccurate) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F16, {3}})), Arg::integer(0), Arg::boolean(true)};
  });
  // f16 bit patterns of 1, 2, 3
  std::vector<uint16_t> x = {0x3C00, 0x4000, 0x4200};
  auto out = read<float>(run_all(l, {upload(x, DType::F16, {3})})[0], 3);
  double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], std::exp(i + 1.0) / s, 1e-6);
}

}  // namespace
}  // namespace torch_pjrt
