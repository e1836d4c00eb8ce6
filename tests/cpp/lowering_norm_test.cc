// Numeric checks of the batch/group norm lowerings (csrc/lowering/norm.cc)
// against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>

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
runtime::BufferPtr f64(double v) { return upload(&v, DType::F64, {}); }
void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

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

}  // namespace
}  // namespace torch_pjrt
