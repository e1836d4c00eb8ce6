// The lowering table is the union of these per-family tables, one file each.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "lowering/context.h"

namespace torch_pjrt::lowering {

std::vector<Entry> elementwise_lowerings();      // elementwise.cc
std::vector<Entry> special_lowerings();          // special.cc
std::vector<Entry> reduction_lowerings();        // reduction.cc
std::vector<Entry> linalg_lowerings();           // linalg.cc (with linalg_factor.cc)
std::vector<Entry> linalg_spectral_lowerings();  // linalg_spectral.cc
std::vector<Entry> fft_lowerings();              // fft.cc
std::vector<Entry> shape_lowerings();            // shape.cc
std::vector<Entry> pad_lowerings();              // pad.cc
std::vector<Entry> indexing_lowerings();         // indexing.cc
std::vector<Entry> sorting_lowerings();          // sorting.cc
std::vector<Entry> data_dependent_lowerings();   // data_dependent.cc
std::vector<Entry> creation_lowerings();         // creation.cc
std::vector<Entry> random_lowerings();           // random.cc
std::vector<Entry> activation_lowerings();       // activation.cc
std::vector<Entry> loss_lowerings();             // loss.cc
std::vector<Entry> distance_lowerings();         // distance.cc
std::vector<Entry> norm_lowerings();             // norm.cc
std::vector<Entry> conv_lowerings();             // conv.cc
std::vector<Entry> pool_lowerings();             // pool.cc
std::vector<Entry> sampling_lowerings();         // sampling.cc
std::vector<Entry> embedding_bag_lowerings();    // embedding_bag.cc
std::vector<Entry> optim_lowerings();            // optim.cc
std::vector<Entry> foreach_lowerings();          // foreach.cc

// Shared helpers for lowerings of several families.
// The orders ATen's vector norm kernels compute without pow (None means 2):
// program constants (Traits::fixed_values), so a norm computes one reduction
// (reduction.cc).
extern const std::vector<double> kNormFixedOrders;
// CPU refuses an in-place abs of a complex tensor (abs_, _foreach_abs_).
inline constexpr char kAbsInPlaceOfComplex[] = "In-place abs is not supported for complex tensors.";
// Arguments i and j promoted to their common dtype (torch.result_type).
std::pair<Value, Value> promote(Context& cx, size_t i, size_t j);
// ATen's infer_size: the broadcast of shapes a and b, or its error ("The
// size of tensor a (2) must match the size of tensor b (3) at non-singleton
// dimension 0").
Dims infer_size(const Context& cx, const Dims& a, const Dims& b);
// dtype for ops that compute in floating point (sqrt of an int tensor is f32).
DType float_type(DType t);
// Rank-0 constant of x's dtype.
inline Value scalar_like(Context& cx, double v, const Value& x) { return cx.b.constant(v, x.dtype()); }

// Dims as attribute and message text (hlo/builder.h).
using hlo::dims_str;
using hlo::i64_array;
// Elements of a tensor of shape d.
inline int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}
// 0, 1, ..., n - 1 (plus `from`): the dims of a full reduce or an identity permutation.
inline Dims iota_dims(int64_t n, int64_t from = 0) {
  Dims d;
  for (int64_t i = 0; i < n; ++i) d.push_back(from + i);
  return d;
}

// ---- reductions inside a lowering

// The dims of `rank` that are not in `reduced`, in order.
inline Dims kept_dims(int64_t rank, const Dims& reduced) {
  Dims kept;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(reduced.begin(), reduced.end(), i) == reduced.end()) kept.push_back(i);
  return kept;
}
// A value reduced over `reduced` broadcast back to the dims `full`.
inline Value unreduce(hlo::Builder& b, Value v, const Dims& full, const Dims& reduced) {
  return b.broadcast_in_dim(v, full, kept_dims(static_cast<int64_t>(full.size()), reduced));
}
// Sum of x over `dims` in x's dtype (x itself when dims is empty).
inline Value sum_over(hlo::Builder& b, Value x, const Dims& dims) {
  if (dims.empty()) return x;
  return b.reduce(x, b.constant(0, x.dtype()), dims, "stablehlo.add");
}
// max(x, lo) and min(x, hi) that keep a NaN x whatever the plugin's
// stablehlo.maximum/minimum do with NaN operands (the CPU plugin's depend on
// the operand order).
inline Value at_least(hlo::Builder& b, Value x, Value lo) { return b.select(b.compare(x, lo, "LT"), lo, x); }
inline Value at_most(hlo::Builder& b, Value x, Value hi) { return b.select(b.compare(x, hi, "GT"), hi, x); }

// Stable sort of x along dim: {values, int64 source positions}; NaN sorts as
// the largest value, as in PyTorch (sorting.cc).
std::pair<Value, Value> sort_along(hlo::Builder& b, Value x, int64_t dim, bool descending);

// ---- shapes and indices (shape.cc, indexing.cc, sorting.cc)

// d with `extra` appended.
inline Dims appended(Dims d, int64_t extra) {
  d.push_back(extra);
  return d;
}
// d with entry `dim` replaced by `size`.
inline Dims with_dim(Dims d, int64_t dim, int64_t size) {
  d[dim] = size;
  return d;
}
// A rank-0 tensor viewed as 1-D (gather, scatter and friends treat scalars so).
inline Value at_least_1d(hlo::Builder& b, Value x) { return x.rank() == 0 ? b.reshape(x, {1}) : x; }
// indexing.cc. An index tensor as i64; bool/uint8 masks (data-dependent
// shapes) and floats are refused.
Value index_arg(Context& cx, Value idx);
// indexing.cc. Full coordinates for an element-wise gather/scatter along
// `dim`: shape idx.dims + [rank], where coordinate `dim` is idx and every
// other coordinate is the element's own position.
Value along_coords(hlo::Builder& b, Value idx, int64_t dim);

// Rank-0 i1: whether any element of the i1 tensor `pred` is true (what a
// runtime check tests).
inline Value any_true(hlo::Builder& b, Value pred) {
  if (pred.rank() == 0) return pred;
  return b.reduce(pred, b.constant(0, DType::Bool), iota_dims(pred.rank()), "stablehlo.or");
}

// Argument i converted to the dtype PyTorch computes its float function in
// (ints promote to f32, f16/bf16 compute in f32), and the dtype of the result.
struct FloatArg {
  Value x;
  DType out;
};
inline FloatArg float_arg(Context& cx, size_t i) {
  Value x = cx.tensor(i);
  DType out = float_type(x.dtype());
  return {cx.b.convert(x, hlo::opmath_type(out)), out};
}

// Python-style floor of a quotient for integers: C division truncates.
inline Value int_floor_div(hlo::Builder& b, Value a, Value d) {
  Value q = b.div(a, d);
  Value r = b.binary("stablehlo.remainder", a, d);
  Value zero = b.constant(0, a.dtype());
  Value fix = b.and_(b.compare(r, zero, "NE"), b.compare(b.compare(r, zero, "LT"), b.compare(d, zero, "LT"), "NE"));
  return b.select(fix, b.sub(q, b.constant(1, a.dtype())), q);
}

// random.cc. Significand bits of a float dtype: every k * 2^-digits in
// [0, 1) is exact in it (PyTorch draws uniform floats with this many bits).
int float_digits(DType t);
// Uniform floats in [0, 1) of dtype `t` (f32 or f64), each a multiple of
// 2^-digits made from the top `digits` bits of stablehlo.rng_bit_generator
// on `state` (ui64[2]); advances `state`.
Value uniform01(hlo::Builder& b, Value& state, const Dims& dims, DType t, int digits);

// Complex inputs for lowerings written for real dtypes. Whether any of the
// tensor or scalar arguments `idx` (absent ones skipped) is complex.
inline bool any_complex(const Context& cx, std::initializer_list<size_t> idx) {
  for (size_t i : idx) {
    if (cx.none(i)) continue;
    auto kind = cx.arg(i).kind;
    if ((kind == Arg::Kind::Tensor || kind == Arg::Kind::Scalar) && hlo::is_complex(cx.tensor(i).dtype())) return true;
  }
  return false;
}
// PyTorch refuses complex inputs of this op: raise its message, as the
// class CPU raises it (most are TORCH_CHECKs: RuntimeError).
inline void refuse_complex(const Context& cx, std::initializer_list<size_t> idx, const std::string& message,
                           ErrorKind kind = ErrorKind::Runtime) {
  if (any_complex(cx, idx)) cx.fail(message, kind);
}
// PyTorch's AT_DISPATCH refusal: "<kernel>" not implemented for '<Type>'
// (NotImplementedError), `kernel` being its CPU kernel's dispatch name.
[[noreturn]] inline void refuse_dtype(const Context& cx, DType t, const std::string& kernel) {
  cx.fail("\"" + kernel + "\" not implemented for '" + std::string(hlo::scalar_type_name(t)) + "'",
          ErrorKind::NotImplemented);
}
// PyTorch's "<kernel>" not implemented for 'ComplexFloat' message (its CPU
// dispatch name for the complex dtype of the arguments `idx`).
inline void refuse_complex_kernel(const Context& cx, std::initializer_list<size_t> idx, const std::string& kernel) {
  for (size_t i : idx)
    if (any_complex(cx, {i})) refuse_dtype(cx, cx.tensor(i).dtype(), kernel);
}
// |x| of a complex x as std::abs (hypot) gives it: inf when a part is
// infinite, else NaN when a part is NaN (the plugin's complex abs misses the
// NaN); a real x gets stablehlo.abs.
inline Value abs_value(hlo::Builder& b, Value x) {
  Value r = b.abs(x);
  if (!hlo::is_complex(x.dtype())) return r;
  Value re = b.real(x), im = b.imag(x);
  DType t = r.dtype();
  Value inf = b.constant(INFINITY, t);
  Value any_nan = b.or_(b.compare(re, re, "NE"), b.compare(im, im, "NE"));
  Value any_inf = b.or_(b.compare(b.abs(re), inf, "EQ"), b.compare(b.abs(im), inf, "EQ"));
  return b.select(any_inf, inf, b.select(any_nan, b.constant(NAN, t), r));
}
// elementwise.cc. CPU's Scalar::to<T> (c10::checked_convert) for a Scalar
// argument i that the kernel converts to dtype t, made at run time (Scalars
// are program arguments): RuntimeError "value cannot be converted to type <T>
// without overflow" for a complex value with a non-zero imaginary part and a
// real t, a finite float outside a float t's range, or a value outside an
// integral t's range (NaN and infinities included; negative integers down to
// -max pass for unsigned t, as c10::overflows allows). Tensor arguments and
// bool t are not checked.
void check_scalar_fits(Context& cx, size_t i, DType t);

// PyTorch computes this op on complex inputs but this lowering has no complex
// algorithm: the call takes the CPU fallback.
inline void decline_complex(const Context& cx, std::initializer_list<size_t> idx) {
  if (any_complex(cx, idx)) cx.not_lowered("complex inputs run on the CPU");
}

// ATen's Tensor::size(d): a dim out of range raises IndexError, as does any
// dim of a 0-d tensor ("Dimension specified as d but tensor has no
// dimensions"). For lowerings whose CPU kernel reads sizes before it checks
// the rank.
inline int64_t size_at(const Context& cx, const Value& v, int64_t d) {
  if (v.rank() == 0)
    cx.fail("Dimension specified as " + std::to_string(d) + " but tensor has no dimensions", ErrorKind::Index);
  return v.dims()[cx.dim(d, v.rank())];
}
// TensorIterator without type promotion: every operand `idx` (absent ones
// skipped) must have the dtype of the first, else RuntimeError "Found dtype
// X but expected Y".
inline void same_dtypes(const Context& cx, std::initializer_list<size_t> idx) {
  bool have = false;
  DType want{};
  for (size_t i : idx) {
    if (cx.none(i)) continue;
    DType t = cx.tensor(i).dtype();
    if (!have) {
      want = t;
      have = true;
    } else if (t != want) {
      cx.fail("Found dtype " + std::string(hlo::scalar_type_name(t)) + " but expected " +
              std::string(hlo::scalar_type_name(want)));
    }
  }
}
// AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16) in a CPU kernel: other
// dtypes raise NotImplementedError naming `kernel`. Returns t.
inline DType floating_kernel(const Context& cx, DType t, const std::string& kernel) {
  if (!hlo::is_floating(t)) refuse_dtype(cx, t, kernel);
  return t;
}

}  // namespace torch_pjrt::lowering
