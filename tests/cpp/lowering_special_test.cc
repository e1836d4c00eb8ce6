// Golden StableHLO text and numeric checks for the special-function family.
// The numeric references are the C++17 special math functions of the
// standard library, computed in double, independent of ATen and of our code.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::count;
using testing::lower;

testing::Lowered unary(const std::string& op, int64_t n) {
  return lower(op, [n](hlo::Builder& b) { return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {n}}))}; });
}

// Runs a unary lowering on `xs` and compares with `ref` to a relative `tol`.
void expect_unary(const std::string& op, const std::vector<float>& xs, const std::function<double(double)>& ref,
                  double tol = 2e-6) {
  auto l = unary(op, static_cast<int64_t>(xs.size()));
  auto out = testing::run<float, float>(l, {xs}, DType::F32);
  for (size_t i = 0; i < xs.size(); ++i) {
    double e = ref(xs[i]);
    EXPECT_NEAR(out[i], e, tol * std::max(1.0, std::abs(e))) << op << " at x = " << xs[i];
  }
}

TEST(Special, PolygammaZeroGolden) {
  auto l = lower("aten::polygamma", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::integer(0), Arg::tensor(b.parameter({DType::F32, {3}}))};
  });
  EXPECT_EQ(l.text,
            "module @torch_pjrt {\n"
            "  func.func public @main(%0: tensor<3xf32>) -> (tensor<3xf32>) {\n"
            "    %1 = \"stablehlo.constant\"() {value = dense<0.00000000000000000e+00> : tensor<f32>} : () -> "
            "tensor<f32>\n"
            "    %2 = \"stablehlo.broadcast_in_dim\"(%1) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
            "tensor<3xf32>\n"
            "    %3 = \"stablehlo.compare\"(%0, %2) {comparison_direction = #stablehlo<comparison_direction EQ>, "
            "compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>\n"
            "    %4 = \"stablehlo.constant\"() {value = dense<1.00000000000000000e+00> : tensor<f32>} : () -> "
            "tensor<f32>\n"
            "    %5 = \"stablehlo.broadcast_in_dim\"(%4) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
            "tensor<3xf32>\n"
            "    %6 = \"stablehlo.divide\"(%5, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>\n"
            "    %7 = \"stablehlo.negate\"(%6) : (tensor<3xf32>) -> tensor<3xf32>\n"
            "    %8 = \"chlo.digamma\"(%0) : (tensor<3xf32>) -> tensor<3xf32>\n"
            "    %9 = \"stablehlo.select\"(%3, %7, %8) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> "
            "tensor<3xf32>\n"
            "    \"func.return\"(%9) : (tensor<3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Special, PolygammaRejectsNegativeOrder) {
  EXPECT_THROW(lower("aten::polygamma",
                     [](hlo::Builder& b) {
                       return std::vector<Arg>{Arg::integer(-1), Arg::tensor(b.parameter({DType::F32, {3}}))};
                     }),
               lowering::LoweringError);
}

TEST(Special, PolygammaMatchesZetaSeries) {
  // polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x); for x = 1 that is
  // (-1)^(n+1) n! zeta(n + 1).
  for (int n : {1, 2, 3, 4}) {
    auto l = lower("aten::polygamma", [n](hlo::Builder& b) {
      return std::vector<Arg>{Arg::integer(n), Arg::tensor(b.parameter({DType::F32, {3}}))};
    });
    auto out = testing::run<float, float>(l, {{1.f, 2.f, 3.5f}}, DType::F32);
    double fact = std::tgamma(n + 1.0), sign = n % 2 ? 1 : -1;
    double z1 = std::riemann_zeta(n + 1.0);
    // Hurwitz zeta(s, q) for integer q from the Riemann zeta minus its first terms.
    double z2 = z1 - 1.0;
    double z35 = 0;
    for (int i = 0; i < 200000; ++i) z35 += std::pow(3.5 + i, -(n + 1.0));
    EXPECT_NEAR(out[0], sign * fact * z1, 1e-5 * std::abs(fact * z1)) << n;
    EXPECT_NEAR(out[1], sign * fact * z2, 1e-5 * std::abs(fact * z2)) << n;
    EXPECT_NEAR(out[2], sign * fact * z35, 2e-4 * std::abs(fact * z35)) << n;
  }
}

TEST(Special, ZetaUsesAWhileLoopAndMatchesRiemannZeta) {
  auto l = lower("aten::special_zeta", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {4}})), Arg::tensor(b.parameter({DType::F32, {4}}))};
  });
  EXPECT_NE(l.text.find("\"stablehlo.while\""), std::string::npos);
  std::vector<float> s = {2.f, 3.f, 4.5f, 7.f}, q = {1.f, 1.f, 1.f, 1.f};
  auto host = testing::run<float, float>(l, {s, q}, DType::F32);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(host[i], std::riemann_zeta(s[i]), 2e-6) << s[i];
}

TEST(Special, ModifiedBesselIMatchesStd) {
  std::vector<float> xs = {0.f, 0.3f, 1.f, 4.f, 7.9f, 8.1f, 15.f, -2.5f};
  expect_unary("aten::i0", xs, [](double x) { return std::cyl_bessel_i(0.0, std::abs(x)); });
  expect_unary("aten::special_i0e", xs,
               [](double x) { return std::exp(-std::abs(x)) * std::cyl_bessel_i(0.0, std::abs(x)); });
  auto i1 = [](double x) { return (x < 0 ? -1 : 1) * std::cyl_bessel_i(1.0, std::abs(x)); };
  expect_unary("aten::special_i1", xs, i1);
  expect_unary("aten::special_i1e", xs, [&](double x) { return std::exp(-std::abs(x)) * i1(x); });
  expect_unary("aten::special_modified_bessel_i0", xs, [](double x) { return std::cyl_bessel_i(0.0, std::abs(x)); });
  expect_unary("aten::special_modified_bessel_i1", xs, i1);
}

TEST(Special, BesselJYKMatchStd) {
  std::vector<float> pos = {0.5f, 1.f, 2.f, 4.9f, 5.1f, 10.f, 25.f};
  expect_unary(
      "aten::special_bessel_j0", pos, [](double x) { return std::cyl_bessel_j(0.0, x); }, 1e-5);
  expect_unary(
      "aten::special_bessel_j1", pos, [](double x) { return std::cyl_bessel_j(1.0, x); }, 1e-5);
  expect_unary(
      "aten::special_bessel_y0", pos, [](double x) { return std::cyl_neumann(0.0, x); }, 1e-5);
  expect_unary(
      "aten::special_bessel_y1", pos, [](double x) { return std::cyl_neumann(1.0, x); }, 1e-5);
  expect_unary(
      "aten::special_modified_bessel_k0", pos, [](double x) { return std::cyl_bessel_k(0.0, x); }, 1e-5);
  expect_unary(
      "aten::special_modified_bessel_k1", pos, [](double x) { return std::cyl_bessel_k(1.0, x); }, 1e-5);
  expect_unary(
      "aten::special_scaled_modified_bessel_k0", pos, [](double x) { return std::exp(x) * std::cyl_bessel_k(0.0, x); },
      1e-5);
  expect_unary("aten::special_spherical_bessel_j0", {0.1f, 0.4f, 1.f, 7.f},
               [](double x) { return std::sph_bessel(0, x); });
}

TEST(Special, NormalDistributionFunctions) {
  std::vector<float> xs = {-9.f, -5.f, -1.5f, -0.3f, 0.f, 0.7f, 3.f, 30.f, 80.f};
  expect_unary(
      "aten::special_erfcx", xs,
      [](double x) {
        // erfc underflows for large x: use the continued fraction there.
        return x < 25 ? std::exp(x * x) * std::erfc(x) : 1 / (std::sqrt(M_PI) * (x + 0.5 / (x + 1 / (x + 1.5 / x))));
      },
      1e-5);
  expect_unary(
      "aten::special_log_ndtr", {-5.f, -1.5f, -0.3f, 0.f, 0.7f, 3.f},
      [](double x) { return std::log(0.5 * std::erfc(-x / std::sqrt(2.0))); }, 1e-5);
  // ndtri inverts the normal CDF.
  std::vector<float> ps = {1e-10f, 0.01f, 0.2f, 0.5f, 0.8f, 0.999f};
  auto l = unary("aten::special_ndtri", 6);
  auto out = testing::run<float, float>(l, {ps}, DType::F32);
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_NEAR(0.5 * std::erfc(-out[i] / std::sqrt(2.0)), ps[i], 2e-6 * ps[i] + 1e-7);
}

testing::Lowered binary(const std::string& op, int64_t n) {
  return lower(op, [n](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F32, {n}})), Arg::tensor(b.parameter({DType::F32, {n}}))};
  });
}

std::vector<float> run2(const testing::Lowered& l, const std::vector<float>& a, const std::vector<float>& c) {
  return testing::run<float, float>(l, {a, c}, DType::F32);
}

TEST(Special, PolynomialsRunARecurrenceLoopAndMatchStd) {
  std::vector<float> x = {0.3f, 0.7f, 0.9f, 0.1f, 0.45f, 0.6f, 0.95f, 0.2f};
  std::vector<float> n = {0.f, 1.f, 2.f, 3.f, 5.f, 8.f, 4.f, 11.f};
  struct Case {
    const char* op;
    std::function<double(unsigned, double)> ref;
  };
  std::vector<Case> cases = {
      {"aten::special_legendre_polynomial_p", [](unsigned k, double v) { return std::legendre(k, v); }},
      {"aten::special_laguerre_polynomial_l", [](unsigned k, double v) { return std::laguerre(k, v); }},
      {"aten::special_hermite_polynomial_h", [](unsigned k, double v) { return std::hermite(k, v); }},
      {"aten::special_chebyshev_polynomial_t",
       [](unsigned k, double v) {
         return std::abs(v) <= 1 ? std::cos(k * std::acos(v)) : std::cosh(k * std::acosh(v));
       }},
  };
  for (const auto& c : cases) {
    auto l = binary(c.op, 8);
    EXPECT_NE(l.text.find("\"stablehlo.while\""), std::string::npos) << c.op;
    auto out = run2(l, x, n);
    for (size_t i = 0; i < x.size(); ++i) {
      double e = c.ref(static_cast<unsigned>(n[i]), x[i]);
      EXPECT_NEAR(out[i], e, 1e-5 * std::max(1.0, std::abs(e))) << c.op << " n=" << n[i] << " x=" << x[i];
    }
  }
}

TEST(Special, PolynomialNegativeOrNonFiniteDegreeIsZero) {
  auto l = binary("aten::special_chebyshev_polynomial_u", 3);
  auto out = run2(l, {0.5f, 0.5f, 0.5f}, {-1.f, INFINITY, NAN});
  for (float v : out) EXPECT_EQ(v, 0.f);
}

TEST(Special, AiryAiMatchesIntegralValues) {
  // Ai(0) = 1 / (3^(2/3) Gamma(2/3)); Ai'(0) = -1 / (3^(1/3) Gamma(1/3)); the
  // Maclaurin series near 0, and the decay for large x.
  double ai0 = 1 / (std::pow(3.0, 2.0 / 3) * std::tgamma(2.0 / 3));
  double dai0 = -1 / (std::pow(3.0, 1.0 / 3) * std::tgamma(1.0 / 3));
  auto l = unary("aten::special_airy_ai", 3);
  auto out = testing::run<float, float>(l, {{0.f, 1e-3f, 200.f}}, DType::F32);
  EXPECT_NEAR(out[0], ai0, 1e-6);
  EXPECT_NEAR(out[1], ai0 + 1e-3 * dai0, 1e-6);
  EXPECT_EQ(out[2], 0.f);
}

// ---- igamma, igammac

// The igamma/igammac references are closed forms in double: P(1, x) =
// 1 - e^-x, Q(1/2, x) = erfc(sqrt x) and, for integer a, Q(a, x) =
// e^-x sum_{k<a} x^k / k!.
double q_integer(int a, double x) {
  double term = 1, sum = 0;
  for (int k = 0; k < a; ++k) {
    sum += term;
    term *= x / (k + 1);
  }
  return std::exp(-x) * sum;
}

testing::Lowered igamma_op(const std::string& op, int64_t n) {
  return lower(op, [n](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::F64, {n}})), Arg::tensor(b.parameter({DType::F64, {n}}))};
  });
}

TEST(Igamma, LoopsStayLoopsGolden) {
  auto l = igamma_op("aten::igamma", 4);
  // series, continued fraction, complement series, and the asymptotic
  // expansion's outer and inner loops: five while ops, no unrolled steps.
  EXPECT_EQ(count(l.text, "\"stablehlo.while\""), 5u);
  EXPECT_EQ(count(l.text, "\"stablehlo.dynamic_slice\""), 2u);
  EXPECT_LT(count(l.text, "\n"), 1500u);
  EXPECT_NE(l.text.find("\"chlo.lgamma\""), std::string::npos);
}

TEST(Igamma, ClosedForms) {
  std::vector<double> a = {1, 1, 0.5, 0.5, 30, 30, 250, 3}, x = {0.3, 7, 0.2, 2.5, 32, 27, 260, 1.05};
  auto p = testing::run<double, double>(igamma_op("aten::igamma", 8), {a, x}, DType::F64);
  auto q = testing::run<double, double>(igamma_op("aten::igammac", 8), {a, x}, DType::F64);
  for (size_t i = 0; i < a.size(); ++i) {
    double want;
    if (a[i] == 0.5)
      want = std::erfc(std::sqrt(x[i]));
    else
      want = q_integer(static_cast<int>(a[i]), x[i]);
    // ATen's asymptotic expansion (a > 20 near x = a) is good to ~1e-9.
    double tol = a[i] > 20 ? 2e-9 : 1e-12;
    EXPECT_NEAR(q[i], want, tol) << "igammac at a = " << a[i] << ", x = " << x[i];
    EXPECT_NEAR(p[i], 1 - want, tol) << "igamma at a = " << a[i] << ", x = " << x[i];
  }
}

}  // namespace
}  // namespace torch_pjrt
