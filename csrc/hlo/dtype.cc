#include "hlo/dtype.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

namespace torch_pjrt::hlo {
namespace {

struct Info {
  std::string_view mlir;
  std::string_view name;
  std::string_view scalar_type;  // torch's c10::ScalarType name
  std::string_view cpp;          // the C++ type ATen's messages print
  int64_t bytes;
  Category category;
  bool is_unsigned;
  int pjrt;  // PJRT_Buffer_Type
};

// Order matches enum DType.
constexpr std::array<Info, kNumDTypes> kInfo = {{
    {"i1", "bool", "Bool", "bool", 1, Category::Bool, true, 1},
    {"ui8", "uint8", "Byte", "unsigned char", 1, Category::Integral, true, 6},
    {"i8", "int8", "Char", "signed char", 1, Category::Integral, false, 2},
    {"i16", "int16", "Short", "short int", 2, Category::Integral, false, 3},
    {"i32", "int32", "Int", "int", 4, Category::Integral, false, 4},
    {"i64", "int64", "Long", "long int", 8, Category::Integral, false, 5},
    {"f16", "float16", "Half", "c10::Half", 2, Category::Floating, false, 10},
    {"bf16", "bfloat16", "BFloat16", "c10::BFloat16", 2, Category::Floating, false, 13},
    {"f32", "float32", "Float", "float", 4, Category::Floating, false, 11},
    {"f64", "float64", "Double", "double", 8, Category::Floating, false, 12},
    {"ui32", "uint32", "UInt32", "UInt32", 4, Category::Integral, true, 8},
    {"ui64", "uint64", "UInt64", "UInt64", 8, Category::Integral, true, 9},
    {"complex<f32>", "complex64", "ComplexFloat", "c10::complex<float>", 8, Category::Complex, false, 14},
    {"complex<f64>", "complex128", "ComplexDouble", "c10::complex<double>", 16, Category::Complex, false, 15},
    {"ui16", "uint16", "UInt16", "UInt16", 2, Category::Integral, true, 7},
}};

const Info& info(DType t) { return kInfo[static_cast<int>(t)]; }

}  // namespace

std::string_view mlir_name(DType t) { return info(t).mlir; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::string_view scalar_type_name(DType t) { return info(t).scalar_type; }
std::string_view cpp_type_name(DType t) { return info(t).cpp; }
int64_t byte_size(DType t) { return info(t).bytes; }
Category category(DType t) { return info(t).category; }
bool is_unsigned(DType t) { return info(t).is_unsigned; }
int pjrt_code(DType t) { return info(t).pjrt; }

DType real_type(DType t) {
  if (t == DType::C64) return DType::F32;
  if (t == DType::C128) return DType::F64;
  return t;
}

DType complex_type(DType t) {
  if (is_complex(t)) return t;
  return t == DType::F64 ? DType::C128 : DType::C64;
}

std::string_view comparison_type(DType t) {
  if (is_floating(t) || is_complex(t)) return "FLOAT";
  return is_unsigned(t) ? "UNSIGNED" : "SIGNED";
}

std::string literal(double v, DType t) {
  char buf[64];
  if (is_complex(t)) return "(" + literal(v, real_type(t)) + ", " + literal(0.0, real_type(t)) + ")";
  if (category(t) == Category::Bool) return v != 0 ? "true" : "false";
  if (category(t) == Category::Integral) {
    // Doubles at or past the int64 limits (2^63 is exactly representable)
    // saturate instead of wrapping.
    long long i = v >= 9223372036854775807.0    ? std::numeric_limits<long long>::max()
                  : v <= -9223372036854775808.0 ? std::numeric_limits<long long>::min()
                                                : static_cast<long long>(v);
    std::snprintf(buf, sizeof buf, "%lld", i);
    return buf;
  }
  if (std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "%.17e", v);
    return buf;
  }
  // Non-finite floats are spelled as hex bit patterns of the element width.
  bool neg = std::signbit(v);
  const char* bits = "";
  switch (byte_size(t) * 8 + (t == DType::BF16 ? 1 : 0)) {
    case 16:
      bits = std::isnan(v) ? "0x7E00" : (neg ? "0xFC00" : "0x7C00");
      break;
    case 17:
      bits = std::isnan(v) ? "0x7FC0" : (neg ? "0xFF80" : "0x7F80");
      break;
    case 32:
      bits = std::isnan(v) ? "0x7FC00000" : (neg ? "0xFF800000" : "0x7F800000");
      break;
    default:
      bits = std::isnan(v) ? "0x7FF8000000000000" : (neg ? "0xFFF0000000000000" : "0x7FF0000000000000");
  }
  return bits;
}

std::string_view sum_op(DType t) { return t == DType::Bool ? "stablehlo.or" : "stablehlo.add"; }
std::string_view product_op(DType t) { return t == DType::Bool ? "stablehlo.and" : "stablehlo.multiply"; }

double max_finite(DType t) {
  switch (t) {
    case DType::F16:
      return 65504.0;
    case DType::BF16:
      return 3.3895313892515355e38;
    case DType::F32:
    case DType::C64:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

bool fits_without_overflow(double v, DType t) {
  if (t == DType::Bool) return true;
  DType part = real_type(t);
  if (is_floating(part)) {
    double max = max_finite(part);
    return std::isnan(v) || std::isinf(v) || (v >= -max && v <= max);
  }
  int bits = static_cast<int>(byte_size(part)) * 8;
  double hi = is_unsigned(part) ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  double lo = is_unsigned(part) ? 0 : -std::ldexp(1.0, bits - 1);
  return !std::isnan(v) && v >= lo && v <= hi;
}

bool fits_without_overflow(int64_t v, DType t) {
  DType part = real_type(t);
  if (t == DType::Bool || is_floating(part) || part == DType::I64 || part == DType::U64) return true;
  int bits = static_cast<int>(byte_size(part)) * 8;
  int64_t hi = is_unsigned(part) ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
  int64_t lo = is_unsigned(part) ? -hi : -(int64_t{1} << (bits - 1));
  return v >= lo && v <= hi;
}

DType opmath_type(DType t) { return t == DType::F16 || t == DType::BF16 ? DType::F32 : t; }

DType cpu_cast_via(DType from, DType to) {
  if (!is_floating(from)) return to;
  if (to == DType::U8 || to == DType::I8 || to == DType::I16 || to == DType::U16) return DType::I32;
  return to == DType::U32 ? DType::I64 : to;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  Category ca = category(a), cb = category(b);
  if (ca != cb) {
    DType hi = ca > cb ? a : b, lo = ca > cb ? b : a;
    // A complex type meeting a wider float widens its parts (c64 + f64 -> c128).
    if (category(hi) == Category::Complex && category(lo) == Category::Floating)
      return complex_type(promote_types(real_type(hi), lo));
    return hi;
  }
  if (ca == Category::Complex) return byte_size(a) >= byte_size(b) ? a : b;
  if (ca == Category::Floating) {
    // f16 and bf16 meet at f32; otherwise the wider wins.
    if ((a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16)) return DType::F32;
    return byte_size(a) >= byte_size(b) ? a : b;
  }
  // Integral: uint8 with a signed type needs the next wider signed type.
  if (is_unsigned(a) != is_unsigned(b)) {
    DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
    if (byte_size(s) > byte_size(u)) return s;
    if (u == DType::U8) return DType::I16;
    return DType::I64;
  }
  return byte_size(a) >= byte_size(b) ? a : b;
}

bool can_cast(DType from, DType to) { return category(from) <= category(to); }

void ResultType::add(DType t, Kind kind) {
  int k = static_cast<int>(kind);
  if (kind == Kind::Wrapped) {
    // A Python float takes the default dtype; a Python int is int64.
    if (is_floating(t))
      t = default_float_;
    else if (is_complex(t))
      t = complex_type(default_float_);
    else if (is_integral(t))
      t = DType::I64;
  }
  acc_[k] = has_[k] ? promote_types(acc_[k], t) : t;
  has_[k] = true;
}

DType ResultType::result() const {
  // A lower-priority operand only matters when its category is higher.
  DType out = DType::Bool;
  bool have = false;
  for (int k = 0; k < 3; ++k) {
    if (!has_[k]) continue;
    if (!have) {
      out = acc_[k];
      have = true;
    } else if (category(acc_[k]) > category(out)) {
      // A lower-priority operand lifts the category only: a float keeps its
      // width as complex (float32 with a complex128 scalar is complex64).
      if (is_complex(acc_[k]) && is_floating(out)) {
        if (out == DType::F16) throw UnsupportedDType("ComplexHalf");
        out = complex_type(out);  // bfloat16 -> complex64, as in c10's toComplexType
      } else {
        out = promote_types(out, acc_[k]);
      }
    }
  }
  if (!have) throw std::invalid_argument("result_type needs at least one operand");
  return out;
}

}  // namespace torch_pjrt::hlo
