// Numeric checks for the fused optimizer lowerings on the CPU plugin.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::run_all;
using testing::upload;

// One AdamW step (step 2, no amsgrad) on a 3-element parameter, against the
// update written out by hand in double.
TEST(OptimAdamW, OneStepMatchesHandComputedUpdate) {
  auto l = lower("aten::_fused_adamw", [](hlo::Builder& b) {
    auto list = [&](DType t, hlo::Dims d) { return Arg::tensor_list({b.parameter({t, d})}); };
    auto f64 = [&] { return Arg::scalar(b.parameter({DType::F64, {}})); };
    std::vector<Arg> args{list(DType::F32, {3}), list(DType::F32, {3}), list(DType::F32, {3}),
                          list(DType::F32, {3}), Arg::tensor_list({}),  list(DType::F32, {})};
    for (int i = 0; i < 5; ++i) args.push_back(f64());  // lr, beta1, beta2, weight_decay, eps
    args.push_back(Arg::boolean(false));                // amsgrad
    args.push_back(Arg::boolean(false));                // maximize
    args.push_back(Arg::none());                        // grad_scale
    args.push_back(Arg::none());                        // found_inf
    return args;
  });
  ASSERT_EQ(l.results.size(), 4u);  // params, grads, exp_avgs, exp_avg_sqs

  float p[3] = {1.f, -2.f, 0.5f}, g[3] = {0.1f, 0.2f, -0.3f}, m[3] = {0.01f, 0.f, -0.02f}, v[3] = {0.001f, 0.002f, 0.f};
  float step = 2.f;
  double lr = 0.1, beta1 = 0.9, beta2 = 0.999, wd = 0.01, eps = 1e-8;
  auto out = run_all(l, {upload(p, DType::F32, {3}), upload(g, DType::F32, {3}), upload(m, DType::F32, {3}),
                         upload(v, DType::F32, {3}), upload(&step, DType::F32, {}), upload(&lr, DType::F64, {}),
                         upload(&beta1, DType::F64, {}), upload(&beta2, DType::F64, {}), upload(&wd, DType::F64, {}),
                         upload(&eps, DType::F64, {})});
  ASSERT_EQ(out.size(), 4u);
  float p2[3], g2[3], m2[3], v2[3];
  out[0]->to_host(p2, sizeof p2);
  out[1]->to_host(g2, sizeof g2);
  out[2]->to_host(m2, sizeof m2);
  out[3]->to_host(v2, sizeof v2);

  const double bias1 = 1 - beta1 * beta1, bias2 = 1 - beta2 * beta2;  // step 2
  for (int i = 0; i < 3; ++i) {
    double m_new = beta1 * m[i] + (1 - beta1) * g[i];
    double v_new = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    double p_new = p[i] * (1 - lr * wd) - lr / bias1 * m_new / (std::sqrt(v_new) / std::sqrt(bias2) + eps);
    EXPECT_EQ(g2[i], g[i]) << i;  // no grad_scale: grads come back unchanged
    EXPECT_NEAR(m2[i], m_new, 1e-7) << i;
    EXPECT_NEAR(v2[i], v_new, 1e-8) << i;
    EXPECT_NEAR(p2[i], p_new, 2e-6 * std::abs(p_new)) << i;
  }
  // Spot value: p[0] = 1 * 0.999 - 0.1/0.19 * 0.019 / (sqrt(0.001009)/sqrt(0.001999) + 1e-8).
  EXPECT_NEAR(p2[0], 0.999 - (0.1 / 0.19) * 0.019 / (std::sqrt(0.001009 / 0.001999) + 1e-8), 2e-6);
}

}  // namespace
}  // namespace torch_pjrt
