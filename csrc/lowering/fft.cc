// FFT and complex-number lowerings: aten::_fft_r2c/_fft_c2c/_fft_c2r on
// stablehlo.fft, and the ops that build or split complex tensors.
//
// PyTorch's spectral ops (torch.fft.*) pad or trim the input to the signal
// size and then call one of the three _fft_* ops with the dims to transform
// and a normalization mode; their backward formulas are composites over the
// same three ops. stablehlo.fft transforms the last 1 to 3 dims, so the
// requested dims are moved to the end, transformed (in chunks of 3 when there
// are more), and moved back. XLA's inverse transforms divide by n; PyTorch's
// `normalization` says what the result is scaled by instead.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// at::native::fft_norm_mode.
enum Norm : int64_t { kNone = 0, kByRootN = 1, kByN = 2 };

// Permutation that moves `dims` (in their order) to the end of a rank-r
// tensor, and its inverse.
std::pair<Dims, Dims> move_to_end(const Dims& dims, int64_t rank) {
  Dims perm;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) perm.push_back(i);
  perm.insert(perm.end(), dims.begin(), dims.end());
  Dims inv(rank);
  for (int64_t i = 0; i < rank; ++i) inv[perm[i]] = i;
  return {perm, inv};
}

// The transform dims, normalised and checked for repeats.
Dims fft_dims(Context& cx, size_t i, int64_t rank) {
  Dims dims = cx.dims(cx.ints(i), rank);
  for (size_t a = 0; a < dims.size(); ++a)
    for (size_t c = a + 1; c < dims.size(); ++c)
      if (dims[a] == dims[c]) cx.fail("FFT dims must be unique");
  if (dims.empty()) cx.fail("FFT needs at least one dim");
  return dims;
}

void check_float(Context& cx, DType t) {
  DType r = hlo::real_type(t);
  if (r != DType::F32 && r != DType::F64)
    cx.fail("Unsupported dtype " + std::string(hlo::dtype_name(t)) + " (the tpu device transforms float32, " +
            "float64, complex64 and complex128)");
}

// Multiplies x by `scale` (no op when it is 1).
Value scaled(hlo::Builder& b, Value x, double scale) {
  if (scale == 1.0) return x;
  return b.mul(x, b.constant(scale, x.dtype()));
}

// What to multiply a transform of `n` points by: PyTorch's normalization for
// the direction, divided by what XLA already applied (1/n for inverses).
double norm_scale(int64_t normalization, bool forward, double n) {
  // As CPU's pocketfft backend: any mode other than none and by_root_n scales by 1/n.
  double want = normalization == kNone ? 1.0 : normalization == kByRootN ? 1.0 / std::sqrt(n) : 1.0 / n;
  return forward ? want : want * n;
}

// Complex-to-complex transform of x (complex) over its dims [lo, hi), in
// chunks of at most 3 dims (stablehlo.fft transforms the last 1 to 3).
Value c2c_range(hlo::Builder& b, Value x, int64_t lo, int64_t hi, bool forward) {
  const int64_t r = x.rank();
  for (int64_t end = hi; end > lo;) {
    int64_t start = std::max(lo, end - 3);
    Dims chunk(end - start), lengths;
    std::iota(chunk.begin(), chunk.end(), start);
    for (int64_t d : chunk) lengths.push_back(x.dims()[d]);
    auto [perm, inv] = move_to_end(chunk, r);
    x = b.transpose(b.fft(b.transpose(x, perm), forward ? "FFT" : "IFFT", lengths), inv);
    end = start;
  }
  return x;
}

double signal_numel(const Value& x, const Dims& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(x.dims()[d]);
  return n;
}

// aten::_fft_c2c(self, dim, normalization, forward)
V fft_c2c(Context& cx) {
  Value x = cx.tensor(0);
  if (!hlo::is_complex(x.dtype())) cx.fail("expects a complex input tensor, but got " + x.type.str());
  check_float(cx, x.dtype());
  Dims dims = fft_dims(cx, 1, x.rank());
  const int64_t normalization = cx.integer(2);
  const bool forward = cx.flag(3);
  auto [perm, inv] = move_to_end(dims, x.rank());
  const int64_t r = x.rank(), k = static_cast<int64_t>(dims.size());
  Value y = c2c_range(cx.b, cx.b.transpose(x, perm), r - k, r, forward);
  y = cx.b.transpose(y, inv);
  return {scaled(cx.b, y, norm_scale(normalization, forward, signal_numel(x, dims)))};
}

// aten::_fft_r2c(self, dim, normalization, onesided): a forward transform of
// a real input; onesided keeps the last dim's first n/2+1 entries.
V fft_r2c(Context& cx) {
  Value x = cx.tensor(0);
  if (hlo::is_complex(x.dtype())) cx.fail("expects a real input tensor, but got " + x.type.str());
  check_float(cx, x.dtype());
  Dims dims = fft_dims(cx, 1, x.rank());
  const int64_t normalization = cx.integer(2);
  const bool onesided = cx.flag(3);
  const int64_t k = static_cast<int64_t>(dims.size());
  auto [perm, inv] = move_to_end(dims, x.rank());
  Value t = cx.b.transpose(x, perm);
  Value y;
  const int64_t r = t.rank();
  if (onesided) {  // RFFT over the last dim, then FFT over the others
    y = c2c_range(cx.b, cx.b.fft(t, "RFFT", {t.dims().back()}), r - k, r - 1, true);
  } else {
    y = c2c_range(cx.b, cx.b.convert(t, hlo::complex_type(t.dtype())), r - k, r, true);
  }
  y = cx.b.transpose(y, inv);
  return {scaled(cx.b, y, norm_scale(normalization, true, signal_numel(x, dims)))};
}

// aten::_fft_c2r(self, dim, normalization, last_dim_size): an inverse
// transform of a Hermitian half-spectrum to a real signal whose last
// transformed dim has last_dim_size points.
V fft_c2r(Context& cx) {
  Value x = cx.tensor(0);
  if (!hlo::is_complex(x.dtype())) cx.fail("expects a complex input tensor, but got " + x.type.str());
  check_float(cx, x.dtype());
  Dims dims = fft_dims(cx, 1, x.rank());
  const int64_t normalization = cx.integer(2);
  const int64_t n = cx.integer(3);
  if (n < 1) cx.fail("Invalid number of data points (" + std::to_string(n) + ") specified");
  const int64_t k = static_cast<int64_t>(dims.size());
  auto [perm, inv] = move_to_end(dims, x.rank());
  Value t = cx.b.transpose(x, perm);
  // The half-spectrum has n/2+1 entries: trim or zero-pad the input to that.
  const int64_t half = n / 2 + 1, have = t.dims().back(), r = t.rank();
  if (have > half) {
    Dims limit = t.dims();
    limit.back() = half;
    t = cx.b.slice(t, Dims(r, 0), limit, Dims(r, 1));
  } else if (have < half) {
    Dims high(r, 0);
    high.back() = half - have;
    t = cx.b.pad(t, cx.b.constant(0, t.dtype()), Dims(r, 0), high, Dims(r, 0));
  }
  // Inverse over the leading transform dims first, then IRFFT over the last.
  t = c2c_range(cx.b, t, r - k, r - 1, false);
  Value y = cx.b.fft(t, "IRFFT", {n});
  y = cx.b.transpose(y, inv);
  double points = static_cast<double>(n);
  for (int64_t i = 0; i + 1 < k; ++i) points *= static_cast<double>(x.dims()[dims[i]]);
  return {scaled(cx.b, y, norm_scale(normalization, false, points))};
}

// aten::complex(real, imag)
V complex(Context& cx) {
  Value re = cx.tensor(0), im = cx.tensor(1);
  if (re.dtype() != im.dtype())
    cx.fail("Expected object of scalar type " + std::string(hlo::dtype_name(re.dtype())) + " but got scalar type " +
            std::string(hlo::dtype_name(im.dtype())) + " for second argument");
  if (re.dtype() != DType::F32 && re.dtype() != DType::F64)
    cx.fail("Expected both inputs to be Half, Float or Double tensors but got " +
            std::string(hlo::dtype_name(re.dtype())) + " and " + std::string(hlo::dtype_name(im.dtype())));
  return {cx.b.complex(re, im)};
}

// aten::polar(abs, angle): abs * (cos(angle) + i sin(angle)).
V polar(Context& cx) {
  Value r = cx.tensor(0), theta = cx.tensor(1);
  if (r.dtype() != theta.dtype() || (r.dtype() != DType::F32 && r.dtype() != DType::F64))
    cx.fail("Expected both inputs to be Float or Double tensors of one dtype");
  hlo::Builder& b = cx.b;
  return {b.complex(b.mul(r, b.unary("stablehlo.cosine", theta)), b.mul(r, b.unary("stablehlo.sine", theta)))};
}

// aten::_conj_physical(self): the conjugate, materialised.
V conj_physical(Context& cx) {
  Value x = cx.tensor(0);
  if (!hlo::is_complex(x.dtype())) return {x};
  return {cx.b.complex(cx.b.real(x), cx.b.neg(cx.b.imag(x)))};
}

// aten::angle(self): atan2(imag, real) of a complex x; of a real x, pi where
// x < 0, 0 elsewhere and NaN stays NaN (ATen's angle_impl). Integers give
// floats; bfloat16 and float16 compute in float32 and round once.
V angle(Context& cx) {
  Value x = cx.tensor(0);
  hlo::Builder& b = cx.b;
  if (hlo::is_complex(x.dtype())) return {b.binary("stablehlo.atan2", b.imag(x), b.real(x))};
  DType out = float_type(x.dtype());
  Value v = b.convert(x, hlo::opmath_type(out));
  Value zero = b.constant(0, v.dtype());
  Value r = b.select(b.compare(v, zero, "LT"), b.constant(M_PI, v.dtype()), zero);
  return {b.convert(b.select(b.compare(v, v, "NE"), v, r), out)};
}

}  // namespace

std::vector<Entry> fft_lowerings() {
  return {
      {"aten::_fft_c2c", fft_c2c},
      {"aten::_fft_r2c", fft_r2c},
      {"aten::_fft_c2r", fft_c2r},
      {"aten::complex", complex},
      {"aten::polar", polar},
      {"aten::_conj_physical", conj_physical, Traits().set_out_same_dtype()},
      {"aten::conj_physical", conj_physical},
      {"aten::angle", angle},
  };
}

}  // namespace torch_pjrt::lowering
