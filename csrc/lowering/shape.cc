// Shape ops: concatenation, flips and rolls, triangular masks, repeats,
// unfold's backward and channel_shuffle. Padding is in pad.cc, indexing and
// scatter in indexing.cc, sorting in sorting.cc.
#include <algorithm>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

V cat(Context& cx) {
  auto& b = cx.b;
  const auto& all = cx.tensors(0);
  if (all.empty()) cx.fail("expected a non-empty list of Tensors");
  DType t = all[0].dtype();
  for (const Value& x : all) t = hlo::promote_types(t, x.dtype());
  // Legacy behaviour: 1-D empty tensors are skipped whatever the other shapes.
  std::vector<Value> xs;
  std::vector<size_t> pos;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].rank() == 1 && all[i].dims()[0] == 0) continue;
    xs.push_back(b.convert(all[i], t));
    pos.push_back(i);
  }
  if (xs.empty()) return {b.full(0, TensorType{t, {0}})};
  if (xs[0].rank() == 0)
    cx.fail("zero-dimensional tensor (at position " + std::to_string(pos[0]) + ") cannot be concatenated");
  int64_t dim = cx.dim(cx.integer_or(1, 0), xs[0].rank());
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].rank() != xs[0].rank())
      cx.fail("Tensors must have same number of dimensions: got " + std::to_string(xs[0].rank()) + " and " +
              std::to_string(xs[i].rank()));
    for (int64_t d = 0; d < xs[0].rank(); ++d)
      if (d != dim && xs[i].dims()[d] != xs[0].dims()[d])
        cx.fail("Sizes of tensors must match except in dimension " + std::to_string(dim) + ". Expected size " +
                std::to_string(xs[0].dims()[d]) + " but got size " + std::to_string(xs[i].dims()[d]) +
                " for tensor number " + std::to_string(pos[i]) + " in the list.");
  }
  return {b.concatenate(xs, dim)};
}

V flip(Context& cx) {
  Value x = cx.tensor(0);
  Dims ds = cx.dims(cx.ints(1), x.rank());
  std::sort(ds.begin(), ds.end());
  if (std::adjacent_find(ds.begin(), ds.end()) != ds.end())
    cx.fail("dims has duplicates, original flip dims size=" + std::to_string(ds.size()));
  if (x.rank() == 0 || ds.empty()) return {x};
  return {cx.b.op("stablehlo.reverse", {x}, x.type, "dimensions = " + i64_array(ds))};
}

// x rolled by `shift` along `dim`: element i moves to (i + shift) mod n.
Value roll_dim(hlo::Builder& b, Value x, int64_t shift, int64_t dim) {
  int64_t n = x.dims()[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims zero(x.rank(), 0), one(x.rank(), 1), mid_start = zero, mid_limit = x.dims();
  mid_start[dim] = n - s;
  mid_limit[dim] = n - s;
  Value tail = b.slice(x, mid_start, x.dims(), one);
  Value head = b.slice(x, zero, mid_limit, one);
  return b.concatenate({tail, head}, dim);
}

V roll(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  const auto& shifts = cx.ints(1);
  std::vector<int64_t> dims = cx.none(2) ? std::vector<int64_t>{} : cx.ints(2);
  if (dims.empty()) {
    if (shifts.size() != 1)
      cx.fail("shifts must be of size 1 when dims is empty, got " + std::to_string(shifts.size()));
    Value flat = b.reshape(x, {x.type.numel()});
    return {b.reshape(roll_dim(b, flat, shifts[0], 0), x.dims())};
  }
  if (shifts.size() != dims.size())
    cx.fail("shifts and dimensions must align. shifts: " + std::to_string(shifts.size()) +
            ", dims:" + std::to_string(dims.size()));
  if (x.rank() == 0)
    cx.fail("Dimension specified as " + std::to_string(dims[0]) + " but tensor has no dimensions", ErrorKind::Index);
  for (size_t i = 0; i < dims.size(); ++i) x = roll_dim(b, x, shifts[i], cx.dim(dims[i], x.rank()));
  return {x};
}

// Keeps the elements on and below (tril) or on and above (triu) the
// `diagonal`-th diagonal of the last two dims, zeroing the rest.
Value triangle(Context& cx, bool lower) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  if (x.rank() < 2) cx.fail("input tensor must have at least 2 dimensions");
  int64_t k = cx.integer_or(1, 0);
  TensorType t{DType::I64, {x.dims()[x.rank() - 2], x.dims()[x.rank() - 1]}};
  Value col_minus_row = b.sub(b.iota(t, 1), b.iota(t, 0));
  Value keep = b.compare(col_minus_row, b.constant(k, DType::I64), lower ? "LE" : "GE");
  return b.select(keep, x, scalar_like(cx, 0, x));
}
V tril(Context& cx) { return {triangle(cx, true)}; }
V triu(Context& cx) { return {triangle(cx, false)}; }

V repeat(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  const auto& reps = cx.ints(1);
  int64_t n = static_cast<int64_t>(reps.size());
  if (n < x.rank())
    cx.fail("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  for (int64_t r : reps)
    if (r < 0) cx.fail("Trying to create tensor with negative dimension " + std::to_string(r));
  if (n == 0) return {x};
  Dims padded(n - x.rank(), 1);
  padded.insert(padded.end(), x.dims().begin(), x.dims().end());
  // [r0, s0, r1, s1, ...] with x along the odd dims, then merge each pair.
  Dims big, bdims, out;
  for (int64_t i = 0; i < n; ++i) {
    big.push_back(reps[i]);
    big.push_back(padded[i]);
    bdims.push_back(2 * i + 1);
    out.push_back(reps[i] * padded[i]);
  }
  return {b.reshape(b.broadcast_in_dim(b.reshape(x, padded), big, bdims), out)};
}

// unfold_backward(grad_in, input_sizes, dim, size, step): the windows of
// x.unfold(dim, size, step) summed back into x's shape. Element k of every
// window is one strided slice of the input, so each k is an interior pad.
V unfold_backward(Context& cx) {
  auto& b = cx.b;
  Value g = cx.tensor(0);
  Dims in = cx.ints(1);
  int64_t r = static_cast<int64_t>(in.size());
  int64_t size = cx.integer(3), step = cx.integer(4);
  // TORCH_CHECK_VALUE in ATen, before the dim is wrapped.
  if (step <= 0) cx.fail("step is " + std::to_string(step) + " but must be > 0", ErrorKind::Value);
  int64_t dim = r == 0 ? 0 : cx.dim(cx.integer(2), r);
  DType t = hlo::opmath_type(g.dtype());
  Dims shape = r == 0 ? Dims{1} : in;
  int64_t len = shape[dim];
  int64_t windows = g.rank() == 0 ? 1 : g.dims()[r == 0 ? 0 : dim];
  Dims gshape = shape;
  gshape[dim] = windows;
  gshape.push_back(size);
  Value gr = b.reshape(b.convert(g, t), gshape);
  Value acc = b.full(0, TensorType{t, shape});
  if (windows > 0 && numel(shape) > 0) {
    int64_t rk = static_cast<int64_t>(shape.size());
    for (int64_t k = 0; k < size; ++k) {
      Dims start(rk + 1, 0), limit = gshape, strides(rk + 1, 1);
      start[rk] = k;
      limit[rk] = k + 1;
      Value part = b.reshape(b.slice(gr, start, limit, strides), with_dim(shape, dim, windows));
      Dims lo(rk, 0), hi(rk, 0), interior(rk, 0);
      lo[dim] = k;
      interior[dim] = step - 1;
      hi[dim] = len - k - ((windows - 1) * step + 1);
      acc = b.add(acc, b.pad(part, b.constant(0, t), lo, hi, interior));
    }
  }
  return {b.reshape(b.convert(acc, g.dtype()), in)};
}

// channel_shuffle(self, groups): [N, C, *] viewed as [N, g, C / g, *],
// groups and channels-per-group swapped.
V channel_shuffle(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t g = cx.integer(1);
  if (x.rank() <= 2) cx.fail("channel_shuffle expects input to have at least 3 dimensions");
  if (g <= 0) cx.fail("Number of groups to divide channels in must be positive. Value of groups:" + std::to_string(g));
  int64_t c = x.dims()[1];
  if (c % g)
    cx.fail("Number of channels must be divisible by groups. Got " + std::to_string(c) + " channels and " +
            std::to_string(g) + " groups.");
  Dims split{x.dims()[0], g, c / g};
  Dims perm{0, 2, 1};
  for (int64_t i = 2; i < x.rank(); ++i) {
    split.push_back(x.dims()[i]);
    perm.push_back(i + 1);
  }
  return {b.reshape(b.transpose(b.reshape(x, split), perm), x.dims())};
}

}  // namespace

std::vector<Entry> shape_lowerings() {
  return {
      {"aten::cat", cat, Traits().set_out_sized_first().set_shape_generic()},
      {"aten::flip", flip, Traits().set_out_same_dtype()},
      {"aten::roll", roll},
      {"aten::tril", tril, Traits().set_overlap_allowed()},
      {"aten::triu", triu, Traits().set_overlap_allowed()},
      {"aten::repeat", repeat, Traits().set_out_same_dtype().set_partial_overlap_allowed()},
      {"aten::unfold_backward", unfold_backward},
      {"aten::channel_shuffle", channel_shuffle, Traits().set_out_same_dtype()},
  };
}

}  // namespace torch_pjrt::lowering
