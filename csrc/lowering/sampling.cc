// Grid sampling (grid_sampler_2d/3d and their backward passes), following
// ATen's GridSampler.h conventions.
//
// A grid coordinate is unnormalised to the input's pixel space, then
// clipped or reflected by the padding mode (bicubic applies the padding to
// each tap instead). Each interpolation mode gives, per spatial dim, a few
// taps: an index, a weight and the weight's derivative along that dim. The
// output sums input values over the cartesian product of the taps (gathers
// from the input viewed as [N*P, C]); the backward scatter-adds grad_output
// times the weights into grad_input and sums value * grad_output * d(weight)
// for grad_grid. Everything computes in the opmath type and rounds once.
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

// A coordinate and d(coordinate)/d(grid value).
struct Coord {
  Value x, grad;
};

// clip_coordinates_set_grad
Coord clip(hlo::Builder& b, Coord c, int64_t size) {
  Value zero = b.constant(0, c.x.dtype()), hi = b.constant(static_cast<double>(size - 1), c.x.dtype());
  Value inside = b.and_(b.compare(c.x, zero, "GT"), b.compare(c.x, hi, "LT"));
  return {b.clamp(zero, c.x, hi), b.select(inside, c.grad, b.full(0, c.grad.type))};
}

// reflect_coordinates_set_grad over [twice_low/2, twice_high/2]
Coord reflect(hlo::Builder& b, Coord c, int64_t twice_low, int64_t twice_high) {
  DType t = c.x.dtype();
  if (twice_low == twice_high) return {b.full(0, c.x.type), b.full(0, c.grad.type)};
  Value mn = b.constant(twice_low / 2.0, t), span = b.constant((twice_high - twice_low) / 2.0, t);
  Value in = b.sub(c.x, mn);
  Value neg = b.compare(in, b.constant(0, t), "LT");
  in = b.abs(in);
  Value extra = b.binary("stablehlo.remainder", in, span);
  Value flips = b.unary("stablehlo.floor", b.div(in, span));
  Value even = b.compare(b.binary("stablehlo.remainder", flips, b.constant(2, t)), b.constant(0, t), "EQ");
  Value x = b.select(even, b.add(extra, mn), b.add(b.sub(span, extra), mn));
  Value sign = b.select(neg, b.neg(c.grad), c.grad);
  return {x, b.select(even, sign, b.neg(sign))};
}

// compute_coordinates (with its gradient)
Coord pad_coord(hlo::Builder& b, Coord c, int64_t size, int64_t padding, bool align) {
  if (padding == kBorder) return clip(b, c, size);
  if (padding == kReflection) {
    c = align ? reflect(b, c, 0, 2 * (size - 1)) : reflect(b, c, -1, 2 * size - 1);
    return clip(b, c, size);
  }
  return c;
}

// grid_sampler_unnormalize (with its gradient)
Coord unnormalize(hlo::Builder& b, Value g, int64_t size, bool align) {
  DType t = g.dtype();
  Value one = b.constant(1, t);
  if (align)
    return {b.mul(b.div(b.add(g, one), b.constant(2, t)), b.constant(static_cast<double>(size - 1), t)),
            b.full((size - 1) / 2.0, g.type)};
  return {b.div(b.sub(b.mul(b.add(g, one), b.constant(static_cast<double>(size), t)), one), b.constant(2, t)),
          b.full(size / 2.0, g.type)};
}

// One tap along a dim: float index, whether it is in bounds, weight and
// d(weight)/d(unpadded coordinate).
struct Tap {
  Value idx, valid, w, dw;
};

struct DimTaps {
  std::vector<Tap> taps;
  Value gmult;  // d(coordinate)/d(grid value)
};

// A float index in [0, size) as the truncating cast reads it, or the floor.
Tap make_tap(hlo::Builder& b, Value xf, int64_t size, Value w, Value dw, bool truncate) {
  DType t = xf.dtype();
  Value lo = b.constant(truncate ? -1 : 0, t), hi = b.constant(static_cast<double>(size), t);
  Value valid = b.and_(b.compare(xf, lo, truncate ? "GT" : "GE"), b.compare(xf, hi, "LT"));
  Value idx = b.convert(b.clamp(b.constant(0, t), xf, b.constant(static_cast<double>(size - 1), t)), DType::I64);
  return {idx, valid, w, dw};
}

// cubic convolution weights (A = -0.75) and their derivatives in t
std::pair<Value, Value> cubic(hlo::Builder& b, Value t, int i) {
  DType d = t.dtype();
  auto c = [&](double v) { return b.constant(v, d); };
  const double A = -0.75;
  Value one = c(1);
  if (i == 0 || i == 3) {
    // cubic_convolution2(x) = ((A x - 5A) x + 8A) x - 4A, x = t + 1 or 2 - t
    Value x = i == 0 ? b.add(t, one) : b.sub(c(2), t);
    Value w = b.sub(b.mul(b.add(b.mul(b.sub(b.mul(c(A), x), c(5 * A)), x), c(8 * A)), x), c(4 * A));
    Value dx = b.add(b.mul(b.sub(b.mul(c(3 * A), x), c(10 * A)), x), c(8 * A));
    return {w, i == 0 ? dx : b.neg(dx)};
  }
  // cubic_convolution1(x) = ((A + 2) x - (A + 3)) x x + 1, x = t or 1 - t
  Value x = i == 1 ? t : b.sub(one, t);
  Value w = b.add(b.mul(b.mul(b.sub(b.mul(c(A + 2), x), c(A + 3)), x), x), one);
  Value dx = b.mul(b.sub(b.mul(c(3 * (A + 2)), x), c(2 * (A + 3))), x);
  return {w, i == 1 ? dx : b.neg(dx)};
}

DimTaps dim_taps(hlo::Builder& b, Value g, int64_t size, int64_t mode, int64_t padding, bool align) {
  DType t = g.dtype();
  DimTaps out;
  Coord c = unnormalize(b, g, size, align);
  if (mode == kBicubic) {
    out.gmult = c.grad;
    Value x0 = b.unary("stablehlo.floor", c.x);
    Value tt = b.sub(c.x, x0);
    for (int i = 0; i < 4; ++i) {
      auto [w, dw] = cubic(b, tt, i);
      Value xi = b.add(x0, b.constant(i - 1, t));
      Value xp = pad_coord(b, {xi, xi}, size, padding, align).x;
      out.taps.push_back(make_tap(b, xp, size, w, dw, true));
    }
    return out;
  }
  c = pad_coord(b, c, size, padding, align);
  out.gmult = c.grad;
  if (mode == kNearest) {
    Value xr = b.unary("stablehlo.round_nearest_even", c.x);
    out.taps.push_back(make_tap(b, xr, size, b.full(1, g.type), b.full(0, g.type), false));
    return out;
  }
  Value x0 = b.unary("stablehlo.floor", c.x), x1 = b.add(x0, b.constant(1, t));
  out.taps.push_back(make_tap(b, x0, size, b.sub(x1, c.x), b.full(-1, g.type), false));
  out.taps.push_back(make_tap(b, x1, size, b.sub(c.x, x0), b.full(1, g.type), false));
  return out;
}

// The sampling problem of one call: input as [N*P, C], grid coordinates as
// [N, Ot] per dim (dim 0 is x, the input's last dim), and the taps.
struct Problem {
  int64_t n, c, k, p, ot;
  Dims spatial, out_spatial;
  DType t;
  Value table;                // [N*P, C] in opmath
  std::vector<DimTaps> dims;  // per grid component
};

// CPU's checks in its order: the batch sizes (size(0) of a 0-d tensor is an
// IndexError), the grid's last size, non-empty spatial dims, the ranks, the
// dtype dispatch of `kernel` (floating only), then grid read as input's dtype.
Problem setup(Context& cx, size_t input_i, size_t grid_i, size_t mode_i, int64_t k, const std::string& kernel) {
  auto& b = cx.b;
  Value in = cx.tensor(input_i), grid = cx.tensor(grid_i);
  int64_t mode = cx.integer(mode_i), padding = cx.integer(mode_i + 1);
  bool align = cx.flag(mode_i + 2);
  if (size_at(cx, in, 0) != size_at(cx, grid, 0))
    cx.fail("grid_sampler(): expected grid and input to have same batch size, but got input with sizes " +
            dims_str(in.dims()) + " and grid with sizes " + dims_str(grid.dims()));
  if (size_at(cx, grid, -1) != in.rank() - 2)
    cx.fail("grid_sampler(): expected grid to have size " + std::to_string(in.rank() - 2) +
            " in last dimension, but got grid with sizes " + dims_str(grid.dims()));
  for (int64_t i = 2; i < in.rank(); ++i)
    if (in.dims()[i] <= 0)
      cx.fail("grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes " +
              dims_str(in.dims()) + " with dimension " + std::to_string(i) + " being empty");
  if (in.rank() != k + 2 || grid.rank() != k + 2)
    cx.fail("grid_sampler(): expected " + std::to_string(k + 2) +
            "D input and grid with same number of dimensions, but got input with sizes " + dims_str(in.dims()) +
            " and grid with sizes " + dims_str(grid.dims()));
  floating_kernel(cx, in.dtype(), kernel);
  if (in.dtype() != grid.dtype())
    cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(in.dtype())) + " but found " +
            std::string(hlo::scalar_type_name(grid.dtype())));
  if (mode < 0 || mode > 2 || (k == 3 && mode == kBicubic)) cx.fail("grid_sampler(): unsupported interpolation mode");
  if (padding < 0 || padding > 2) cx.fail("grid_sampler(): unsupported padding mode");
  Problem pr;
  pr.k = k;
  pr.n = in.dims()[0];
  pr.c = in.dims()[1];
  pr.spatial.assign(in.dims().begin() + 2, in.dims().end());
  pr.out_spatial.assign(grid.dims().begin() + 1, grid.dims().end() - 1);
  pr.p = 1;
  for (int64_t s : pr.spatial) pr.p *= s;
  pr.ot = 1;
  for (int64_t s : pr.out_spatial) pr.ot *= s;
  pr.t = hlo::opmath_type(float_type(in.dtype()));
  Dims perm = {0};
  for (int64_t i = 0; i < k; ++i) perm.push_back(i + 2);
  perm.push_back(1);
  pr.table = b.reshape(b.transpose(b.convert(in, pr.t), perm), {pr.n * pr.p, pr.c});
  Value g = b.reshape(b.convert(grid, pr.t), {pr.n, pr.ot, k});
  for (int64_t d = 0; d < k; ++d) {
    Value gd = b.reshape(b.slice(g, {0, 0, d}, {pr.n, pr.ot, d + 1}, {1, 1, 1}), {pr.n, pr.ot});
    pr.dims.push_back(dim_taps(b, gd, pr.spatial[k - 1 - d], mode, padding, align));
  }
  return pr;
}

// One corner of the tap product: flat row in the table, validity, weight
// and d(weight)/d(coordinate d) per dim.
struct Corner {
  Value row, valid, w;
  V dw;
};

std::vector<Corner> corners(hlo::Builder& b, const Problem& pr) {
  std::vector<Corner> out;
  std::vector<size_t> pick(pr.k, 0);
  Value base = b.mul(b.iota({DType::I64, {pr.n, pr.ot}}, 0), b.constant(static_cast<double>(pr.p), DType::I64));
  while (true) {
    Corner c;
    c.row = base;
    int64_t stride = 1;
    for (int64_t d = 0; d < pr.k; ++d) {
      const Tap& tp = pr.dims[d].taps[pick[d]];
      c.row = b.add(c.row, b.mul(tp.idx, b.constant(static_cast<double>(stride), DType::I64)));
      stride *= pr.spatial[pr.k - 1 - d];
      c.valid = d ? b.and_(c.valid, tp.valid) : tp.valid;
      c.w = d ? b.mul(c.w, tp.w) : tp.w;
    }
    for (int64_t d = 0; d < pr.k; ++d) {
      Value dw;
      for (int64_t e = 0; e < pr.k; ++e) {
        const Tap& tp = pr.dims[e].taps[pick[e]];
        Value f = e == d ? tp.dw : tp.w;
        dw = e ? b.mul(dw, f) : f;
      }
      c.dw.push_back(dw);
    }
    out.push_back(c);
    int64_t d = 0;
    while (d < pr.k && ++pick[d] == pr.dims[d].taps.size()) pick[d++] = 0;
    if (d == pr.k) break;
  }
  return out;
}

// Input values at a corner, [N, Ot, C], zero where out of bounds.
Value corner_values(hlo::Builder& b, const Problem& pr, const Corner& c) {
  Value v = b.take_along(pr.table, c.row, 0);
  Value valid = b.broadcast_in_dim(c.valid, {pr.n, pr.ot, pr.c}, {0, 1});
  return b.select(valid, v, b.full(0, v.type));
}

Value per_channel(hlo::Builder& b, const Problem& pr, Value x) {
  return b.broadcast_in_dim(x, {pr.n, pr.ot, pr.c}, {0, 1});
}

// [N, Ot, C] -> [N, C, out_spatial...]
Value to_output(hlo::Builder& b, const Problem& pr, Value x, DType dtype) {
  Dims d = {pr.n};
  for (int64_t s : pr.out_spatial) d.push_back(s);
  d.push_back(pr.c);
  Dims perm = {0, pr.k + 1};
  for (int64_t i = 0; i < pr.k; ++i) perm.push_back(i + 1);
  return b.convert(b.transpose(b.reshape(x, d), perm), dtype);
}

// grid_sampler_{2,3}d(input, grid, interpolation_mode, padding_mode, align_corners)
V grid_sampler(Context& cx, int64_t k) {
  auto& b = cx.b;
  Problem pr = setup(cx, 0, 1, 2, k, k == 2 ? "grid_sampler_2d_cpu_kernel_impl" : "grid_sampler3d_cpu");
  Value acc;
  bool first = true;
  for (const Corner& c : corners(b, pr)) {
    Value term = b.mul(corner_values(b, pr, c), per_channel(b, pr, c.w));
    acc = first ? term : b.add(acc, term);
    first = false;
  }
  return {to_output(b, pr, acc, cx.tensor(0).dtype())};
}

// grid_sampler_{2,3}d_backward(grad_output, input, grid, interpolation_mode,
//   padding_mode, align_corners, output_mask) -> (grad_input, grad_grid)
V grid_sampler_backward(Context& cx, int64_t k) {
  auto& b = cx.b;
  Value in = cx.tensor(1), grid = cx.tensor(2);
  Problem pr =
      setup(cx, 1, 2, 3, k, k == 2 ? "grid_sampler_2d_backward_cpu_kernel_impl" : "grid_sampler_3d_backward_cpu");
  // grad_output [N, C, out...] -> [N, Ot, C]
  Dims perm = {0};
  for (int64_t i = 0; i < k; ++i) perm.push_back(i + 2);
  perm.push_back(1);
  Value go = b.reshape(b.transpose(cx.as(0, pr.t), perm), {pr.n, pr.ot, pr.c});
  bool nearest = cx.integer(3) == kNearest;

  std::vector<Corner> cs = corners(b, pr);
  V rows, updates, gsum(k);
  for (const Corner& c : cs) {
    Value wm = b.select(c.valid, c.w, b.full(0, c.w.type));
    rows.push_back(c.row);
    updates.push_back(b.mul(go, per_channel(b, pr, wm)));
    if (nearest) continue;
    Value s = b.reduce(b.mul(corner_values(b, pr, c), go), b.constant(0, pr.t), {2}, "stablehlo.add");
    for (int64_t d = 0; d < k; ++d) {
      Value term = b.mul(s, c.dw[d]);
      gsum[d] = gsum[d].id < 0 ? term : b.add(gsum[d], term);
    }
  }
  int64_t m = pr.n * pr.ot * static_cast<int64_t>(cs.size());
  Value index = b.reshape(b.concatenate(rows, 1), {m, 1});
  Value upd = b.reshape(b.concatenate(updates, 1), {m, pr.c});
  Value gi = b.scatter(b.full(0, pr.table.type), index, upd, {1}, {0}, {0}, "stablehlo.add");
  Dims sp = {pr.n};
  for (int64_t s : pr.spatial) sp.push_back(s);
  sp.push_back(pr.c);
  Dims back = {0, k + 1};
  for (int64_t i = 0; i < k; ++i) back.push_back(i + 1);
  gi = b.convert(b.transpose(b.reshape(gi, sp), back), in.dtype());

  Value gg;
  if (nearest) {
    gg = b.full(0, grid.type);
  } else {
    V comps;
    for (int64_t d = 0; d < k; ++d) comps.push_back(b.reshape(b.mul(pr.dims[d].gmult, gsum[d]), {pr.n, pr.ot, 1}));
    gg = b.convert(b.reshape(b.concatenate(comps, 2), grid.dims()), grid.dtype());
  }
  return {gi, gg};
}

V grid_sampler_2d(Context& cx) { return grid_sampler(cx, 2); }
V grid_sampler_3d(Context& cx) { return grid_sampler(cx, 3); }
V grid_sampler_2d_backward(Context& cx) { return grid_sampler_backward(cx, 2); }
V grid_sampler_3d_backward(Context& cx) { return grid_sampler_backward(cx, 3); }

}  // namespace

std::vector<Entry> sampling_lowerings() {
  return {
      {"aten::grid_sampler_2d", grid_sampler_2d},
      {"aten::grid_sampler_3d", grid_sampler_3d},
      {"aten::grid_sampler_2d_backward", grid_sampler_2d_backward},
      {"aten::grid_sampler_3d_backward", grid_sampler_3d_backward},
  };
}

}  // namespace torch_pjrt::lowering
