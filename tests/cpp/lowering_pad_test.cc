// Padding (pad.cc) on the CPU plugin: constant_pad_nd (positive pads, and
// negative ones that crop), reflection and replication padding and their
// backward. Expected values are computed by hand in each test, never by the
// code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::expect_values;
using testing::lower;
using testing::Prog;
using testing::read;
using testing::run_all;
using testing::run_op;
using testing::upload;
using testing::buffers::f32;
using testing::hosts::i64;
namespace hosts = testing::hosts;

// ---- constant_pad_nd

TEST(PadConstant, PositivePads) {
  {
    Prog p;
    auto r = run_op(p, "aten::constant_pad_nd", {p.t(hosts::f32({2, 2}, {1, 2, 3, 4})), p.ints({1, 0}), p.scalar(9)});
    expect_values(r.outs[0], DType::F32, {2, 3}, {9, 1, 2, 9, 3, 4});
  }
  {
    Prog p;
    auto r =
        run_op(p, "aten::constant_pad_nd", {p.t(hosts::f32({2, 2}, {1, 2, 3, 4})), p.ints({0, 1, 1, 0}), p.scalar(9)});
    expect_values(r.outs[0], DType::F32, {3, 3}, {9, 9, 9, 1, 2, 9, 3, 4, 9});
  }
}

TEST(PadConstant, NegativePadsCrop) {
  {
    Prog p;
    auto r =
        run_op(p, "aten::constant_pad_nd", {p.t(hosts::f32({2, 3}, {1, 2, 3, 4, 5, 6})), p.ints({-1, 1}), p.scalar(0)});
    expect_values(r.outs[0], DType::F32, {2, 3}, {2, 3, 0, 5, 6, 0});
  }
  {
    Prog p;  // [9 9 1 2 3] with the last two dropped
    auto r = run_op(p, "aten::constant_pad_nd", {p.t(i64({1, 3}, {1, 2, 3})), p.ints({2, -2}), p.scalar(9)});
    expect_values(r.outs[0], DType::I64, {1, 3}, {9, 9, 1});
  }
  {
    Prog p;  // [1 2 3 9 9] with the first four dropped: the crop reaches into the padding
    auto r = run_op(p, "aten::constant_pad_nd", {p.t(hosts::f32({1, 3}, {1, 2, 3})), p.ints({-4, 2}), p.scalar(9)});
    expect_values(r.outs[0], DType::F32, {1, 1}, {9});
  }
}

TEST(PadConstant, CropToEmpty) {
  {
    Prog p;
    auto r = run_op(p, "aten::constant_pad_nd", {p.t(hosts::f32({2, 2}, {1, 2, 3, 4})), p.ints({-1, -1}), p.scalar(0)});
    expect_values(r.outs[0], DType::F32, {2, 0}, {});
  }
}

// ---- reflection and replication

TEST(Pad, ReflectionPad1dGolden) {
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

TEST(Pad, ReflectAndReplicateValues) {
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

TEST(Pad, ReflectionBackwardSumsMirrors) {
  auto l = lower("aten::reflection_pad1d_backward", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 7}})),
                            Arg::tensor(b.parameter({DType::F32, {1, 4}})), Arg::integers({2, 1})};
  });
  // output positions read inputs 2, 1, 0, 1, 2, 3, 2
  std::vector<float> g{1, 10, 100, 1000, 10000, 100000, 1000000};
  auto out = read<float>(run_all(l, {f32(g, {1, 7}), f32({0, 0, 0, 0}, {1, 4})})[0], 4);
  EXPECT_EQ(out, (std::vector<float>{100, 10 + 1000, 1 + 10000 + 1000000, 100000}));
}

TEST(Pad, ReflectTooLargeFails) {
  EXPECT_THROW(lower("aten::reflection_pad1d",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {1, 3}})), Arg::integers({3, 0})};
                     }),
               lowering::LoweringError);
}

}  // namespace
}  // namespace torch_pjrt
