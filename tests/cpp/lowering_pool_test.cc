// Numeric checks of the pooling and upsampling lowerings
// (csrc/lowering/pool.cc) against values computed by hand.
#include <gtest/gtest.h>

#include <optional>

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
using testing::buffers::i64;

const std::vector<float> k3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};

TEST(PoolMax, CeilModeValuesAndIndices) {
  // 3x3, kernel 2, stride 2, ceil mode: windows {1,2,4,5} {3,6} {7,8} {9}.
  auto l = lower("aten::max_pool2d_with_indices", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 3}})),
                            Arg::integers({2, 2}),
                            Arg::integers({2, 2}),
                            Arg::integers({0, 0}),
                            Arg::integers({1, 1}),
                            Arg::boolean(true)};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 1, 2, 2}));
  auto r = run_all(l, {f32(k3x3, {1, 1, 3, 3})});
  expect_near(read<float>(r[0], 4), {5, 6, 8, 9});
  EXPECT_EQ(read<int64_t>(r[1], 4), (std::vector<int64_t>{4, 5, 7, 8}));
}

TEST(PoolMax, TiesPickTheFirstIndexAndBackwardScatters) {
  auto l = lower("aten::max_pool2d_with_indices", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 2, 2}})),
                            Arg::integers({2}),
                            Arg::integers({}),
                            Arg::integers({0}),
                            Arg::integers({1}),
                            Arg::boolean(false)};
  });
  auto r = run_all(l, {f32({7, 3, 7, 1}, {1, 2, 2})});
  EXPECT_EQ(read<int64_t>(r[1], 1), (std::vector<int64_t>{0}));

  // backward(grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices)
  auto bl = lower("aten::max_pool2d_with_indices_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 2, 3}})),
                            Arg::integers({1, 2}),
                            Arg::integers({1, 1}),
                            Arg::integers({0, 0}),
                            Arg::integers({1, 1}),
                            Arg::boolean(false),
                            Arg::tensor(b.parameter({DType::I64, {1, 1, 2}}))};
  });
  auto g = run_all(bl, {f32({10, 20}, {1, 1, 2}), f32(std::vector<float>(6, 0), {1, 2, 3}), i64({4, 4}, {1, 1, 2})});
  expect_near(read<float>(g[0], 6), {0, 0, 0, 0, 30, 0});
}

// avg_pool2d(self, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override?)
testing::Lowered avg(bool include_pad, std::optional<int64_t> divisor) {
  return lower("aten::avg_pool2d", [=](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 3}})),
                            Arg::integers({2, 2}),
                            Arg::integers({2, 2}),
                            Arg::integers({1, 1}),
                            Arg::boolean(false),
                            Arg::boolean(include_pad),
                            divisor ? Arg::integer(*divisor) : Arg::none()};
  });
}

TEST(PoolAvg, PaddingCountedOrNotAndDivisorOverride) {
  // pad 1, stride 2: windows {1} {2,3} {4,7} {5,6,8,9}
  expect_near(read<float>(run_all(avg(false, {}), {f32(k3x3, {1, 1, 3, 3})})[0], 4), {1, 2.5, 5.5, 7});
  expect_near(read<float>(run_all(avg(true, {}), {f32(k3x3, {1, 1, 3, 3})})[0], 4), {0.25, 1.25, 2.75, 7});
  expect_near(read<float>(run_all(avg(true, 2), {f32(k3x3, {1, 1, 3, 3})})[0], 4), {0.5, 2.5, 5.5, 14});
}

TEST(PoolAvg, BackwardSpreadsOverTheWindow) {
  // 1x4, kernel 2, stride 2: each gradient halves onto its two inputs.
  auto l = lower("aten::avg_pool2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1, 4}})),
                            Arg::integers({1, 2}),
                            Arg::integers({1, 2}),
                            Arg::integers({0, 0}),
                            Arg::boolean(false),
                            Arg::boolean(true),
                            Arg::none()};
  });
  auto r = run_all(l, {f32({2, 4}, {1, 1, 2}), f32({0, 0, 0, 0}, {1, 1, 4})});
  expect_near(read<float>(r[0], 4), {1, 1, 2, 2});
}

TEST(PoolAdaptive, OverlappingWindowsAndBackward) {
  // 5 -> 2: windows [0, 3) and [2, 5).
  auto l = lower("aten::_adaptive_avg_pool2d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 5}})), Arg::integers({1, 2})};
  });
  expect_near(read<float>(run_all(l, {f32({1, 2, 3, 4, 5}, {1, 1, 5})})[0], 2), {2, 4});
  auto bl = lower("aten::_adaptive_avg_pool2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1, 5}}))};
  });
  auto g = run_all(bl, {f32({3, 6}, {1, 1, 2}), f32({0, 0, 0, 0, 0}, {1, 1, 5})});
  expect_near(read<float>(g[0], 5), {1, 1, 3, 2, 2});
}

TEST(PoolAdaptive, MaxValuesAndIndices) {
  // 5 -> 2: windows [0, 3) and [2, 5).
  auto l = lower("aten::adaptive_max_pool2d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 5}})), Arg::integers({1, 2})};
  });
  auto r = run_all(l, {f32({1, 5, 2, 4, 3}, {1, 1, 5})});
  expect_near(read<float>(r[0], 2), {5, 4});
  EXPECT_EQ(read<int64_t>(r[1], 2), (std::vector<int64_t>{1, 3}));
}

TEST(PoolUpsample, NearestAndBilinear) {
  auto nearest = lower("aten::upsample_nearest2d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 2}})), Arg::integers({1, 3}), Arg::none(),
                            Arg::none()};
  });
  // scale 2/3: sources floor(0), floor(0.67), floor(1.33)
  expect_near(read<float>(run_all(nearest, {f32({1, 2}, {1, 1, 1, 2})})[0], 3), {1, 1, 2});
  for (bool align : {false, true}) {
    auto l = lower("aten::upsample_bilinear2d", [=](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 2}})), Arg::integers({1, 4}),
                              Arg::boolean(align), Arg::none(), Arg::none()};
    });
    auto out = read<float>(run_all(l, {f32({1, 2}, {1, 1, 1, 2})})[0], 4);
    if (align)
      expect_near(out, {1, 4.f / 3, 5.f / 3, 2});
    else  // sources max(0.5 * (o + 0.5) - 0.5, 0): 0, 0.25, 0.75, 1.25 (clamped to 1)
      expect_near(out, {1, 1.25, 1.75, 2});
  }
}

TEST(PoolUpsample, BilinearBackwardWithRuntimeScale) {
  // scale_w = 2 given at run time: 1/scale = 0.5, as computed from sizes.
  auto l = lower("aten::upsample_bilinear2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 4}})),
                            Arg::integers({1, 4}),
                            Arg::integers({1, 1, 1, 2}),
                            Arg::boolean(false),
                            Arg::none(),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  double two = 2.0;
  auto scale = upload(&two, DType::F64, {});
  auto r = run_all(l, {f32({1, 1, 1, 1}, {1, 1, 1, 4}), scale});
  // weights onto source 0: 1, 0.75, 0.25, 0; onto source 1: 0, 0.25, 0.75, 1
  expect_near(read<float>(r[0], 2), {2, 2});
}

// ---- max_unpool

TEST(PoolMaxUnpool, ScattersAtIndices) {
  auto l = lower("aten::max_unpool2d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::I64, {1, 1, 1, 2}})), Arg::integers({2, 2})};
  });
  auto out = read<float>(run_all(l, {f32({5, 7}, {1, 1, 1, 2}), i64({3, 0}, {1, 1, 1, 2})})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{7, 0, 0, 5}));
}

}  // namespace
}  // namespace torch_pjrt
