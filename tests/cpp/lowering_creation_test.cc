// Creation ops (creation.cc): golden StableHLO text and numeric checks on
// the CPU plugin for eye, linspace and triu_indices. Expected values are
// worked out by hand from PyTorch's definitions.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::lower;
using testing::scalar;
using testing::tensor;
using testing::values;

// ---- creation

TEST(Creation, EyeGolden) {
  auto l = lower("aten::eye.m_out", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::integer(2), Arg::integer(3), tensor(b, DType::F32, {2, 3})};
  });
  EXPECT_EQ(
      l.text,
      "module @torch_pjrt {\n"
      "  func.func public @main(%0: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
      "    %1 = \"stablehlo.iota\"() {iota_dimension = 0 : i64} : () -> tensor<2x3xi64>\n"
      "    %2 = \"stablehlo.iota\"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi64>\n"
      "    %3 = \"stablehlo.compare\"(%1, %2) {comparison_direction = #stablehlo<comparison_direction EQ>, "
      "compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>\n"
      "    %4 = \"stablehlo.convert\"(%3) : (tensor<2x3xi1>) -> tensor<2x3xf32>\n"
      "    \"func.return\"(%4) : (tensor<2x3xf32>) -> ()\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(values<float>(exec(l, {bytes(std::vector<float>(6, 7))})[0]), (std::vector<float>{1, 0, 0, 0, 1, 0}));
}

TEST(Creation, LinspaceFloat) {
  auto l = lower("aten::linspace.out", [](hlo::Builder& b) {
    return std::vector<Arg>{scalar(b, DType::F64), scalar(b, DType::F64), Arg::integer(5), tensor(b, DType::F32, {5})};
  });
  auto r = values<float>(
      exec(l, {bytes(std::vector<double>{-1}), bytes(std::vector<double>{1}), bytes(std::vector<float>(5, 0))})[0]);
  EXPECT_EQ(r, (std::vector<float>{-1, -0.5, 0, 0.5, 1}));
}

// Integral linspace truncates: step 10/3 in double, first half from start,
// second half back from end: 0, 3.33 -> 3, 10 - 3.33 -> 6, 10.
TEST(Creation, LinspaceInt) {
  auto l = lower("aten::linspace.out", [](hlo::Builder& b) {
    return std::vector<Arg>{scalar(b, DType::I64), scalar(b, DType::I64), Arg::integer(4), tensor(b, DType::I64, {4})};
  });
  auto r = values<int64_t>(
      exec(l, {bytes(std::vector<int64_t>{0}), bytes(std::vector<int64_t>{10}), bytes(std::vector<int64_t>(4, 0))})[0]);
  EXPECT_EQ(r, (std::vector<int64_t>{0, 3, 6, 10}));
}

TEST(Creation, EyeOutMustHaveTheShape) {
  EXPECT_THROW(lower("aten::eye.out",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::integer(3), tensor(b, DType::F32, {0})};
                     }),
               lowering::LoweringError);
}

// ---- triangle indices

// The strict upper triangle of a 3x3 matrix, row-major: (0,1), (0,2), (1,2).
TEST(Creation, TriuIndices) {
  auto l = lower("aten::triu_indices", [](hlo::Builder&) {
    return std::vector<Arg>{Arg::integer(3), Arg::integer(3), Arg::integer(1), Arg::none()};
  });
  ASSERT_EQ(l.results[0].dims(), (hlo::Dims{2, 3}));
  EXPECT_EQ(values<int64_t>(exec(l, {})[0]), (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
}

}  // namespace
}  // namespace torch_pjrt
