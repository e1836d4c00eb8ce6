// Numeric checks of the convolution lowerings (csrc/lowering/conv.cc), im2col
// and col2im included, against values computed by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
std::vector<Arg> conv_args(hlo::Builder& b, hlo::Dims in, hlo::Dims w, bool bias, std::vector<int64_t> stride,
                           std::vector<int64_t> pad, bool transposed, std::vector<int64_t> out_pad, int64_t groups) {
  int64_t n = static_cast<int64_t>(in.size()) - 2;
  return {
      Arg::tensor(b.parameter({DType::F32, in})),
      Arg::tensor(b.parameter({DType::F32, w})),
      bias ? Arg::tensor(b.parameter({DType::F32, {w[transposed ? 1 : 0] * (transposed ? groups : 1)}})) : Arg::none(),
      Arg::integers(stride),
      Arg::integers(pad),
      Arg::integers(std::vector<int64_t>(n, 1)),
      Arg::boolean(transposed),
      Arg::integers(out_pad),
      Arg::integer(groups)};
}

const std::vector<float> k3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
const std::vector<float> kDiag = {1, 0, 0, 1};  // 2x2 kernel summing a window's diagonal

TEST(ConvForward, DiagonalKernelWithBias) {
  auto l = lower("aten::convolution", [](hlo::Builder& b) {
    return conv_args(b, {1, 1, 3, 3}, {1, 1, 2, 2}, true, {1, 1}, {0, 0}, false, {0, 0}, 1);
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 1, 2, 2}));
  auto out = read<float>(run_all(l, {f32(k3x3, {1, 1, 3, 3}), f32(kDiag, {1, 1, 2, 2}), f32({0.5f}, {1})})[0], 4);
  expect_near(out, {6.5f, 8.5f, 12.5f, 14.5f});
}

TEST(ConvForward, StridedPadded) {
  // pad 1, stride 2 over 3x3: windows at (-1,-1), (-1,1), (1,-1), (1,1); the
  // diagonal of each: x[r][c] + x[r+1][c+1], padding counting 0.
  auto l = lower("aten::convolution", [](hlo::Builder& b) {
    return conv_args(b, {1, 1, 3, 3}, {1, 1, 2, 2}, false, {2, 2}, {1, 1}, false, {0, 0}, 1);
  });
  auto out = read<float>(run_all(l, {f32(k3x3, {1, 1, 3, 3}), f32(kDiag, {1, 1, 2, 2})})[0], 4);
  expect_near(out, {1, 3, 7, 5 + 9});
}

// A kernel larger than its input (a small late layer, or the gradient of
// one): XLA would swap the operands into a reversed-window convolution, a
// naive loop on CPU, so the lowering emits a dot_general of the patches.
TEST(ConvForward, KernelLargerThanInputIsADotOfPatches) {
  auto l = lower("aten::convolution", [](hlo::Builder& b) {
    return conv_args(b, {1, 1, 2, 2}, {1, 1, 3, 3}, false, {1, 1}, {1, 1}, false, {0, 0}, 1);
  });
  EXPECT_NE(l.text.find("stablehlo.dot_general"), std::string::npos) << l.text;
  EXPECT_EQ(l.text.find("stablehlo.convolution"), std::string::npos) << l.text;
  // out[i][j] = sum of x[i + a - 1][j + c - 1] * k[a][c] over the taps inside x.
  auto out = read<float>(run_all(l, {f32({1, 2, 3, 4}, {1, 1, 2, 2}), f32(k3x3, {1, 1, 3, 3})})[0], 4);
  expect_near(out, {1 * 5 + 2 * 6 + 3 * 8 + 4 * 9, 1 * 4 + 2 * 5 + 3 * 7 + 4 * 8, 1 * 2 + 2 * 3 + 3 * 5 + 4 * 6,
                    1 * 1 + 2 * 2 + 3 * 4 + 4 * 5});
}

TEST(ConvForward, TransposedWithOutputPadding) {
  // 1d: x = [1, 2], w = [1, 10], stride 2, output_padding 1: length 5.
  auto l = lower("aten::convolution",
                 [](hlo::Builder& b) { return conv_args(b, {1, 1, 2}, {1, 1, 2}, false, {2}, {0}, true, {1}, 1); });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 1, 5}));
  auto out = read<float>(run_all(l, {f32({1, 2}, {1, 1, 2}), f32({1, 10}, {1, 1, 2})})[0], 5);
  expect_near(out, {1, 10, 2, 20, 0});
}

TEST(ConvForward, Depthwise) {
  // groups = 2: channel c scaled by weight c.
  auto l = lower("aten::convolution",
                 [](hlo::Builder& b) { return conv_args(b, {1, 2, 2}, {2, 1, 1}, false, {1}, {0}, false, {0}, 2); });
  auto out = read<float>(run_all(l, {f32({1, 2, 3, 4}, {1, 2, 2}), f32({10, 100}, {2, 1, 1})})[0], 4);
  expect_near(out, {10, 20, 300, 400});
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride, padding, dilation,
//   transposed, output_padding, groups, output_mask)
std::vector<Arg> backward_args(hlo::Builder& b, hlo::Dims go, hlo::Dims in, hlo::Dims w, int64_t groups,
                               std::vector<int64_t> mask) {
  int64_t n = static_cast<int64_t>(in.size()) - 2;
  std::vector<int64_t> ones(n, 1), zeros(n, 0);
  return {Arg::tensor(b.parameter({DType::F32, go})),
          Arg::tensor(b.parameter({DType::F32, in})),
          Arg::tensor(b.parameter({DType::F32, w})),
          Arg::integers({w[0]}),
          Arg::integers(ones),
          Arg::integers(zeros),
          Arg::integers(ones),
          Arg::boolean(false),
          Arg::integers(zeros),
          Arg::integer(groups),
          Arg::integers(mask)};
}

TEST(ConvBackward, AllThreeGradients) {
  auto l = lower("aten::convolution_backward", [](hlo::Builder& b) {
    return backward_args(b, {1, 1, 2, 2}, {1, 1, 3, 3}, {1, 1, 2, 2}, 1, {1, 1, 1});
  });
  auto r = run_all(l, {f32({1, 1, 1, 1}, {1, 1, 2, 2}), f32(k3x3, {1, 1, 3, 3}), f32(kDiag, {1, 1, 2, 2})});
  // grad_input[r][c] = [r < 2 && c < 2] + [r >= 1 && c >= 1]
  expect_near(read<float>(r[0], 9), {1, 1, 0, 1, 2, 1, 0, 1, 1});
  // grad_weight[i][j] = sum of the 2x2 window of x at offset (i, j)
  expect_near(read<float>(r[1], 4), {12, 16, 24, 28});
  expect_near(read<float>(r[2], 1), {4});
}

TEST(ConvBackward, GroupedWeightGradientAndMaskedZeros) {
  // depthwise 1d, k = 1: grad_weight[c] = sum_t x[c][t] * g[c][t]
  auto l = lower("aten::convolution_backward",
                 [](hlo::Builder& b) { return backward_args(b, {1, 2, 2}, {1, 2, 2}, {2, 1, 1}, 2, {0, 1, 0}); });
  auto r = run_all(l, {f32({1, 1, 2, 2}, {1, 2, 2}), f32({1, 2, 3, 4}, {1, 2, 2}), f32({5, 6}, {2, 1, 1})});
  expect_near(read<float>(r[0], 4), {0, 0, 0, 0});
  expect_near(read<float>(r[1], 2), {3, 14});
  expect_near(read<float>(r[2], 2), {0, 0});
}

// ---- im2col / col2im

TEST(ConvIm2col, ColumnsOfA3x3Image) {
  auto l = lower("aten::im2col", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 3}})), Arg::integers({2, 2}),
                            Arg::integers({1, 1}), Arg::integers({0, 0}), Arg::integers({1, 1})};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 4, 4}));
  auto out = read<float>(run_all(l, {f32({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 3, 3})})[0], 16);
  // row (i, j) of the kernel, column = window position (top-left 0, 1, 3, 4)
  EXPECT_EQ(out, (std::vector<float>{0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8}));
}

TEST(ConvCol2im, CountsOverlaps) {
  auto l = lower("aten::col2im", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 4, 4}})),
                            Arg::integers({3, 3}),
                            Arg::integers({2, 2}),
                            Arg::integers({1, 1}),
                            Arg::integers({0, 0}),
                            Arg::integers({1, 1})};
  });
  auto out = read<float>(run_all(l, {f32(std::vector<float>(16, 1.0f), {1, 4, 4})})[0], 9);
  // how many 2x2 windows of a 3x3 image cover each pixel
  EXPECT_EQ(out, (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

}  // namespace
}  // namespace torch_pjrt
