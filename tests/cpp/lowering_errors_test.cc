// Error kinds: a lowering's errors and runtime checks carry the Python class
// CPU PyTorch raises for the same input (the glue maps the kind once).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using lowering::Arg;
using lowering::ErrorKind;

struct Checked {
  hlo::Builder b;
  std::vector<lowering::Check> checks;
  std::vector<hlo::Value> results;
};

// Lowers a binary op on two [4] tensors of `t`; the program returns the op's
// result, then one i1 per runtime check.
void lower_binary(Checked& c, const std::string& op, DType t) {
  lowering::Context cx(c.b, {Arg::tensor(c.b.parameter({t, {4}})), Arg::tensor(c.b.parameter({t, {4}}))}, op);
  c.results = lowering::find_lowering(op)(cx);
  c.checks = cx.checks();
  for (const auto& k : c.checks) c.results.push_back(k.failed);
  c.b.set_results(c.results);
}

bool check_fails(Checked& c, std::vector<int64_t> a, std::vector<int64_t> d) {
  auto out =
      testing::run_all(c.b.module_text(), {testing::upload(a, DType::I64, {4}), testing::upload(d, DType::I64, {4})});
  return testing::read<uint8_t>(out.at(1), 1)[0] != 0;
}

TEST(ErrorKinds, IntegerDivisionChecksForZeroDivisors) {
  for (const char* op : {"aten::floor_divide", "aten::remainder.Tensor", "aten::fmod.Tensor"}) {
    Checked c;
    lower_binary(c, op, DType::I64);
    ASSERT_EQ(c.checks.size(), 1u) << op;
    EXPECT_EQ(c.checks[0].kind, ErrorKind::ZeroDivision) << op;
    EXPECT_EQ(c.checks[0].message, "ZeroDivisionError");
    EXPECT_TRUE(check_fails(c, {1, 2, 3, 4}, {1, 0, 1, 1})) << op;
    EXPECT_FALSE(check_fails(c, {1, 2, 3, 4}, {1, -1, 2, 5})) << op;
  }
}

TEST(ErrorKinds, FloatDivisionHasNoCheck) {
  Checked c;
  lower_binary(c, "aten::floor_divide", DType::F32);
  EXPECT_TRUE(c.checks.empty());
}

ErrorKind kind_of_failure(const std::string& op, DType t) {
  Checked c;
  try {
    lower_binary(c, op, t);
  } catch (const lowering::LoweringError& e) {
    return e.kind;
  }
  ADD_FAILURE() << op << " did not fail";
  return ErrorKind::Runtime;
}

TEST(ErrorKinds, DispatchStyleRefusalsAreNotImplemented) {
  EXPECT_EQ(kind_of_failure("aten::remainder.Tensor", DType::C64), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::floor_divide", DType::Bool), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::maximum", DType::C64), ErrorKind::Runtime);
}

TEST(ErrorKinds, FloatOnlyKernelsRefuseOtherDtypesAsNotImplemented) {
  // Kernels that dispatch over float and double only (no float16), never complex.
  EXPECT_EQ(kind_of_failure("aten::special_zeta", DType::F16), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::special_zeta", DType::C64), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::special_chebyshev_polynomial_t", DType::BF16), ErrorKind::NotImplemented);
  // Kernels that refuse integer inputs instead of promoting them to float32.
  EXPECT_EQ(kind_of_failure("aten::igamma", DType::I32), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::tanh_backward", DType::I64), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::pow.Tensor_Tensor", DType::Bool), ErrorKind::NotImplemented);
  EXPECT_EQ(kind_of_failure("aten::remainder.Tensor", DType::Bool), ErrorKind::NotImplemented);
  // What CPU computes is lowered: integers promote to float32 for zeta, float16 for igamma.
  for (auto [op, t] : {std::pair{"aten::special_zeta", DType::I32}, std::pair{"aten::igamma", DType::F16}}) {
    Checked c;
    lower_binary(c, op, t);
    EXPECT_EQ(c.results[0].dtype(), t == DType::I32 ? DType::F32 : DType::F16) << op;
  }
}

TEST(ErrorKinds, ScalarsThatDoNotFitTheComputingDtypeAreCheckedOnTheHost) {
  // addcmul(int8, int8, int8, value): CPU converts value to int8_t and refuses one that overflows it.
  Checked c;
  lowering::Context cx(c.b,
                       {Arg::tensor(c.b.parameter({DType::I8, {4}})), Arg::tensor(c.b.parameter({DType::I8, {4}})),
                        Arg::tensor(c.b.parameter({DType::I8, {4}})), Arg::scalar(c.b.parameter({DType::I64, {}}))},
                       "aten::addcmul");
  c.results = lowering::find_lowering("aten::addcmul")(cx);
  EXPECT_TRUE(cx.checks().empty());  // no device work
  ASSERT_EQ(cx.scalar_checks().size(), 1u);
  EXPECT_EQ(cx.scalar_checks()[0].arg, 3u);
  EXPECT_EQ(cx.scalar_checks()[0].fits, DType::I8);
  EXPECT_EQ(cx.scalar_checks()[0].message, "value cannot be converted to type int8_t without overflow");
  auto fails = [](auto value, DType from, DType to) {
    uint8_t bytes[16] = {};
    std::memcpy(bytes, &value, sizeof value);
    return lowering::scalar_overflows(bytes, from, to);
  };
  EXPECT_FALSE(fails(int64_t{127}, DType::I64, DType::I8));
  EXPECT_FALSE(fails(int64_t{-128}, DType::I64, DType::I8));
  EXPECT_TRUE(fails(int64_t{128}, DType::I64, DType::I8));
  EXPECT_TRUE(fails(int64_t{-129}, DType::I64, DType::I8));
  EXPECT_FALSE(fails(int64_t{-255}, DType::I64, DType::U8));  // c10's non-strict unsigned rule
  EXPECT_FALSE(fails(3.0e38, DType::F64, DType::F32));
  EXPECT_TRUE(fails(3.5e38, DType::F64, DType::F32));
  EXPECT_FALSE(fails(double{INFINITY}, DType::F64, DType::F16));
  EXPECT_FALSE(fails(double{NAN}, DType::F64, DType::F32));
  EXPECT_TRUE(fails(double{NAN}, DType::F64, DType::I32));
  EXPECT_TRUE(fails(70000.0, DType::F64, DType::F16));
  std::complex<double> z{1.0, 2.0};  // 1+2j, as a Python complex travels (complex128)
  EXPECT_TRUE(fails(z, DType::C128, DType::F32));
  EXPECT_FALSE(fails(z, DType::C128, DType::C64));
  EXPECT_FALSE(fails(std::complex<double>{2.0, 0.0}, DType::C128, DType::F32));
  std::complex<double> big{1.0, 1e300};  // its imaginary part overflows complex64
  EXPECT_TRUE(fails(big, DType::C128, DType::C64));
  EXPECT_FALSE(fails(big, DType::C128, DType::C128));
}

TEST(ErrorKinds, DimOutOfRangeIsAnIndexError) {
  hlo::Builder b;
  lowering::Context cx(b, {}, "aten::sum.dim_IntList");
  EXPECT_THROW(cx.dim(3, 2), std::out_of_range);
  EXPECT_EQ(cx.dim(-1, 2), 1);
}

TEST(DTypeNames, EveryDTypeHasTorchsName) {
  EXPECT_EQ(hlo::scalar_type_name(DType::F32), "Float");
  EXPECT_EQ(hlo::scalar_type_name(DType::C64), "ComplexFloat");
  EXPECT_EQ(hlo::scalar_type_name(DType::C128), "ComplexDouble");
  for (int i = 0; i < hlo::kNumDTypes; ++i) EXPECT_FALSE(hlo::scalar_type_name(static_cast<DType>(i)).empty());
}

}  // namespace
}  // namespace torch_pjrt
