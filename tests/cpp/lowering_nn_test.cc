// Golden StableHLO text and numeric checks for the nn lowerings (softmax,
// layer/batch norm, losses, activations). Expected values are computed by hand
// in each test, never by the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::read;
using testing::run_all;
using testing::upload;

runtime::BufferPtr f32(const std::vector<float>& v, const hlo::Dims& dims) { return upload(v, DType::F32, dims); }
runtime::BufferPtr f64(double v) { return upload(std::vector<double>{v}, DType::F64, {}); }
runtime::BufferPtr i64(const std::vector<int64_t>& v, const hlo::Dims& dims) { return upload(v, DType::I64, dims); }

// ---- softmax

TEST(NnSoftmax, Golden) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(-1), Arg::boolean(false)};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
            "    %1 = \"stablehlo.constant\"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>\n"
            "    %2 = \"stablehlo.reduce\"(%0, %1) ({\n"
            "    ^bb0(%3: tensor<f32>, %4: tensor<f32>):\n"
            "      %5 = \"stablehlo.maximum\"(%3, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
            "      \"stablehlo.return\"(%5) : (tensor<f32>) -> ()\n"
            "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"
            "    %6 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>\n"
            "    %7 = \"stablehlo.subtract\"(%0, %6) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    %8 = \"stablehlo.exponential\"(%7) : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    %9 = \"stablehlo.constant\"() {value = dense<0.00000000000000000e+00> : tensor<f32>} : () -> tensor<f32>\n"
            "    %10 = \"stablehlo.reduce\"(%8, %9) ({\n"
            "    ^bb0(%11: tensor<f32>, %12: tensor<f32>):\n"
            "      %13 = \"stablehlo.add\"(%11, %12) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
            "      \"stablehlo.return\"(%13) : (tensor<f32>) -> ()\n"
            "    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>\n"
            "    %14 = \"stablehlo.broadcast_in_dim\"(%10) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>\n"
            "    %15 = \"stablehlo.divide\"(%8, %14) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    \"func.return\"(%15) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

const std::vector<float> kRows = {1.f, 2.f, 3.f, -1.f, 0.f, 100.f};

TEST(NnSoftmax, RowsSumToOneAndMatchFormula) {
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

TEST(NnSoftmax, AlongDimZero) {
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

TEST(NnSoftmax, LogSoftmaxMatchesFormula) {
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

TEST(NnSoftmax, HalfComputesInFloatAndHalfToFloatReturnsF32) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {4}})), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_EQ(l.results[0].dtype(), DType::BF16);
  EXPECT_NE(l.text.find("stablehlo.exponential\"(%") , std::string::npos);
  EXPECT_NE(l.text.find("-> tensor<4xf32>"), std::string::npos);  // math in f32
  auto h = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F16, {4}})), Arg::integer(0), Arg::boolean(true)};
  });
  EXPECT_EQ(h.results[0].dtype(), DType::F32);
}

TEST(NnSoftmax, ScalarInputGivesOne) {
  auto l = lower("aten::_softmax", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})), Arg::integer(0), Arg::boolean(false)};
  });
  EXPECT_EQ(l.results[0].rank(), 0);
  EXPECT_FLOAT_EQ(read<float>(run_all(l, {f32({7.f}, {})})[0], 1)[0], 1.f);
}

TEST(NnSoftmax, BackwardMatchesFormula) {
  // softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g)
  std::vector<float> y = {0.2f, 0.3f, 0.5f}, g = {1.f, -2.f, 0.5f};
  auto l = lower("aten::_softmax_backward_data", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::tensor(b.parameter({DType::F32, {1, 3}})),
                            Arg::integer(1), Arg::dtype(DType::F32)};
  });
  auto out = read<float>(run_all(l, {f32(g, {1, 3}), f32(y, {1, 3})})[0], 3);
  double dot = 0.2 * 1 + 0.3 * -2 + 0.5 * 0.5;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], y[i] * (g[i] - dot), 1e-6);

  auto ll = lower("aten::_log_softmax_backward_data", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::tensor(b.parameter({DType::F32, {1, 3}})),
                            Arg::integer(-1), Arg::dtype(DType::F32)};
  });
  std::vector<float> logy = {std::log(0.2f), std::log(0.3f), std::log(0.5f)};
  auto lout = read<float>(run_all(ll, {f32(g, {1, 3}), f32(logy, {1, 3})})[0], 3);
  double gs = 1 - 2 + 0.5;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(lout[i], g[i] - y[i] * gs, 1e-6);
}

// ---- layer norm

std::vector<Arg> layer_norm_args(hlo::Builder& b, bool affine) {
  return {Arg::tensor(b.parameter({DType::F32, {2, 4}})), Arg::integers({4}),
          affine ? Arg::tensor(b.parameter({DType::F32, {4}})) : Arg::none(),
          affine ? Arg::tensor(b.parameter({DType::F32, {4}})) : Arg::none(), Arg::scalar(b.parameter({DType::F64, {}}))};
}

TEST(NnLayerNorm, MatchesHandComputed) {
  auto l = lower("aten::native_layer_norm", [](hlo::Builder& b) { return layer_norm_args(b, true); });
  ASSERT_EQ(l.results.size(), 3u);
  EXPECT_EQ(l.results[1].dims(), (hlo::Dims{2, 1}));
  EXPECT_EQ(l.results[2].dims(), (hlo::Dims{2, 1}));
  std::vector<float> x = {1, 2, 3, 4, -2, 0, 2, 8}, w = {1, 2, 0.5f, -1}, bias = {0, 1, -1, 0.25f};
  double eps = 1e-5;
  auto r = run_all(l, {f32(x, {2, 4}), f32(w, {4}), f32(bias, {4}), f64(eps)});
  auto out = read<float>(r[0], 8), mean = read<float>(r[1], 2), rstd = read<float>(r[2], 2);
  // row 0: mean 2.5, var (2.25+0.25+0.25+2.25)/4 = 1.25; row 1: mean 2, var (16+4+0+36)/4 = 14
  double m[2] = {2.5, 2.0}, v[2] = {1.25, 14.0};
  for (int row = 0; row < 2; ++row) {
    double rs = 1 / std::sqrt(v[row] + eps);
    EXPECT_NEAR(mean[row], m[row], 1e-6);
    EXPECT_NEAR(rstd[row], rs, 1e-5);
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(out[row * 4 + c], (x[row * 4 + c] - m[row]) * rs * w[c] + bias[c], 1e-5);
  }
}

TEST(NnLayerNorm, BackwardMatchesHandComputed) {
  auto l = lower("aten::native_layer_norm_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})),  // grad_out
                            Arg::tensor(b.parameter({DType::F32, {2, 3}})),  // input
                            Arg::integers({3}),
                            Arg::tensor(b.parameter({DType::F32, {2, 1}})),  // mean
                            Arg::tensor(b.parameter({DType::F32, {2, 1}})),  // rstd
                            Arg::tensor(b.parameter({DType::F32, {3}})),     // weight
                            Arg::tensor(b.parameter({DType::F32, {3}})),     // bias
                            Arg::integers({1, 1, 1})};
  });
  ASSERT_EQ(l.results.size(), 3u);
  std::vector<float> dy = {1, -1, 2, 0.5f, 0.5f, -3}, x = {1, 2, 4, 0, 3, -3}, w = {2, -1, 0.5f}, bias = {0, 0, 0};
  // Hand statistics: row 0 mean 7/3, row 1 mean 0.
  double mean[2], rstd[2];
  for (int r = 0; r < 2; ++r) {
    double m = (x[3 * r] + x[3 * r + 1] + x[3 * r + 2]) / 3, v = 0;
    for (int c = 0; c < 3; ++c) v += (x[3 * r + c] - m) * (x[3 * r + c] - m) / 3;
    mean[r] = m;
    rstd[r] = 1 / std::sqrt(v + 1e-5);
  }
  auto res = run_all(l, {f32(dy, {2, 3}), f32(x, {2, 3}), f32({float(mean[0]), float(mean[1])}, {2, 1}),
                         f32({float(rstd[0]), float(rstd[1])}, {2, 1}), f32(w, {3}), f32(bias, {3})});
  auto gi = read<float>(res[0], 6), gw = read<float>(res[1], 3), gb = read<float>(res[2], 3);
  for (int r = 0; r < 2; ++r) {
    double xh[3], g[3], sg = 0, sgx = 0;
    for (int c = 0; c < 3; ++c) {
      xh[c] = (x[3 * r + c] - mean[r]) * rstd[r];
      g[c] = dy[3 * r + c] * w[c];
      sg += g[c];
      sgx += g[c] * xh[c];
    }
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(gi[3 * r + c], rstd[r] * (g[c] - sg / 3 - xh[c] * sgx / 3), 1e-4);
  }
  for (int c = 0; c < 3; ++c) {
    double sw = 0, sb = 0;
    for (int r = 0; r < 2; ++r) {
      sw += dy[3 * r + c] * (x[3 * r + c] - mean[r]) * rstd[r];
      sb += dy[3 * r + c];
    }
    EXPECT_NEAR(gw[c], sw, 1e-4);
    EXPECT_NEAR(gb[c], sb, 1e-5);
  }
}

TEST(NnLayerNorm, BackwardMaskedOutputsKeepTheirShapes) {
  auto l = lower("aten::native_layer_norm_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {2, 3, 4}})), Arg::tensor(b.parameter({DType::BF16, {2, 3, 4}})),
                            Arg::integers({3, 4}), Arg::tensor(b.parameter({DType::BF16, {2, 1, 1}})),
                            Arg::tensor(b.parameter({DType::BF16, {2, 1, 1}})), Arg::none(), Arg::none(),
                            Arg::integers({1, 0, 0})};
  });
  EXPECT_EQ(l.results[0].type, (hlo::TensorType{DType::BF16, {2, 3, 4}}));
  EXPECT_EQ(l.results[1].type, (hlo::TensorType{DType::BF16, {3, 4}}));
  EXPECT_EQ(l.results[2].type, (hlo::TensorType{DType::BF16, {3, 4}}));
  EXPECT_NO_THROW(testing::client().compile(l.text, 0));
}

TEST(NnBatchNorm, NoTrainingUsesRunningStats) {
  auto l = lower("aten::_native_batch_norm_legit_no_training", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 2, 1}})), Arg::tensor(b.parameter({DType::F32, {2}})),
                            Arg::tensor(b.parameter({DType::F32, {2}})), Arg::tensor(b.parameter({DType::F32, {2}})),
                            Arg::tensor(b.parameter({DType::F32, {2}})), Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  ASSERT_EQ(l.results.size(), 3u);
  EXPECT_EQ(l.results[1].dims(), hlo::Dims{0});
  std::vector<float> x = {1, 2, 3, 4}, w = {2, 1}, bias = {0, -1}, rm = {1, 2}, rv = {4, 0.25f};
  auto out = read<float>(run_all(l, {f32(x, {2, 2, 1}), f32(w, {2}), f32(bias, {2}), f32(rm, {2}), f32(rv, {2}), f64(0.1), f64(0)})[0], 4);
  // element (n, c): (x - rm[c]) / sqrt(rv[c]) * w[c] + b[c]
  EXPECT_NEAR(out[0], (1 - 1) / 2.0 * 2 + 0, 1e-6);
  EXPECT_NEAR(out[1], (2 - 2) / 0.5 * 1 - 1, 1e-6);
  EXPECT_NEAR(out[2], (3 - 1) / 2.0 * 2 + 0, 1e-6);
  EXPECT_NEAR(out[3], (4 - 2) / 0.5 * 1 - 1, 1e-6);
}

// ---- nll_loss

std::vector<Arg> nll_args(hlo::Builder& b, const hlo::Dims& x, const hlo::Dims& t, bool weight, int64_t reduction,
                          int64_t ignore) {
  int64_t c = x.size() == 1 ? x[0] : x[1];
  return {Arg::tensor(b.parameter({DType::F32, x})), Arg::tensor(b.parameter({DType::I64, t})),
          weight ? Arg::tensor(b.parameter({DType::F32, {c}})) : Arg::none(), Arg::integer(reduction),
          Arg::integer(ignore)};
}

const std::vector<float> kLogp = {-0.5f, -1.f, -2.f, -3.f, -0.1f, -4.f, -1.5f, -2.5f, -0.7f};  // [3, 3]
const std::vector<float> kWeight = {1.f, 2.f, 0.5f};

TEST(NnNllLoss, MeanWithWeightMatchesHand) {
  auto l = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3, 3}, {3}, true, 1, -100); });
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[0].rank(), 0);
  EXPECT_EQ(l.results[1].rank(), 0);
  auto r = run_all(l, {f32(kLogp, {3, 3}), i64({1, 0, 2}, {3}), f32(kWeight, {3})});
  // rows pick -1 (w 2), -3 (w 1), -0.7 (w 0.5): sum 2 + 3 + 0.35 = 5.35 over weight 3.5
  EXPECT_NEAR(read<float>(r[0], 1)[0], 5.35 / 3.5, 1e-6);
  EXPECT_NEAR(read<float>(r[1], 1)[0], 3.5, 1e-6);
}

TEST(NnNllLoss, IgnoreIndexAndNoneAndSum) {
  auto none = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3, 3}, {3}, false, 0, 2); });
  EXPECT_EQ(none.results[0].dims(), hlo::Dims{3});
  auto out = read<float>(run_all(none, {f32(kLogp, {3, 3}), i64({1, 2, 0}, {3})})[0], 3);
  EXPECT_FLOAT_EQ(out[0], 1.f);
  EXPECT_FLOAT_EQ(out[1], 0.f);  // ignored
  EXPECT_FLOAT_EQ(out[2], 1.5f);

  auto mean = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3, 3}, {3}, false, 1, 2); });
  auto r = run_all(mean, {f32(kLogp, {3, 3}), i64({1, 2, 0}, {3})});
  EXPECT_NEAR(read<float>(r[0], 1)[0], (1 + 1.5) / 2, 1e-6);
  EXPECT_FLOAT_EQ(read<float>(r[1], 1)[0], 2.f);

  auto sum = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3, 3}, {3}, false, 2, -100); });
  EXPECT_NEAR(read<float>(run_all(sum, {f32(kLogp, {3, 3}), i64({1, 2, 0}, {3})})[0], 1)[0], 1 + 4 + 1.5, 1e-6);
}

TEST(NnNllLoss, OneDimInput) {
  auto l = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3}, {}, true, 0, -100); });
  EXPECT_EQ(l.results[0].rank(), 0);
  auto r = run_all(l, {f32({-0.5f, -1.f, -2.f}, {3}), i64({2}, {}), f32(kWeight, {3})});
  EXPECT_FLOAT_EQ(read<float>(r[0], 1)[0], 1.f);  // 2 * 0.5
  EXPECT_FLOAT_EQ(read<float>(r[1], 1)[0], 0.5f);
}

TEST(NnNllLoss, OutOfRangeTargetFailsTheCheck) {
  hlo::Builder b;
  auto args = nll_args(b, {3, 3}, {3}, false, 1, -100);
  lowering::Context cx(b, args, "aten::nll_loss_forward");
  auto res = lowering::find_lowering("aten::nll_loss_forward")(cx);
  ASSERT_EQ(cx.checks().size(), 1u);
  EXPECT_NE(cx.checks()[0].message.find("out of bounds"), std::string::npos);
  b.set_results({res[0], cx.checks()[0].failed});
  auto exe = testing::client().compile(b.module_text(), 0);
  auto run = [&](const std::vector<int64_t>& t) {
    auto x = f32(kLogp, {3, 3}), tt = i64(t, {3});
    auto out = exe->execute({x->get(), tt->get()});
    return read<uint8_t>(out[1], 1)[0] != 0;
  };
  EXPECT_FALSE(run({0, 1, 2}));
  EXPECT_TRUE(run({0, 3, 2}));
  EXPECT_TRUE(run({-1, 0, 0}));
  EXPECT_FALSE(run({-100, 0, 0}));  // ignore_index is never out of bounds
}

TEST(NnNllLoss, EmptyBatchCompilesAndReduces) {
  // An empty batch has nothing to gather: sum and total weight are 0, the
  // mean is 0 / 0 = nan (as on CPU), and the backward is an empty gradient.
  for (bool weight : {false, true}) {
    for (int64_t reduction : {1, 2}) {
      auto l = lower("aten::nll_loss_forward", [&](hlo::Builder& b) {
        return nll_args(b, {0, 3}, {0}, weight, reduction, -100);
      });
      std::vector<runtime::BufferPtr> in = {f32({}, {0, 3}), i64({}, {0})};
      if (weight) in.push_back(f32(kWeight, {3}));
      auto r = run_all(l, in);
      float loss = read<float>(r[0], 1)[0];
      if (reduction == 2)
        EXPECT_EQ(loss, 0.f);
      else
        EXPECT_TRUE(std::isnan(loss));
      EXPECT_EQ(read<float>(r[1], 1)[0], 0.f);
    }
  }
  auto l = lower("aten::nll_loss_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})),
                            Arg::tensor(b.parameter({DType::F32, {0, 3}})),
                            Arg::tensor(b.parameter({DType::I64, {0}})),
                            Arg::none(),
                            Arg::integer(2),
                            Arg::integer(-100),
                            Arg::tensor(b.parameter({DType::F32, {}}))};
  });
  EXPECT_EQ(l.results[0].dims(), (hlo::Dims{0, 3}));
  EXPECT_NO_THROW(testing::client().compile(l.text, 0));
}

TEST(NnNllLoss, BackwardMeanMatchesHand) {
  auto l = lower("aten::nll_loss_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})), Arg::tensor(b.parameter({DType::F32, {3, 3}})),
                            Arg::tensor(b.parameter({DType::I64, {3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::integer(1), Arg::integer(0), Arg::tensor(b.parameter({DType::F32, {}}))};
  });
  EXPECT_EQ(l.results[0].dims(), (hlo::Dims{3, 3}));
  auto gi = read<float>(run_all(l, {f32({2.f}, {}), f32(kLogp, {3, 3}), i64({1, 0, 2}, {3}), f32(kWeight, {3}),
                                    f32({2.5f}, {})})[0],
                        9);
  // row 1 has target 0 == ignore_index; others get -w[t] * 2 / 2.5 at column t.
  std::vector<float> want = {0, -2 * 2 / 2.5f, 0, 0, 0, 0, 0, 0, -0.5f * 2 / 2.5f};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(gi[i], want[i], 1e-6) << i;
}

TEST(NnNllLoss, TwoDimNoneAndBackward) {
  // input [1, 2, 1, 2]: classes on dim 1; target [1, 1, 2]
  std::vector<float> x = {-1, -2, -3, -4};  // x[0, c, 0, w] = x[c * 2 + w]
  auto f = lower("aten::nll_loss2d_forward", [](hlo::Builder& b) { return nll_args(b, {1, 2, 1, 2}, {1, 1, 2}, false, 0, -100); });
  EXPECT_EQ(f.results[0].dims(), (hlo::Dims{1, 1, 2}));
  auto out = read<float>(run_all(f, {f32(x, {1, 2, 1, 2}), i64({1, 0}, {1, 1, 2})})[0], 2);
  EXPECT_FLOAT_EQ(out[0], 3.f);  // -x[0, 1, 0, 0]
  EXPECT_FLOAT_EQ(out[1], 2.f);  // -x[0, 0, 0, 1]

  auto bw = lower("aten::nll_loss2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2}})), Arg::tensor(b.parameter({DType::F32, {1, 2, 1, 2}})),
                            Arg::tensor(b.parameter({DType::I64, {1, 1, 2}})), Arg::none(), Arg::integer(0),
                            Arg::integer(-100), Arg::tensor(b.parameter({DType::F32, {}}))};
  });
  auto gi = read<float>(run_all(bw, {f32({10, 20}, {1, 1, 2}), f32(x, {1, 2, 1, 2}), i64({1, 0}, {1, 1, 2}), f32({0}, {})})[0], 4);
  EXPECT_FLOAT_EQ(gi[0], 0.f);    // c0 w0
  EXPECT_FLOAT_EQ(gi[1], -20.f);  // c0 w1
  EXPECT_FLOAT_EQ(gi[2], -10.f);  // c1 w0
  EXPECT_FLOAT_EQ(gi[3], 0.f);    // c1 w1
}

// ---- other losses

TEST(NnMseLoss, ReductionsAndBackward) {
  std::vector<float> a = {1, 2, 3, 4}, t = {0, 2, 5, 1};  // diffs 1, 0, -2, 3: squares 1, 0, 4, 9
  for (int64_t red : {0, 1, 2}) {
    auto l = lower("aten::mse_loss", [&](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::tensor(b.parameter({DType::F32, {4}})),
                              Arg::integer(red)};
    });
    auto out = read<float>(run_all(l, {f32(a, {4}), f32(t, {4})})[0], red == 0 ? 4 : 1);
    if (red == 0) {
      EXPECT_EQ(out, (std::vector<float>{1, 0, 4, 9}));
    } else {
      EXPECT_FLOAT_EQ(out[0], red == 1 ? 3.5f : 14.f);
    }
  }
  auto bw = lower("aten::mse_loss_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})), Arg::tensor(b.parameter({DType::F32, {4}})),
                            Arg::tensor(b.parameter({DType::F32, {4}})), Arg::integer(1)};
  });
  auto g = read<float>(run_all(bw, {f32({3.f}, {}), f32(a, {4}), f32(t, {4})})[0], 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(g[i], 2.0 / 4 * (a[i] - t[i]) * 3, 1e-6);
}

TEST(NnBinaryCrossEntropy, MatchesFormulaAndClampsLog) {
  std::vector<float> x = {0.25f, 0.9f, 0.f}, y = {1, 0, 1};
  auto l = lower("aten::binary_cross_entropy", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::none(), Arg::integer(0)};
  });
  auto out = read<float>(run_all(l, {f32(x, {3}), f32(y, {3})})[0], 3);
  EXPECT_NEAR(out[0], -std::log(0.25), 1e-6);
  EXPECT_NEAR(out[1], -std::log(1 - 0.9), 1e-5);
  EXPECT_NEAR(out[2], 100.0, 1e-5);  // log(0) clamped to -100

  auto bw = lower("aten::binary_cross_entropy_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2}})), Arg::tensor(b.parameter({DType::F32, {2}})),
                            Arg::tensor(b.parameter({DType::F32, {2}})), Arg::none(), Arg::integer(0)};
  });
  auto g = read<float>(run_all(bw, {f32({1, 2}, {2}), f32({0.25f, 0.9f}, {2}), f32({1, 0}, {2})})[0], 2);
  EXPECT_NEAR(g[0], 1 * (0.25 - 1) / (0.75 * 0.25), 1e-5);
  EXPECT_NEAR(g[1], 2 * (0.9 - 0) / (0.1 * 0.9), 1e-3);
}

// ---- activations and dropout backward

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
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2}})), scalar(b), scalar(b), scalar(b),
                            Arg::boolean(false), Arg::tensor(b.parameter({DType::F32, {2}}))};
  });
  auto g = read<float>(run_all(bw, {f32({1, 1}, {2}), f64(1.5), f64(2), f64(0.5), f32({-1, 2}, {2})})[0], 2);
  EXPECT_NEAR(g[0], 0.5 * 1.5 * 2 * std::exp(-0.5), 1e-6);
  EXPECT_NEAR(g[1], 2.0, 1e-6);
}

TEST(NnDropout, BackwardScalesByMask) {
  auto l = lower("aten::native_dropout_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::Bool, {3}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<uint8_t> mask = {1, 0, 1};
  auto g = read<float>(run_all(l, {f32({1, 2, 3}, {3}), upload(mask, DType::Bool, {3}), f64(2.0)})[0], 3);
  EXPECT_EQ(g, (std::vector<float>{2, 0, 6}));
}

// ---- reduced precision

TEST(NnHalf, BFloat16OpsCompileRunAndKeepTheirDtype) {
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

TEST(NnHalf, Float16SoftmaxIsAccurate) {
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
