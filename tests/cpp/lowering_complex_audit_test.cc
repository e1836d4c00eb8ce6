// Complex inputs to lowerings written for real dtypes: refused like PyTorch
// (LoweringError), declined to the CPU fallback (NotLowered), or lowered with
// a complex formula whose result type follows ATen.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;
using testing::lower;
using testing::Lowered;

Lowered lower_unary(const std::string& op, DType t) {
  return lower(op, [t](hlo::Builder& b) { return std::vector<Arg>{Arg::tensor(b.parameter({t, {2, 3}}))}; });
}
Lowered lower_binary(const std::string& op, DType t) {
  return lower(op, [t](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({t, {2, 3}})), Arg::tensor(b.parameter({t, {2, 3}}))};
  });
}

bool is_not_lowered(const std::function<void()>& f) {
  try {
    f();
  } catch (const lowering::NotLowered&) {
    return true;
  } catch (const lowering::LoweringError&) {
    return false;
  }
  return false;
}

TEST(ComplexAudit, RefusedLikePyTorch) {
  for (const char* op : {"aten::floor", "aten::ceil", "aten::trunc", "aten::round", "aten::sign", "aten::signbit",
                         "aten::isposinf", "aten::relu", "aten::erf", "aten::amax"}) {
    EXPECT_THROW(lower_unary(op, DType::C64), lowering::LoweringError) << op;
    EXPECT_FALSE(is_not_lowered([&] { lower_unary(op, DType::C64); })) << op;
    EXPECT_NO_THROW(lower_unary(op, DType::F32)) << op;
  }
  for (const char* op : {"aten::remainder.Tensor", "aten::fmod.Tensor", "aten::lt.Tensor", "aten::maximum",
                         "aten::atan2", "aten::floor_divide"}) {
    EXPECT_THROW(lower_binary(op, DType::C64), lowering::LoweringError) << op;
    EXPECT_NO_THROW(lower_binary(op, DType::F32)) << op;
  }
}

TEST(ComplexAudit, DeclinedToTheCpuFallback) {
  EXPECT_TRUE(is_not_lowered([] { lower_binary("aten::logaddexp", DType::C64); }));
  EXPECT_NO_THROW(lower_binary("aten::logaddexp", DType::F32));
}

TEST(ComplexAudit, SgnAndEqualityStayComplex) {
  EXPECT_EQ(lower_unary("aten::sgn", DType::C64).results[0].dtype(), DType::C64);
  EXPECT_EQ(lower_binary("aten::eq.Tensor", DType::C64).results[0].dtype(), DType::Bool);
}

TEST(ComplexAudit, VarianceOfComplexIsReal) {
  auto l = lower("aten::var.correction", [](hlo::Builder& b) {
    return std::vector<Arg>{Arg::tensor(b.parameter({DType::C64, {4, 5}})), Arg::integers({1}), Arg::none(),
                            Arg::boolean(false)};
  });
  ASSERT_EQ(l.results.size(), 1u);
  EXPECT_EQ(l.results[0].dtype(), DType::F32);
  EXPECT_EQ(l.results[0].dims(), (hlo::Dims{4}));
  EXPECT_NE(l.text.find("stablehlo.real"), std::string::npos);
  EXPECT_NE(l.text.find("stablehlo.imag"), std::string::npos);
}

TEST(ComplexAudit, NanToNumReplacesBothParts) {
  auto l = lower_unary("aten::nan_to_num", DType::C64);
  EXPECT_EQ(l.results[0].dtype(), DType::C64);
  EXPECT_NE(l.text.find("stablehlo.complex"), std::string::npos);
}

}  // namespace
}  // namespace torch_pjrt
