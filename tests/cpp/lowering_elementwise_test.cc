// Golden StableHLO text and numeric checks for elementwise lowerings.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;

TEST(Elementwise, AddTensorGolden) {
  auto l = lower("aten::add.Tensor", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {2, 3}})), Arg::tensor(b.parameter({DType::F32, {3}})),
                            Arg::scalar(b.parameter({DType::I64, {}}))};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x3xf32>, %1: tensor<3xf32>, %2: tensor<i64>) -> (tensor<2x3xf32>) {\n"
            "    %3 = \"stablehlo.convert\"(%2) : (tensor<i64>) -> tensor<f32>\n"
            "    %4 = \"stablehlo.broadcast_in_dim\"(%3) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3xf32>\n"
            "    %5 = \"stablehlo.multiply\"(%1, %4) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
            "    %6 = \"stablehlo.broadcast_in_dim\"(%5) {broadcast_dimensions = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>\n"
            "    %7 = \"stablehlo.add\"(%0, %6) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    \"func.return\"(%7) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Elementwise, IntTensorPlusPythonFloatIsFloat32) {
  auto l = lower("aten::add.Tensor", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::scalar(b.parameter({DType::F64, {}}))};
  });
  EXPECT_EQ(l.results[0].dtype(), DType::F32);
}

TEST(Elementwise, GeluMatchesFormula) {
  auto l = lower("aten::gelu", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {3}})), Arg::string("none")};
  });
  auto out = testing::run<float, float>(l, {{-1.f, 0.f, 2.f}}, DType::F32);
  for (int i = 0; i < 3; ++i) {
    double x = std::vector<double>{-1, 0, 2}[i];
    EXPECT_NEAR(out[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 1e-6);
  }
}

TEST(Elementwise, FloorDivideOfNegativeIntsRoundsDown) {
  auto l = lower("aten::div.Tensor_mode", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::I64, {4}})), Arg::tensor(b.parameter({DType::I64, {4}})),
                            Arg::string("floor")};
  });
  auto exe = testing::client().compile(l.text, 0);
  int64_t a[4] = {-7, 7, -6, 5}, d[4] = {2, -2, 3, 5};
  auto ba = testing::client().from_host(a, DType::I64, {4}, 0);
  auto bd = testing::client().from_host(d, DType::I64, {4}, 0);
  int64_t out[4];
  exe->execute({ba->get(), bd->get()})[0]->to_host(out, sizeof out);
  EXPECT_EQ(out[0], -4);
  EXPECT_EQ(out[1], -4);
  EXPECT_EQ(out[2], -2);
  EXPECT_EQ(out[3], 1);
}

}  // namespace
}  // namespace torch_pjrt
