// The one dtype module of the torch-free core.
//
// Every fact about an element type lives in one table in dtype.cc: its
// StableHLO spelling, its byte size, its category for type promotion and its
// PJRT buffer-type code. Lowerings never switch on a dtype; they ask here.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace torch_pjrt::hlo {

enum class DType : uint8_t {
  Bool,
  U8,
  I8,
  I16,
  I32,
  I64,
  F16,
  BF16,
  F32,
  F64,
  U32,   // torch.uint32; also RNG bits
  U64,   // torch.uint64; also the RNG state
  C64,   // complex<f32>
  C128,  // complex<f64>
  U16,   // torch.uint16
};
constexpr int kNumDTypes = 15;

// How PyTorch ranks dtypes when it promotes mixed operands.
enum class Category : uint8_t { Bool = 0, Integral = 1, Floating = 2, Complex = 3 };

// The StableHLO element type, e.g. "f32", "i1", "ui8".
std::string_view mlir_name(DType t);
// Short stable name used in error messages and metrics, e.g. "float32".
std::string_view dtype_name(DType t);
// torch's ScalarType name, as CPU PyTorch prints dtypes in messages, e.g.
// "Float", "Long", "ComplexFloat".
std::string_view scalar_type_name(DType t);
// The C++ element type some ATen messages print, e.g. "float", "long int",
// "c10::Half" (internal dtypes print their ScalarType-style name).
std::string_view cpp_type_name(DType t);
int64_t byte_size(DType t);
Category category(DType t);
inline bool is_floating(DType t) { return category(t) == Category::Floating; }
inline bool is_integral(DType t) { return category(t) == Category::Integral; }
inline bool is_complex(DType t) { return category(t) == Category::Complex; }
// The element type of a complex dtype's real and imaginary parts (c64 -> f32);
// every other dtype is its own.
DType real_type(DType t);
// The complex dtype whose parts are `t` (f32 -> c64, f64 -> c128; f16 and
// bf16 -> c64, as PyTorch has no complex32 here); complex dtypes are their own.
DType complex_type(DType t);
bool is_unsigned(DType t);
// The PJRT_Buffer_Type code of this dtype: the value of its
// runtime::ElementType (the engine converts; runtime knows no DType).
int pjrt_code(DType t);
// The StableHLO comparison_type for comparing values of `t`: FLOAT,
// SIGNED or UNSIGNED (bool compares as unsigned).
std::string_view comparison_type(DType t);
// `v` spelled as a StableHLO dense literal of element type `t` ("true",
// "-3", "2.5e+00", a hex bit pattern for inf and nan, or "(2.5e+00, 0.0e+00)"
// for a complex type: `v` is the real part).
std::string literal(double v, DType t);

// The StableHLO op that adds (multiplies) values of `t` as PyTorch does:
// bool adds as logical or and multiplies as logical and.
std::string_view sum_op(DType t);
std::string_view product_op(DType t);

// The largest finite value of a floating dtype (float16: 65504); of any
// other dtype, the largest finite double.
double max_finite(DType t);
// Whether the double `v` converts to `t` without overflow, by c10's rule
// for Python numbers: NaN and infinities fit every floating dtype, integral
// dtypes take [min, max] of their width, bool takes anything.
bool fits_without_overflow(double v, DType t);
// The same for an integer; c10 lets an unsigned dtype take -max..max
// (-255 fits uint8: it wraps).
bool fits_without_overflow(int64_t v, DType t);

// The dtype PyTorch computes in for `t` (float16 and bfloat16 math runs in
// float32 and rounds once at the end); every other dtype is its own.
DType opmath_type(DType t);

// The dtype a conversion from `from` to `to` passes through to give CPU
// PyTorch's result: a float converts to int8, uint8, int16 and uint16 through
// int32, and to uint32 through int64, as C++'s casts on CPU do (out-of-range
// values wrap instead of saturating); `to` itself for every other pair.
DType cpu_cast_via(DType from, DType to);

// torch.promote_types for two dtypes.
DType promote_types(DType a, DType b);
// torch.can_cast: may an operation whose result is `from` write into `to`?
bool can_cast(DType from, DType to);

// A dtype PyTorch would give a result but the device has none of
// (ComplexHalf: a float16 tensor meeting a complex scalar).
struct UnsupportedDType : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// PyTorch's type promotion over operands of three priorities: tensors with
// dimensions, zero-dim tensors, and wrapped Python numbers. Feed every operand
// with add(); result() gives torch.result_type, or throws UnsupportedDType.
class ResultType {
 public:
  enum class Kind { Dimensioned, ZeroDim, Wrapped };
  explicit ResultType(DType default_float = DType::F32) : default_float_(default_float) {}
  void add(DType t, Kind kind);
  DType result() const;

 private:
  DType default_float_;
  bool has_[3] = {false, false, false};
  DType acc_[3] = {DType::Bool, DType::Bool, DType::Bool};
};

}  // namespace torch_pjrt::hlo
