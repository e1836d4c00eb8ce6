// Solvers and factorizations (linalg_factor.cc): golden StableHLO text and
// numeric checks on the CPU plugin for triangular solves, Cholesky, LU, the
// determinant and solve built on it, and Householder QR. Expected values are
// worked out by hand.
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
using testing::scalar;
using testing::tensor;
using testing::values;

TEST(LinalgFactor, SolveTriangularGolden) {
  auto l = lower("aten::linalg_solve_triangular", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 2}, {2, 1}});
    args.push_back(Arg::boolean(true));   // upper
    args.push_back(Arg::boolean(true));   // left
    args.push_back(Arg::boolean(false));  // unitriangular
    return args;
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<2x2xf32>, %1: tensor<2x1xf32>) -> (tensor<2x1xf32>) {\n"
            "    %2 = \"stablehlo.triangular_solve\"(%0, %1) {left_side = true, lower = false, unit_diagonal = false, "
            "transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<2x2xf32>, tensor<2x1xf32>) -> "
            "tensor<2x1xf32>\n"
            "    \"func.return\"(%2) : (tensor<2x1xf32>) -> ()\n"
            "  }\n"
            "}\n");
  // [[2, 1], [0, 4]] x = [4, 8]: x = [1, 2].
  auto out = exec(l, {bytes(std::vector<float>{2, 1, 0, 4}), bytes(std::vector<float>{4, 8})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2}));
}

TEST(LinalgFactor, SolveTriangularShapeMismatch) {
  auto msg = lowering_error("aten::linalg_solve_triangular", [](hlo::Builder& b) {
    auto args = f32_args(b, {{2, 2}, {3, 1}});
    args.push_back(Arg::boolean(true));
    return args;
  });
  EXPECT_NE(msg.find("Incompatible shapes of A and B"), std::string::npos) << msg;
}

TEST(LinalgFactor, CholeskyAndInfo) {
  auto l = lower("aten::linalg_cholesky_ex", [](hlo::Builder& b) { return f32_args(b, {{2, 2, 2}}); });
  ASSERT_EQ(l.results[1].dtype(), DType::I32);
  // [[4, 2], [2, 3]] = L L^T with L = [[2, 0], [1, sqrt 2]]; [[-1, 0], [0, 1]] fails at the first minor.
  auto out = exec(l, {bytes(std::vector<float>{4, 2, 2, 3, -1, 0, 0, 1})});
  auto L = values<float>(out[0]);
  EXPECT_FLOAT_EQ(L[0], 2);
  EXPECT_FLOAT_EQ(L[1], 0);
  EXPECT_FLOAT_EQ(L[2], 1);
  EXPECT_FLOAT_EQ(L[3], std::sqrt(2.0f));
  EXPECT_EQ(values<int32_t>(out[1]), (std::vector<int32_t>{0, 1}));
}

TEST(LinalgFactor, LuFactorPivotsAndInfo) {
  auto l = lower("aten::linalg_lu_factor_ex", [](hlo::Builder& b) { return f32_args(b, {{2, 2, 2}}); });
  EXPECT_NE(l.text.find("stablehlo.while"), std::string::npos);
  // [[1, 2], [3, 4]]: row 2 is the pivot; LU = [[3, 4], [1/3, 2 - 4/3]]. A zero matrix: info 1, no swaps.
  auto out = exec(l, {bytes(std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0})});
  auto lu = values<float>(out[0]);
  EXPECT_FLOAT_EQ(lu[0], 3);
  EXPECT_FLOAT_EQ(lu[1], 4);
  EXPECT_NEAR(lu[2], 1.0 / 3, 1e-7);
  EXPECT_NEAR(lu[3], 2.0 / 3, 1e-6);
  EXPECT_EQ(values<float>(out[0])[4], 0);
  EXPECT_EQ(values<int32_t>(out[1]), (std::vector<int32_t>{2, 2, 1, 2}));
  EXPECT_EQ(values<int32_t>(out[2]), (std::vector<int32_t>{0, 1}));
}

TEST(LinalgFactor, LuUnpackPermutation) {
  auto l = lower("aten::lu_unpack", [](hlo::Builder& b) {
    return std::vector<Arg>{tensor(b, DType::F32, {3, 3}), tensor(b, DType::I32, {3}), Arg::boolean(true),
                            Arg::boolean(true)};
  });
  // pivots [3, 3, 3]: swap rows 0<->2, then 1<->2; perm = [2, 0, 1], P[perm[j], j] = 1.
  auto out = exec(l, {bytes(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}), bytes(std::vector<int32_t>{3, 3, 3})});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 0, 0, 4, 1, 0, 7, 8, 1}));
  EXPECT_EQ(values<float>(out[2]), (std::vector<float>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
}

TEST(LinalgFactor, DetAndSolve) {
  auto det = lower("aten::_linalg_det", [](hlo::Builder& b) { return f32_args(b, {{2, 2}}); });
  EXPECT_NEAR(values<float>(exec(det, {bytes(std::vector<float>{1, 2, 3, 4})})[0])[0], -2, 1e-6);
  auto solve = lower("aten::_linalg_solve_ex", [](hlo::Builder& b) { return f32_args(b, {{2, 2}, {2}}); });
  // [[1, 2], [3, 4]] x = [5, 11]: x = [1, 2].
  auto x = values<float>(exec(solve, {bytes(std::vector<float>{1, 2, 3, 4}), bytes(std::vector<float>{5, 11})})[0]);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_NEAR(x[0], 1, 1e-6);
  EXPECT_NEAR(x[1], 2, 1e-6);
}

TEST(LinalgFactor, GeqrfFollowsLapackSigns) {
  auto l = lower("aten::geqrf", [](hlo::Builder& b) { return f32_args(b, {{2, 1}}); });
  // x = [3, 4]: beta = -5, tau = (beta - alpha) / beta = 1.6, v = [1, 4 / (3 + 5)].
  auto out = exec(l, {bytes(std::vector<float>{3, 4})});
  auto a = values<float>(out[0]);
  EXPECT_FLOAT_EQ(a[0], -5);
  EXPECT_FLOAT_EQ(a[1], 0.5);
  EXPECT_FLOAT_EQ(values<float>(out[1])[0], 1.6f);
}

TEST(LinalgFactor, HouseholderProduct) {
  auto l = lower("aten::linalg_householder_product", [](hlo::Builder& b) { return f32_args(b, {{2, 1}, {1}}); });
  // Q = I - 1.6 v v^T with v = [1, 0.5]: first column [-0.6, -0.8].
  auto q = values<float>(exec(l, {bytes(std::vector<float>{-5, 0.5}), bytes(std::vector<float>{1.6f})})[0]);
  EXPECT_NEAR(q[0], -0.6, 1e-6);
  EXPECT_NEAR(q[1], -0.8, 1e-6);
}

}  // namespace
}  // namespace torch_pjrt
