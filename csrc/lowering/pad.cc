// Padding: constant_pad_nd (negative pads crop), and reflection and
// replication padding (1d, 2d, 3d) with their backward passes.
//
// Each padded dim maps every output position to one input position (static
// index arithmetic on an iota): reflect mirrors about the edge without
// repeating it, replicate clamps to the edge. The forward gathers along that
// map; the backward sums the gradient of every output position into its
// source with a one-hot [out, in] matrix per dim, in the compute dtype.
// Negative padding crops, as on CPU.
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// ---- constant

// pad = [last_lo, last_hi, second_last_lo, ...]; negative entries crop.
V constant_pad_nd(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  const auto& pad = cx.ints(1);
  int64_t r = x.rank();
  if (pad.size() % 2) cx.fail("Length of pad must be even but instead it equals " + std::to_string(pad.size()));
  if (static_cast<int64_t>(pad.size() / 2) > r)
    cx.fail("Length of pad should be no more than twice the number of dimensions of the input. Pad length is " +
            std::to_string(pad.size()) + " while the input has " + std::to_string(r) + " dimensions.");
  Dims lo(r, 0), hi(r, 0);
  for (size_t j = 0; j < pad.size() / 2; ++j) {
    lo[r - 1 - j] = pad[2 * j];
    hi[r - 1 - j] = pad[2 * j + 1];
  }
  Dims plo(r), phi(r);
  bool any_pad = false, any_crop = false;
  for (int64_t d = 0; d < r; ++d) {
    if (x.dims()[d] + lo[d] + hi[d] < 0)
      cx.fail("The input size " + std::to_string(x.dims()[d]) + ", plus negative padding " + std::to_string(lo[d]) +
              " and " + std::to_string(hi[d]) +
              " resulted in a negative output size, which is invalid. Check dimension " + std::to_string(d) +
              " of your input.");
    plo[d] = std::max<int64_t>(lo[d], 0);
    phi[d] = std::max<int64_t>(hi[d], 0);
    any_pad |= plo[d] || phi[d];
    any_crop |= lo[d] < 0 || hi[d] < 0;
  }
  // Pad the positive sides first, then crop the negative ones: a crop may
  // reach into the padding of the other side.
  if (any_pad) {
    Value v = cx.none(2) ? b.constant(0, x.dtype()) : cx.as(2, x.dtype());
    x = b.pad(x, v, plo, phi, Dims(r, 0));
  }
  if (any_crop) {
    Dims start(r), limit(r);
    for (int64_t d = 0; d < r; ++d) {
      start[d] = std::max<int64_t>(-lo[d], 0);
      limit[d] = x.dims()[d] - std::max<int64_t>(-hi[d], 0);
    }
    x = b.slice(x, start, limit, Dims(r, 1));
  }
  return {x};
}

// ---- reflection and replication

// One padded dim: its position in the input, input size and the pads.
struct PadDim {
  int64_t dim, n, lo, hi;
  int64_t out() const { return n + lo + hi; }
};

// The padded dims of `x` for a [lo_last, hi_last, lo_prev, hi_prev, ...]
// padding of `k` dims (the last k of x), checked as PyTorch checks them.
std::vector<PadDim> pad_dims(Context& cx, const Value& x, const std::vector<int64_t>& padding, int64_t k, bool reflect,
                             bool forward = false) {
  if (static_cast<int64_t>(padding.size()) != 2 * k)
    cx.fail("padding size is expected to be " + std::to_string(2 * k) + ", but got: " + std::to_string(padding.size()));
  bool zero = false;  // the forward's check_valid_input: only a batch dim may be 0
  if (forward)
    for (int64_t d = x.rank() == k + 2 ? 1 : 0; d < x.rank(); ++d) zero = zero || x.dims()[d] == 0;
  if ((x.rank() != k + 1 && x.rank() != k + 2) || zero)
    cx.fail("Expected " + std::to_string(k + 1) + "D or " + std::to_string(k + 2) +
            "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: " +
            dims_str(x.dims()));
  std::vector<PadDim> out;
  for (int64_t i = 0; i < k; ++i) {
    int64_t dim = x.rank() - 1 - i;
    PadDim p{dim, x.dims()[dim], padding[2 * i], padding[2 * i + 1]};
    if (reflect && (p.lo >= p.n || p.hi >= p.n))
      cx.fail("Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (" +
              std::to_string(p.lo) + ", " + std::to_string(p.hi) + ") at dimension " + std::to_string(dim) +
              " of input " + dims_str(x.dims()));
    if (p.out() < 1)
      cx.fail("input " + dims_str(x.dims()) + " is too small. Calculated output size " + std::to_string(p.out()) +
              " at dimension " + std::to_string(dim));
    if (p.n < 1) cx.fail("input " + dims_str(x.dims()) + " has an empty padded dimension " + std::to_string(dim));
    out.push_back(p);
  }
  return out;
}

// The input position (i64 [out]) each output position of `p` reads.
Value source_index(hlo::Builder& b, const PadDim& p, bool reflect) {
  Value o = b.iota({DType::I64, {p.out()}}, 0);
  Value j = b.sub(o, b.constant(static_cast<double>(p.lo), DType::I64));
  Value last = b.constant(static_cast<double>(p.n - 1), DType::I64);
  if (reflect) return b.sub(last, b.abs(b.sub(last, b.abs(j))));
  return b.clamp(b.constant(0, DType::I64), j, last);
}

// The ATen name of the op, e.g. "reflection_pad2d".
std::string pad_name(int64_t k, bool reflect) {
  return std::string(reflect ? "reflection" : "replication") + "_pad" + std::to_string(k) + "d";
}

// (self, padding); CPU's kernels take every dtype but bool.
Value pad_forward(Context& cx, int64_t k, bool reflect) {
  Value x = cx.tensor(0);
  std::vector<PadDim> ps = pad_dims(cx, x, cx.ints(1), k, reflect, true);
  if (x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), pad_name(k, reflect));
  for (const PadDim& p : ps) x = cx.b.take_along(x, source_index(cx.b, p, reflect), p.dim);
  return x;
}

// What CPU's pad backward kernels check before (or instead of) the input's
// rank: the padding's length (not reflection_pad1d/2d), then the input's
// size at each padded dim (outermost first; one dim further in when the
// input has a batch dim), reflection_pad1d's padding bound, then
// grad_output's size at each padded dim (innermost first). A size read out
// of range raises IndexError, as Tensor::size does.
void pad_backward_checks(Context& cx, const Value& g, const Value& x, const std::vector<int64_t>& padding, int64_t k,
                         bool reflect) {
  if ((!reflect || k == 3) && static_cast<int64_t>(padding.size()) != 2 * k)
    cx.fail("padding size is expected to be " + std::to_string(2 * k));
  if (static_cast<int64_t>(padding.size()) < 2 * k) return;  // CPU reads past the end; the rank check below refuses
  if (reflect && k == 3) {
    if (x.rank() <= 3) cx.fail("Expected input.dim() > 3 to be true, but got false.");
    if (g.rank() != x.rank()) cx.fail("Expected grad_output.dim() == input.dim() to be true, but got false.");
  }
  int64_t batch = x.rank() == k + 2 ? 1 : 0;
  std::vector<int64_t> in(k);
  for (int64_t j = 0; j < k; ++j) in[j] = size_at(cx, x, 1 + j + batch);
  if (reflect && k == 1 && (padding[0] >= in[0] || padding[1] >= in[0]))
    cx.fail("Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (" +
            std::to_string(padding[0]) + ", " + std::to_string(padding[1]) + ") at dimension " +
            std::to_string(1 + batch) + " of input " + dims_str(x.dims()));
  const char* names[] = {"width", "height", "depth"};
  std::string grad = reflect && k != 2 ? "grad_output" : "gradOutput";
  for (int64_t i = 0; i < k; ++i) {  // w, h, d
    int64_t j = k - 1 - i, want = in[j] + padding[2 * i] + padding[2 * i + 1];
    int64_t got = size_at(cx, g, 1 + j + batch);
    if (got != want)
      cx.fail(grad + " " + names[i] + " unexpected. Expected: " + std::to_string(want) +
              ", Got: " + std::to_string(got));
  }
}

// (grad_output, self, padding)
Value pad_backward(Context& cx, int64_t k, bool reflect) {
  auto& b = cx.b;
  Value self = cx.tensor(1), grad = cx.tensor(0);
  pad_backward_checks(cx, grad, self, cx.ints(2), k, reflect);
  DType out = cx.result_type({0, 1}), t = hlo::opmath_type(out);
  std::vector<PadDim> ps = pad_dims(cx, self, cx.ints(2), k, reflect);
  Dims expected = self.dims();
  for (const PadDim& p : ps) expected[p.dim] = p.out();
  if (grad.dims() != expected)
    cx.fail("grad_output has shape " + dims_str(grad.dims()) + ", expected " + dims_str(expected));
  // the kernels take floating and complex dtypes; an empty input or grad returns first
  if (grad.type.numel() != 0 && self.type.numel() != 0 && !hlo::is_floating(grad.dtype()) &&
      !hlo::is_complex(grad.dtype()))
    refuse_dtype(cx, grad.dtype(), pad_name(k, reflect) + "_backward");
  Value g = cx.as(0, t);
  for (const PadDim& p : ps) {
    TensorType m{DType::I64, {p.out(), p.n}};
    Value src = b.broadcast_in_dim(source_index(b, p, reflect), m.dims, {0});
    Value onehot = b.convert(b.compare(src, b.iota(m, 1), "EQ"), t);
    // [.., out, ..] x [out, n] -> [.. without dim .., n], then n back at dim
    Value r = b.dot_general(g, onehot, {}, {}, {p.dim}, {0}, t);
    Dims perm;
    for (int64_t i = 0; i < g.rank() - 1; ++i) {
      if (i == p.dim) perm.push_back(g.rank() - 1);
      perm.push_back(i);
    }
    if (p.dim == g.rank() - 1) perm.push_back(g.rank() - 1);
    g = b.transpose(r, perm);
  }
  return b.convert(g, out);
}

template <int K, bool Reflect>
V pad_fwd(Context& cx) {
  return {pad_forward(cx, K, Reflect)};
}
template <int K, bool Reflect>
V pad_bwd(Context& cx) {
  return {pad_backward(cx, K, Reflect)};
}

}  // namespace

std::vector<Entry> pad_lowerings() {
  return {
      {"aten::constant_pad_nd", constant_pad_nd},
      {"aten::reflection_pad1d", pad_fwd<1, true>},
      {"aten::reflection_pad2d", pad_fwd<2, true>},
      {"aten::reflection_pad3d", pad_fwd<3, true>},
      {"aten::reflection_pad1d_backward", pad_bwd<1, true>},
      {"aten::reflection_pad2d_backward", pad_bwd<2, true>},
      {"aten::reflection_pad3d_backward", pad_bwd<3, true>},
      {"aten::replication_pad1d", pad_fwd<1, false>},
      {"aten::replication_pad2d", pad_fwd<2, false>},
      {"aten::replication_pad3d", pad_fwd<3, false>},
      {"aten::replication_pad1d_backward", pad_bwd<1, false>},
      {"aten::replication_pad2d_backward", pad_bwd<2, false>},
      {"aten::replication_pad3d_backward", pad_bwd<3, false>},
  };
}

}  // namespace torch_pjrt::lowering
