// Golden StableHLO text and numeric checks for the second batch of nn
// lowerings: activations (hardshrink, softplus, hardswish, glu), losses
// (huber), padding, im2col/col2im, max_unpool and channel_shuffle. Expected
// values are computed by hand in each test, never by the code under test.
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

runtime::BufferPtr f32(const std::vector<float>& v, const hlo::Dims& dims) { return upload(v, DType::F32, dims); }
runtime::BufferPtr f64(double v) { return upload(std::vector<double>{v}, DType::F64, {}); }
runtime::BufferPtr i64(const std::vector<int64_t>& v, const hlo::Dims& dims) { return upload(v, DType::I64, dims); }

// ---- activations

TEST(NnMoreHardshrink, Golden) {
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

TEST(NnMoreHardshrink, ZeroesInsideLambda) {
  auto l = lower("aten::hardshrink", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {6}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<float> x{-2.0f, -0.5f, 0.0f, 0.5f, 0.6f, 3.0f};
  auto out = read<float>(run_all(l, {f32(x, {6}), f64(0.5)})[0], 6);
  std::vector<float> want{-2.0f, 0.0f, 0.0f, 0.0f, 0.6f, 3.0f};  // |x| <= 0.5 -> 0
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(NnMoreSoftplus, MatchesFormulaAndThreshold) {
  auto l = lower("aten::softplus", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {5}})), Arg::scalar(b.parameter({DType::F64, {}})),
                            Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  std::vector<float> x{-3.0f, -0.5f, 0.0f, 1.0f, 12.0f};
  auto out = read<float>(run_all(l, {f32(x, {5}), f64(2.0), f64(20.0)})[0], 5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], std::log1p(std::exp(2.0 * x[i])) / 2.0, 1e-6) << i;
  EXPECT_EQ(out[4], 12.0f);  // x * beta = 24 > threshold: x itself
}

TEST(NnMoreHardswish, Pieces) {
  auto l = lower("aten::hardswish", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}}))};
  });
  auto out = read<float>(run_all(l, {f32({-4.0f, -1.0f, 1.5f, 5.0f}, {4})})[0], 4);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], -1.0 * 2.0 / 6.0, 1e-7);
  EXPECT_NEAR(out[2], 1.5 * 4.5 / 6.0, 1e-7);
  EXPECT_EQ(out[3], 5.0f);
}

TEST(NnMoreGlu, HalvesAlongDim) {
  auto l = lower("aten::glu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 2}})), Arg::integer(-1)};
  });
  auto out = read<float>(run_all(l, {f32({1.0f, 0.0f, 2.0f, -1.0f}, {2, 2})})[0], 2);
  EXPECT_NEAR(out[0], 1.0 * 0.5, 1e-7);
  EXPECT_NEAR(out[1], 2.0 / (1.0 + std::exp(1.0)), 1e-7);
}

TEST(NnMoreGlu, OddDimFails) {
  EXPECT_THROW(lower("aten::glu",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::integer(1)};
                     }),
               lowering::LoweringError);
}

TEST(NnMoreHuber, QuadraticInsideLinearOutside) {
  auto l = lower("aten::huber_loss", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::integer(0), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  auto out = read<float>(run_all(l, {f32({0.0f, 1.0f, -3.0f}, {3}), f32({0.5f, 1.0f, 0.0f}, {3}), f64(1.0)})[0], 3);
  EXPECT_NEAR(out[0], 0.5 * 0.25, 1e-7);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 1.0 * (3.0 - 0.5), 1e-6);
}

// ---- padding

TEST(NnMorePad, ReflectionPad1dGolden) {
  auto l = lower("aten::reflection_pad1d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 4}})), Arg::integers({2, 1})};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<1x4xf32>) -> (tensor<1x7xf32>) {\n"
            "    %1 = \"stablehlo.iota\"() {iota_dimension = 0 : i64} : () -> tensor<7xi64>\n"
            "    %2 = \"stablehlo.constant\"() {value = dense<2> : tensor<i64>} : () -> tensor<i64>\n"
            "    %3 = \"stablehlo.broadcast_in_dim\"(%2) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> "
            "tensor<7xi64>\n"
            "    %4 = \"stablehlo.subtract\"(%1, %3) : (tensor<7xi64>, tensor<7xi64>) -> tensor<7xi64>\n"
            "    %5 = \"stablehlo.constant\"() {value = dense<3> : tensor<i64>} : () -> tensor<i64>\n"
            "    %6 = \"stablehlo.abs\"(%4) : (tensor<7xi64>) -> tensor<7xi64>\n"
            "    %7 = \"stablehlo.broadcast_in_dim\"(%5) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> "
            "tensor<7xi64>\n"
            "    %8 = \"stablehlo.subtract\"(%7, %6) : (tensor<7xi64>, tensor<7xi64>) -> tensor<7xi64>\n"
            "    %9 = \"stablehlo.abs\"(%8) : (tensor<7xi64>) -> tensor<7xi64>\n"
            "    %10 = \"stablehlo.broadcast_in_dim\"(%5) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> "
            "tensor<7xi64>\n"
            "    %11 = \"stablehlo.subtract\"(%10, %9) : (tensor<7xi64>, tensor<7xi64>) -> tensor<7xi64>\n"
            "    %12 = \"stablehlo.reshape\"(%11) : (tensor<7xi64>) -> tensor<7x1xi64>\n"
            "    %13 = \"stablehlo.gather\"(%0, %12) {dimension_numbers = #stablehlo.gather<offset_dims = [0], "
            "collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = false, "
            "slice_sizes = array<i64: 1, 1>} : (tensor<1x4xf32>, tensor<7x1xi64>) -> tensor<1x7xf32>\n"
            "    \"func.return\"(%13) : (tensor<1x7xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(NnMorePad, ReflectAndReplicateValues) {
  std::vector<float> x{1, 2, 3, 4};
  auto pad = [&](const char* op) {
    auto l = lower(op, [](hlo::Builder& b) {
      return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 4}})), Arg::integers({2, 1})};
    });
    return read<float>(run_all(l, {f32(x, {1, 4})})[0], 7);
  };
  EXPECT_EQ(pad("aten::reflection_pad1d"), (std::vector<float>{3, 2, 1, 2, 3, 4, 3}));
  EXPECT_EQ(pad("aten::replication_pad1d"), (std::vector<float>{1, 1, 1, 2, 3, 4, 4}));
}

TEST(NnMorePad, ReflectionBackwardSumsMirrors) {
  auto l = lower("aten::reflection_pad1d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 7}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 4}})), Arg::integers({2, 1})};
  });
  // output positions read inputs 2, 1, 0, 1, 2, 3, 2
  std::vector<float> g{1, 10, 100, 1000, 10000, 100000, 1000000};
  auto out = read<float>(run_all(l, {f32(g, {1, 7}), f32({0, 0, 0, 0}, {1, 4})})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{100, 10 + 1000, 1 + 10000 + 1000000, 100000}));
}

TEST(NnMorePad, ReflectTooLargeFails) {
  EXPECT_THROW(lower("aten::reflection_pad1d",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::integers({3, 0})};
                     }),
               lowering::LoweringError);
}

// ---- im2col / col2im

TEST(NnMoreIm2col, ColumnsOfA3x3Image) {
  auto l = lower("aten::im2col", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 3, 3}})), Arg::integers({2, 2}),
                            Arg::integers({1, 1}), Arg::integers({0, 0}), Arg::integers({1, 1})};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{1, 4, 4}));
  auto out = read<float>(run_all(l, {f32({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 3, 3})})[0], 16);
  // row (i, j) of the kernel, column = window position (top-left 0, 1, 3, 4)
  EXPECT_EQ(out, (std::vector<float>{0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8}));
}

TEST(NnMoreCol2im, CountsOverlaps) {
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

// ---- max_unpool and channel_shuffle

TEST(NnMoreMaxUnpool, ScattersAtIndices) {
  auto l = lower("aten::max_unpool2d", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 1, 1, 2}})),
                            Arg::tensor(b.parameter({DType::I64, {1, 1, 1, 2}})), Arg::integers({2, 2})};
  });
  auto out = read<float>(run_all(l, {f32({5, 7}, {1, 1, 1, 2}), i64({3, 0}, {1, 1, 1, 2})})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{7, 0, 0, 5}));
}

TEST(NnMoreChannelShuffle, InterleavesGroups) {
  auto l = lower("aten::channel_shuffle", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 6, 1}})), Arg::integer(2)};
  });
  auto out = read<float>(run_all(l, {f32({0, 1, 2, 3, 4, 5}, {1, 6, 1})})[0], 6);
  EXPECT_EQ(out, (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

}  // namespace
}  // namespace torch_pjrt
