// Structure and numeric checks of the grid sampling lowerings
// (csrc/lowering/sampling.cc); expected values worked out by hand from
// ATen's GridSampler.h formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::count;
using testing::lower;

// input [1, 1, 2, 2] = [[1, 2], [3, 4]]; grid [1, 1, 3, 2] of (x, y) points.
const std::vector<float> kInput = {1, 2, 3, 4};

testing::Lowered forward2d(int64_t mode, int64_t padding, bool align) {
  return lower("aten::grid_sampler_2d", [=](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 2}})), Arg::integer(mode),
                            Arg::integer(padding), Arg::boolean(align)};
  });
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.f, std::abs(want[i]))) << "at " << i;
}

TEST(Sampling, GridSampler2dBilinearGolden) {
  auto l = forward2d(0, 0, true);
  // Four corners, each one gather from the [N*H*W, C] table; no scatter.
  EXPECT_EQ(count(l.text, "\"stablehlo.gather\""), 4u);
  EXPECT_EQ(count(l.text, "\"stablehlo.scatter\""), 0u);
  EXPECT_EQ(count(l.text, "\"stablehlo.floor\""), 2u);
  EXPECT_NE(l.text.find("-> (tensor<1x1x1x3xf32>)"), std::string::npos);
  // centre, top-left corner, top-right corner
  auto out = testing::run<float, float>(l, {kInput, {0, 0, -1, -1, 1, -1}}, DType::F32);
  expect_near(out, {2.5f, 1.f, 2.f});
}

TEST(Sampling, GridSampler2dZerosPaddingUnaligned) {
  // x = y = -1 without align_corners is pixel -0.5: a quarter of input[0][0].
  auto out = testing::run<float, float>(forward2d(0, 0, false), {kInput, {-1, -1, 0, 0, 1, 1}}, DType::F32);
  expect_near(out, {0.25f, 2.5f, 1.f});
}

TEST(Sampling, GridSampler2dNearestAndBorder) {
  // Nearest rounds half to even: x = 0.5 (grid 0) picks column 0.
  auto l = forward2d(1, 1, true);
  EXPECT_NE(l.text.find("stablehlo.round_nearest_even"), std::string::npos);
  auto out = testing::run<float, float>(l, {kInput, {0, 0, 3, -1, 0.9f, 0.9f}}, DType::F32);
  expect_near(out, {1.f, 2.f, 4.f});
}

TEST(Sampling, GridSampler2dBicubicConstant) {
  // Cubic convolution weights sum to one: a constant input stays constant
  // with border padding.
  auto l = forward2d(2, 1, false);
  EXPECT_EQ(count(l.text, "\"stablehlo.gather\""), 16u);
  auto out = testing::run<float, float>(l, {{5, 5, 5, 5}, {0.3f, -0.7f, 0.1f, 0.2f, -1, 1}}, DType::F32);
  expect_near(out, {5.f, 5.f, 5.f});
}

TEST(Sampling, GridSampler2dBackward) {
  auto l = lower("aten::grid_sampler_2d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 3}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1, 2, 2}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 2}})),
                            Arg::integer(0),
                            Arg::integer(0),
                            Arg::boolean(true),
                            Arg::integers({1, 1})};
  });
  EXPECT_EQ(count(l.text, "\"stablehlo.scatter\""), 1u);
  ASSERT_EQ(l.results.size(), 2u);
  auto out = testing::exec(
      l, {testing::bytes<float>({1, 1, 1}), testing::bytes(kInput), testing::bytes<float>({0, 0, -1, -1, 1, -1})});
  auto gi = testing::values<float>(out[0]), gg = testing::values<float>(out[1]);
  // Centre spreads a quarter to each pixel; the corners land on one pixel.
  expect_near(gi, {1.25f, 1.25f, 0.25f, 0.25f});
  // d/dx, d/dy times (size - 1) / 2; the right neighbour of (1, -1) is out
  // of bounds and counts as zero.
  expect_near(gg, {0.5f, 1.f, 0.5f, 1.f, -1.f, 1.f});
}

TEST(Sampling, GridSampler3dRejectsBicubic) {
  EXPECT_THROW(lower("aten::grid_sampler_3d",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 2, 2, 2}})),
                                               Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 1, 3}})), Arg::integer(2),
                                               Arg::integer(0), Arg::boolean(false)};
                     }),
               lowering::LoweringError);
}

}  // namespace
}  // namespace torch_pjrt
