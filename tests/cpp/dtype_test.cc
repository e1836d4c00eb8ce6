#include "hlo/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "runtime/pjrt.h"

namespace torch_pjrt::hlo {
namespace {

TEST(DType, PromotesLikeTorch) {
  EXPECT_EQ(promote_types(DType::I32, DType::F16), DType::F16);
  EXPECT_EQ(promote_types(DType::BF16, DType::F16), DType::F32);
  EXPECT_EQ(promote_types(DType::U8, DType::I8), DType::I16);
  EXPECT_EQ(promote_types(DType::Bool, DType::I32), DType::I32);
  EXPECT_EQ(promote_types(DType::I64, DType::F32), DType::F32);
}

TEST(DType, ResultTypeRespectsOperandPriority) {
  ResultType a;  // float16 tensor * python float -> float16
  a.add(DType::F16, ResultType::Kind::Dimensioned);
  a.add(DType::F64, ResultType::Kind::Wrapped);
  EXPECT_EQ(a.result(), DType::F16);
  ResultType b;  // int tensor + python float -> default float
  b.add(DType::I32, ResultType::Kind::Dimensioned);
  b.add(DType::F64, ResultType::Kind::Wrapped);
  EXPECT_EQ(b.result(), DType::F32);
  ResultType c;  // int32 tensor + zero-dim float64 -> float64
  c.add(DType::I32, ResultType::Kind::Dimensioned);
  c.add(DType::F64, ResultType::Kind::ZeroDim);
  EXPECT_EQ(c.result(), DType::F64);
  ResultType d;  // uint8 tensor + int64 zero-dim -> uint8
  d.add(DType::U8, ResultType::Kind::Dimensioned);
  d.add(DType::I64, ResultType::Kind::ZeroDim);
  EXPECT_EQ(d.result(), DType::U8);
}

// Values from torch.result_type: a complex operand of lower priority lifts a
// float to complex at the float's width.
TEST(DType, ResultTypeLiftsAFloatToComplexAtItsWidth) {
  auto result = [](DType dimensioned, DType other, ResultType::Kind kind) {
    ResultType r;
    r.add(dimensioned, ResultType::Kind::Dimensioned);
    r.add(other, kind);
    return r.result();
  };
  EXPECT_EQ(result(DType::F32, DType::C128, ResultType::Kind::ZeroDim), DType::C64);
  EXPECT_EQ(result(DType::F64, DType::C64, ResultType::Kind::Wrapped), DType::C128);
  EXPECT_EQ(result(DType::BF16, DType::C64, ResultType::Kind::Wrapped), DType::C64);
  EXPECT_EQ(result(DType::I64, DType::C128, ResultType::Kind::ZeroDim), DType::C128);
  EXPECT_THROW(result(DType::F16, DType::C64, ResultType::Kind::Wrapped), UnsupportedDType);  // ComplexHalf
}

TEST(DType, LiteralsSpellNonFiniteAsHex) {
  EXPECT_EQ(literal(-INFINITY, DType::F32), "0xFF800000");
  EXPECT_EQ(literal(-INFINITY, DType::BF16), "0xFF80");
  EXPECT_EQ(literal(3, DType::I64), "3");
  EXPECT_EQ(literal(1, DType::Bool), "true");
  EXPECT_EQ(literal(9223372036854775807.0, DType::I64), "9223372036854775807");
  EXPECT_EQ(literal(-9223372036854775808.0, DType::I64), "-9223372036854775808");
}

// The engine hands pjrt_code(t) to runtime::Client::from_host as a
// runtime::ElementType (runtime knows no DType): every code names the same type.
TEST(DType, PjrtCodesAreTheRuntimeElementTypes) {
  using runtime::ElementType;
  const std::pair<DType, ElementType> want[] = {
      {DType::Bool, ElementType::PRED}, {DType::U8, ElementType::U8},     {DType::I8, ElementType::S8},
      {DType::I16, ElementType::S16},   {DType::I32, ElementType::S32},   {DType::I64, ElementType::S64},
      {DType::F16, ElementType::F16},   {DType::BF16, ElementType::BF16}, {DType::F32, ElementType::F32},
      {DType::F64, ElementType::F64},   {DType::U32, ElementType::U32},   {DType::U64, ElementType::U64},
      {DType::C64, ElementType::C64},   {DType::C128, ElementType::C128}, {DType::U16, ElementType::U16}};
  static_assert(sizeof want / sizeof want[0] == kNumDTypes, "one row per dtype");
  for (const auto& [t, e] : want) EXPECT_EQ(pjrt_code(t), static_cast<int>(e)) << dtype_name(t);
}

// CPU PyTorch casts float to narrow integers through C++'s int (they wrap:
// float(300) to uint8 is 44); XLA's convert would saturate them.
TEST(DType, CpuCastsFloatToNarrowIntegersThroughAWiderOne) {
  for (DType to : {DType::U8, DType::I8, DType::I16, DType::U16}) {
    EXPECT_EQ(cpu_cast_via(DType::F32, to), DType::I32) << dtype_name(to);
    EXPECT_EQ(cpu_cast_via(DType::BF16, to), DType::I32) << dtype_name(to);
    EXPECT_EQ(cpu_cast_via(DType::I64, to), to) << dtype_name(to);  // integer to integer wraps in XLA too
  }
  EXPECT_EQ(cpu_cast_via(DType::F64, DType::U32), DType::I64);
  EXPECT_EQ(cpu_cast_via(DType::F32, DType::I32), DType::I32);
  EXPECT_EQ(cpu_cast_via(DType::F32, DType::F16), DType::F16);
  EXPECT_EQ(cpu_cast_via(DType::Bool, DType::U8), DType::U8);
}

}  // namespace
}  // namespace torch_pjrt::hlo
