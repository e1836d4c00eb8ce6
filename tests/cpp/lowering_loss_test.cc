// Losses (loss.cc): numeric checks of nll_loss (weights, ignore_index, the
// reductions, the target range check, empty batches, backward), mse, binary
// cross entropy and huber. Expected values are computed by hand in each
// test, never by the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

TEST(NllLoss, MeanWithWeightMatchesHand) {
  auto l = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3, 3}, {3}, true, 1, -100); });
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[0].rank(), 0);
  EXPECT_EQ(l.results[1].rank(), 0);
  auto r = run_all(l, {f32(kLogp, {3, 3}), i64({1, 0, 2}, {3}), f32(kWeight, {3})});
  // rows pick -1 (w 2), -3 (w 1), -0.7 (w 0.5): sum 2 + 3 + 0.35 = 5.35 over weight 3.5
  EXPECT_NEAR(read<float>(r[0], 1)[0], 5.35 / 3.5, 1e-6);
  EXPECT_NEAR(read<float>(r[1], 1)[0], 3.5, 1e-6);
}

TEST(NllLoss, IgnoreIndexAndNoneAndSum) {
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

TEST(NllLoss, OneDimInput) {
  auto l = lower("aten::nll_loss_forward", [](hlo::Builder& b) { return nll_args(b, {3}, {}, true, 0, -100); });
  EXPECT_EQ(l.results[0].rank(), 0);
  auto r = run_all(l, {f32({-0.5f, -1.f, -2.f}, {3}), i64({2}, {}), f32(kWeight, {3})});
  EXPECT_FLOAT_EQ(read<float>(r[0], 1)[0], 1.f);  // 2 * 0.5
  EXPECT_FLOAT_EQ(read<float>(r[1], 1)[0], 0.5f);
}

TEST(NllLoss, OutOfRangeTargetFailsTheCheck) {
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

TEST(NllLoss, EmptyBatchCompilesAndReduces) {
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

TEST(NllLoss, BackwardMeanMatchesHand) {
  auto l = lower("aten::nll_loss_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {}})),
                            Arg::tensor(b.parameter({DType::F32, {3, 3}})),
                            Arg::tensor(b.parameter({DType::I64, {3}})),
                            Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::integer(1),
                            Arg::integer(0),
                            Arg::tensor(b.parameter({DType::F32, {}}))};
  });
  EXPECT_EQ(l.results[0].dims(), (hlo::Dims{3, 3}));
  auto gi = read<float>(
      run_all(l, {f32({2.f}, {}), f32(kLogp, {3, 3}), i64({1, 0, 2}, {3}), f32(kWeight, {3}), f32({2.5f}, {})})[0], 9);
  // row 1 has target 0 == ignore_index; others get -w[t] * 2 / 2.5 at column t.
  std::vector<float> want = {0, -2 * 2 / 2.5f, 0, 0, 0, 0, 0, 0, -0.5f * 2 / 2.5f};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(gi[i], want[i], 1e-6) << i;
}

TEST(NllLoss, TwoDimNoneAndBackward) {
  // input [1, 2, 1, 2]: classes on dim 1; target [1, 1, 2]
  std::vector<float> x = {-1, -2, -3, -4};  // x[0, c, 0, w] = x[c * 2 + w]
  auto f = lower("aten::nll_loss2d_forward", [](hlo::Builder& b) {
    return nll_args(b, {1, 2, 1, 2}, {1, 1, 2}, false, 0, -100);
  });
  EXPECT_EQ(f.results[0].dims(), (hlo::Dims{1, 1, 2}));
  auto out = read<float>(run_all(f, {f32(x, {1, 2, 1, 2}), i64({1, 0}, {1, 1, 2})})[0], 2);
  EXPECT_FLOAT_EQ(out[0], 3.f);  // -x[0, 1, 0, 0]
  EXPECT_FLOAT_EQ(out[1], 2.f);  // -x[0, 0, 0, 1]

  auto bw = lower("aten::nll_loss2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 2, 1, 2}})),
                            Arg::tensor(b.parameter({DType::I64, {1, 1, 2}})),
                            Arg::none(),
                            Arg::integer(0),
                            Arg::integer(-100),
                            Arg::tensor(b.parameter({DType::F32, {}}))};
  });
  auto gi = read<float>(
      run_all(bw, {f32({10, 20}, {1, 1, 2}), f32(x, {1, 2, 1, 2}), i64({1, 0}, {1, 1, 2}), f32({0}, {})})[0], 4);
  EXPECT_FLOAT_EQ(gi[0], 0.f);    // c0 w0
  EXPECT_FLOAT_EQ(gi[1], -20.f);  // c0 w1
  EXPECT_FLOAT_EQ(gi[2], -10.f);  // c1 w0
  EXPECT_FLOAT_EQ(gi[3], 0.f);    // c1 w1
}

// ---- mse, binary cross entropy, huber

TEST(MseLoss, ReductionsAndBackward) {
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

TEST(BinaryCrossEntropy, MatchesFormulaAndClampsLog) {
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

TEST(HuberLoss, QuadraticInsideLinearOutside) {
  auto l = lower("aten::huber_loss", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::integer(0), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(run_all(l, {f32({0.0f, 1.0f, -3.0f}, {3}), f32({0.5f, 1.0f, 0.0f}, {3}), f64(1.0)})[0], 3);
  EXPECT_NEAR(out[0], 0.5 * 0.25, 1e-7);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 1.0 * (3.0 - 0.5), 1e-6);
}

}  // namespace
}  // namespace torch_pjrt
