// Error kinds: a lowering's errors and runtime checks carry the Python class
// CPU PyTorch raises for the same input (the glue maps the kind once).
#include <gtest/gtest.h>

#include <cstdint>
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
  auto out = testing::run_all(c.b.module_text(), {testing::upload(a, DType::I64, {4}), testing::upload(d, DType::I64, {4})});
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
