// Numeric checks of the layer, batch and group norm lowerings
// (csrc/lowering/norm.cc) against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::expect_near;
using testing::lower;
using testing::read;
using testing::run_all;
using testing::upload;
using testing::buffers::f32;
using testing::buffers::f64;
using testing::buffers::i64;

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
testing::Lowered batch_norm(bool training) {
  return lower("aten::native_batch_norm", [=](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 1}})), Arg::tensor(b.parameter({DType::F32, {1}})),
                            Arg::tensor(b.parameter({DType::F32, {1}})),    Arg::tensor(b.parameter({DType::F32, {1}})),
                            Arg::tensor(b.parameter({DType::F32, {1}})),    Arg::boolean(training),
                            Arg::scalar(b.parameter({DType::F64, {}})),     Arg::scalar(b.parameter({DType::F64, {}}))};
  });
}

TEST(NormBatch, TrainingNormalisesAndUpdatesRunningStats) {
  auto l = batch_norm(true);
  ASSERT_EQ(l.results.size(), 5u);
  // x = [1, 3]: mean 2, biased var 1, unbiased var 2; weight 2, bias 1.
  auto r =
      run_all(l, {f32({1, 3}, {2, 1}), f32({2}, {1}), f32({1}, {1}), f32({0}, {1}), f32({1}, {1}), f64(0.1), f64(0)});
  expect_near(read<float>(r[0], 2), {-1, 3});
  expect_near(read<float>(r[1], 1), {2});
  expect_near(read<float>(r[2], 1), {1});
  expect_near(read<float>(r[3], 1), {0.2f});         // 0.9 * 0 + 0.1 * 2
  expect_near(read<float>(r[4], 1), {0.9f + 0.2f});  // 0.9 * 1 + 0.1 * 2
}

TEST(NormBatch, EvalUsesRunningStatsAndKeepsThem) {
  auto l = batch_norm(false);
  ASSERT_EQ(l.results[1].dims(), (hlo::Dims{0}));
  auto r =
      run_all(l, {f32({1, 3}, {2, 1}), f32({2}, {1}), f32({1}, {1}), f32({1}, {1}), f32({4}, {1}), f64(0.1), f64(0)});
  expect_near(read<float>(r[0], 2), {1, 3});  // (x - 1) / 2 * 2 + 1
  expect_near(read<float>(r[3], 1), {1});
  expect_near(read<float>(r[4], 1), {4});
}

TEST(NormBatch, EvalBackward) {
  // native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
  //   save_invstd, train, eps, output_mask): eval grad_input = g * weight / sqrt(var + eps)
  auto l = lower("aten::native_batch_norm_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 1}})),
                            Arg::tensor(b.parameter({DType::F32, {2, 1}})),
                            Arg::tensor(b.parameter({DType::F32, {1}})),
                            Arg::tensor(b.parameter({DType::F32, {1}})),
                            Arg::tensor(b.parameter({DType::F32, {1}})),
                            Arg::none(),
                            Arg::none(),
                            Arg::boolean(false),
                            Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::integers({1, 1, 1})};
  });
  auto r = run_all(l, {f32({1, 2}, {2, 1}), f32({1, 3}, {2, 1}), f32({3}, {1}), f32({1}, {1}), f32({4}, {1}), f64(0)});
  expect_near(read<float>(r[0], 2), {1.5, 3});
  expect_near(read<float>(r[1], 1), {1 * 0 + 2 * 1});  // sum g * (x - mean) / std
  expect_near(read<float>(r[2], 1), {3});
}

TEST(NormGroup, OneGroupOverChannelsAndSpace) {
  // native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
  auto l = lower("aten::native_group_norm", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 2, 2}})),
                            Arg::none(),
                            Arg::none(),
                            Arg::integer(1),
                            Arg::integer(2),
                            Arg::integer(2),
                            Arg::integer(1),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto r = run_all(l, {f32({1, 2, 3, 4}, {1, 2, 2}), f64(0)});
  double s = std::sqrt(1.25);
  expect_near(read<float>(r[0], 4), {float(-1.5 / s), float(-0.5 / s), float(0.5 / s), float(1.5 / s)});
  expect_near(read<float>(r[1], 1), {2.5});
  expect_near(read<float>(r[2], 1), {float(1 / s)});
}

TEST(NormGroup, BackwardOfAConstantGradientIsZero) {
  // native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, mask):
  // d/dx sum(normalised x) = 0; grad_bias = per-channel sums of grad_out.
  auto l = lower("aten::native_group_norm_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 2, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 2, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1}})),
                            Arg::tensor(b.parameter({DType::F32, {2}})),
                            Arg::integer(1),
                            Arg::integer(2),
                            Arg::integer(2),
                            Arg::integer(1),
                            Arg::integers({1, 1, 1})};
  });
  float rstd = float(1 / std::sqrt(1.25));
  auto r = run_all(l, {f32({1, 1, 1, 1}, {1, 2, 2}), f32({1, 2, 3, 4}, {1, 2, 2}), f32({2.5}, {1, 1}),
                       f32({rstd}, {1, 1}), f32({1, 1}, {2})});
  expect_near(read<float>(r[0], 4), {0, 0, 0, 0});
  expect_near(read<float>(r[1], 2), {-2 * rstd, 2 * rstd});  // sum of xhat per channel
  expect_near(read<float>(r[2], 2), {2, 2});
}

// ---- layer norm

std::vector<Arg> layer_norm_args(hlo::Builder& b, bool affine) {
  return {Arg::tensor(b.parameter({DType::F32, {2, 4}})), Arg::integers({4}),
          affine ? Arg::tensor(b.parameter({DType::F32, {4}})) : Arg::none(),
          affine ? Arg::tensor(b.parameter({DType::F32, {4}})) : Arg::none(),
          Arg::scalar(b.parameter({DType::F64, {}}))};
}

TEST(NormLayer, MatchesHandComputed) {
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

TEST(NormLayer, BackwardMatchesHandComputed) {
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

TEST(NormLayer, BackwardMaskedOutputsKeepTheirShapes) {
  auto l = lower("aten::native_layer_norm_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::BF16, {2, 3, 4}})),
                            Arg::tensor(b.parameter({DType::BF16, {2, 3, 4}})),
                            Arg::integers({3, 4}),
                            Arg::tensor(b.parameter({DType::BF16, {2, 1, 1}})),
                            Arg::tensor(b.parameter({DType::BF16, {2, 1, 1}})),
                            Arg::none(),
                            Arg::none(),
                            Arg::integers({1, 0, 0})};
  });
  EXPECT_EQ(l.results[0].type, (hlo::TensorType{DType::BF16, {2, 3, 4}}));
  EXPECT_EQ(l.results[1].type, (hlo::TensorType{DType::BF16, {3, 4}}));
  EXPECT_EQ(l.results[2].type, (hlo::TensorType{DType::BF16, {3, 4}}));
  EXPECT_NO_THROW(testing::client().compile(l.text, 0));
}

TEST(NormBatch, NoTrainingUsesRunningStats) {
  auto l = lower("aten::_native_batch_norm_legit_no_training", [](hlo::Builder& b) {
    return std::vector<Arg>{
        Arg::tensor(b.parameter({DType::F32, {2, 2, 1}})), Arg::tensor(b.parameter({DType::F32, {2}})),
        Arg::tensor(b.parameter({DType::F32, {2}})),       Arg::tensor(b.parameter({DType::F32, {2}})),
        Arg::tensor(b.parameter({DType::F32, {2}})),       Arg::scalar(b.parameter({DType::F64, {}})),
        Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  ASSERT_EQ(l.results.size(), 3u);
  EXPECT_EQ(l.results[1].dims(), hlo::Dims{0});
  std::vector<float> x = {1, 2, 3, 4}, w = {2, 1}, bias = {0, -1}, rm = {1, 2}, rv = {4, 0.25f};
  auto out = read<float>(
      run_all(l, {f32(x, {2, 2, 1}), f32(w, {2}), f32(bias, {2}), f32(rm, {2}), f32(rv, {2}), f64(0.1), f64(0)})[0], 4);
  // element (n, c): (x - rm[c]) / sqrt(rv[c]) * w[c] + b[c]
  EXPECT_NEAR(out[0], (1 - 1) / 2.0 * 2 + 0, 1e-6);
  EXPECT_NEAR(out[1], (2 - 2) / 0.5 * 1 - 1, 1e-6);
  EXPECT_NEAR(out[2], (3 - 1) / 2.0 * 2 + 0, 1e-6);
  EXPECT_NEAR(out[3], (4 - 2) / 0.5 * 1 - 1, 1e-6);
}

}  // namespace
}  // namespace torch_pjrt
