// StableHLO structure and numeric checks on the CPU plugin for the spectral
// decompositions (linalg_spectral.cc): Jacobi eigh and SVD. Expected values
// are worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::bytes;
using testing::exec;
using testing::f32_args;
using testing::lower;
using testing::lowering_error;
using testing::tensor;
using testing::values;

TEST(LinalgSpectral, EighIsAWhileLoopAndSortsAscending) {
  auto l = lower("aten::_linalg_eigh", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 2, 2}});
    args.push_back(Arg::string("L"));
    args.push_back(Arg::boolean(true));
    return args;
  });
  EXPECT_NE(l.text.find("\"stablehlo.while\""), std::string::npos);
  EXPECT_NE(l.text.find("\"stablehlo.sort\""), std::string::npos);
  ASSERT_EQ(l.results.size(), 2u);
  EXPECT_EQ(l.results[0].type.str(), "tensor<2x2xf32>");
  EXPECT_EQ(l.results[1].type.str(), "tensor<2x2x2xf32>");
  // [[2, 1], [1, 2]] has eigenvalues 1 and 3, eigenvectors (1, -1)/sqrt 2 and (1, 1)/sqrt 2.
  // diag(1, -2) (upper triangle ignored: 7) has -2 then 1.
  auto out = exec(l, {bytes(std::vector<float>{2, 99, 1, 2, 1, 7, 0, -2})});
  auto w = values<float>(out[0]);
  EXPECT_NEAR(w[0], 1, 1e-6);
  EXPECT_NEAR(w[1], 3, 1e-6);
  EXPECT_NEAR(w[2], -2, 1e-6);
  EXPECT_NEAR(w[3], 1, 1e-6);
  auto v = values<float>(out[1]);
  float h = std::sqrt(0.5f);
  EXPECT_NEAR(std::abs(v[0]), h, 1e-6);
  EXPECT_NEAR(v[0] * v[2], -0.5f, 1e-6);  // first column along (1, -1)
  EXPECT_NEAR(v[1] * v[3], 0.5f, 1e-6);   // second column along (1, 1)
  EXPECT_NEAR(std::abs(v[4]), 0, 1e-6);   // -2 belongs to e_2
  EXPECT_NEAR(std::abs(v[6]), 1, 1e-6);
}

TEST(LinalgSpectral, EighBadUplo) {
  auto msg = lowering_error("aten::_linalg_eigh", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 2}});
    args.push_back(Arg::string("X"));
    return args;
  });
  EXPECT_NE(msg.find("Expected UPLO argument to be 'L' or 'U'"), std::string::npos) << msg;
}

TEST(LinalgSpectral, SvdValuesDescending) {
  auto l = lower("aten::_linalg_svd", [](hlo::Builder& b) {
    auto args = f32_args(b, {{3, 2}});
    args.push_back(Arg::boolean(false));  // full_matrices
    args.push_back(Arg::boolean(true));   // compute_uv
    return args;
  });
  EXPECT_NE(l.text.find("\"stablehlo.while\""), std::string::npos);
  ASSERT_EQ(l.results.size(), 3u);
  EXPECT_EQ(l.results[0].type.str(), "tensor<3x2xf32>");
  EXPECT_EQ(l.results[1].type.str(), "tensor<2xf32>");
  EXPECT_EQ(l.results[2].type.str(), "tensor<2x2xf32>");
  // [[3, 0], [4, 5], [0, 0]]: A^T A = [[25, 20], [20, 25]], eigenvalues 45 and 5.
  auto out = exec(l, {bytes(std::vector<float>{3, 0, 4, 5, 0, 0})});
  auto s = values<float>(out[1]);
  EXPECT_NEAR(s[0], std::sqrt(45.0f), 1e-5);
  EXPECT_NEAR(s[1], std::sqrt(5.0f), 1e-5);
  // U S Vh reproduces A.
  auto u = values<float>(out[0]), vh = values<float>(out[2]);
  std::vector<float> a{3, 0, 4, 5, 0, 0};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      EXPECT_NEAR(u[i * 2] * s[0] * vh[j] + u[i * 2 + 1] * s[1] * vh[2 + j], a[i * 2 + j], 1e-5);
}

TEST(LinalgSpectral, SvdWideAndWithoutVectors) {
  auto nov = lower("aten::_linalg_svd", [](hlo::Builder& b) { return f32_args(b, {{2, 3}}); });
  EXPECT_EQ(nov.results[0].type.str(), "tensor<0xf32>");
  EXPECT_EQ(nov.results[1].type.str(), "tensor<2xf32>");
  auto l = lower("aten::_linalg_svd", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 3}});
    args.push_back(Arg::boolean(false));
    args.push_back(Arg::boolean(true));
    return args;
  });
  EXPECT_EQ(l.results[0].type.str(), "tensor<2x2xf32>");
  EXPECT_EQ(l.results[2].type.str(), "tensor<2x3xf32>");
  // [[0, 2, 0], [1, 0, 0]]: singular values 2 and 1.
  auto out = exec(l, {bytes(std::vector<float>{0, 2, 0, 1, 0, 0})});
  auto s = values<float>(out[1]);
  EXPECT_NEAR(s[0], 2, 1e-6);
  EXPECT_NEAR(s[1], 1, 1e-6);
  auto msg = lowering_error("aten::_linalg_svd", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::BF16, {2, 2})};
  });
  // CPU's kernel refuses it (NotImplementedError): "linalg_svd_cpu" not implemented for 'BFloat16'.
  EXPECT_NE(msg.find("\"linalg_svd_cpu\" not implemented for 'BFloat16'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace torch_pjrt
