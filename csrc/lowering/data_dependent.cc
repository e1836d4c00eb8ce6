// Data-dependent ops: nonzero, masked_select/masked_scatter, unique, equal,
// repeat_interleave and bincount.
//
// Ops whose output size depends on the data (nonzero, masked_select, unique)
// are compiled once per input shape, never per count: the lowering returns
// results padded to the largest possible size and, as its last result, a
// rank-0 i64 count. The torch glue (Traits::narrowed) reads the count at a
// sync point and narrows the padded results to it, a metadata-only view.
// Ops whose output size is a function of a value the glue reads first
// (repeat_interleave's output_size, bincount's minlength: Traits::prepare)
// take that size as a static argument.
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// Inclusive prefix sum of a 1-D i64 vector (a reduce_window whose window
// spans the whole vector, padded on the low side).
Value prefix_sum(hlo::Builder& b, Value x) {
  int64_t n = x.dims()[0];
  if (n <= 1) return x;
  std::string attrs = "window_dimensions = array<i64: " + std::to_string(n) +
                      ">, window_strides = array<i64: 1>, padding = dense<[[" + std::to_string(n - 1) +
                      ", 0]]> : tensor<1x2xi64>";
  TensorType scalar{x.dtype(), {}};
  return b.op_multi(
      "stablehlo.reduce_window", {x, b.constant(0, x.dtype())}, {x.type}, attrs,
      {{{scalar, scalar}, [](hlo::Builder& b, const std::vector<Value>& a) { return V{b.add(a[0], a[1])}; }}})[0];
}

// Rank-0 i64: the number of true elements of the 1-D i1 `mask`.
Value count_true(hlo::Builder& b, Value mask) {
  return b.reduce(b.convert(mask, DType::I64), b.constant(0, DType::I64), {0}, "stablehlo.add");
}

// `base` (rows [m, ...]) with the rows of `rows` ([n, ...]) whose `mask`
// ([n] i1) is true written to rows 0, 1, ... in order. Rows past m are
// dropped (their scatter index is out of range, which scatter skips).
Value compact(hlo::Builder& b, Value mask, Value rows, Value base) {
  int64_t n = mask.dims()[0], m = base.dims()[0];
  Value ones = b.convert(mask, DType::I64);
  Value before = b.sub(prefix_sum(b, ones), ones);  // true elements before each one
  Value target = b.select(mask, before, b.full(static_cast<double>(m), TensorType{DType::I64, {n}}));
  Dims window;
  for (int64_t d = 1; d < rows.rank(); ++d) window.push_back(d);
  return b.scatter(base, b.reshape(target, {n, 1}), rows, window, {0}, {0}, "");
}

// x != 0 as i1, flattened.
Value flat_nonzero(hlo::Builder& b, Value x) {
  Value ne = b.compare(x, b.constant(0, x.dtype()), "NE");
  return b.reshape(ne, {x.type.numel()});
}

// [n, rank] i64: the coordinates of each element of a tensor of `dims`, in
// row-major order.
Value coordinates(hlo::Builder& b, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<Value> parts;
  for (size_t d = 0; d < dims.size(); ++d)
    parts.push_back(b.reshape(b.iota(TensorType{DType::I64, dims}, static_cast<int64_t>(d)), {n, 1}));
  return b.concatenate(parts, 1);
}

// nonzero(self) -> padded [numel, rank] i64 coordinates, count.
V nonzero(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t n = x.type.numel(), r = x.rank();
  TensorType out{DType::I64, {n, r}};
  if (n == 0) return {b.full(0, out), b.constant(0, DType::I64)};
  Value mask = flat_nonzero(b, x);
  Value count = count_true(b, mask);
  if (r == 0) return {b.full(0, out), count};
  return {compact(b, mask, coordinates(b, x.dims()), b.full(0, out)), count};
}

// nonzero_static(self, *, size, fill_value=-1): the first `size` rows of
// nonzero, padded with fill_value. Its size is static: no sync point.
V nonzero_static(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t size = cx.integer(1), fill = cx.integer_or(2, -1), n = x.type.numel(), r = x.rank();
  if (size < 0) cx.fail("nonzero_static: 'size' must be an non-negative integer");
  TensorType out{DType::I64, {size, r}};
  Value base = b.full(static_cast<double>(fill), out);
  if (n == 0 || size == 0 || r == 0) return {base};
  return {compact(b, flat_nonzero(b, x), coordinates(b, x.dims()), base)};
}

// self and mask broadcast together; mask must be bool.
std::pair<Value, Value> broadcast_masked(Context& cx, const char* what) {
  auto& b = cx.b;
  Value self = cx.tensor(0), mask = cx.tensor(1);
  if (mask.dtype() != DType::Bool) cx.fail(std::string(what) + ": expected BoolTensor for mask");
  Dims shape;
  try {
    shape = hlo::broadcast_shapes(self.dims(), mask.dims());
  } catch (const hlo::BuildError&) {
    cx.fail(std::string(what) + ": the shape of the mask does not broadcast with the shape of self");
  }
  return {b.broadcast_to(self, shape), b.broadcast_to(mask, shape)};
}

// masked_select(self, mask) -> padded [numel] values, count.
V masked_select(Context& cx) {
  auto& b = cx.b;
  auto [x, mask] = broadcast_masked(cx, "masked_select");
  int64_t n = x.type.numel();
  TensorType out{x.dtype(), {n}};
  if (n == 0) return {b.full(0, out), b.constant(0, DType::I64)};
  Value m = b.reshape(mask, {n});
  return {compact(b, m, b.reshape(x, {n}), b.full(0, out)), count_true(b, m)};
}

// masked_scatter(self, mask, source): the masked positions of self take the
// elements of source in order. The output size is static.
V masked_scatter(Context& cx) {
  auto& b = cx.b;
  auto [x, mask] = broadcast_masked(cx, "masked_scatter");
  Value src = cx.tensor(2);
  if (src.dtype() != x.dtype())
    cx.fail("masked_scatter_: expected self and source to have same dtypes but got " +
            std::string(hlo::dtype_name(x.dtype())) + " and " + std::string(hlo::dtype_name(src.dtype())));
  int64_t n = x.type.numel(), s = src.type.numel();
  if (n == 0) return {x};
  Value m = b.reshape(mask, {n});
  Value ones = b.convert(m, DType::I64);
  Value before = b.sub(prefix_sum(b, ones), ones);
  Value bad = b.reduce(b.and_(m, b.compare(before, b.constant(static_cast<double>(s), DType::I64), "GE")),
                       b.constant(0, DType::Bool), {0}, "stablehlo.or");
  cx.check(bad, "masked_scatter: Number of elements of source < number of ones in mask", ErrorKind::Runtime);
  if (s == 0) return {x};  // every true mask element fails the check
  Value idx = b.clamp(b.constant(0, DType::I64), before, b.constant(static_cast<double>(s - 1), DType::I64));
  Value taken = b.take_along(b.reshape(src, {s}), idx, 0);
  return {b.reshape(b.select(m, taken, b.reshape(x, {n})), x.dims())};
}

// equal(self, other) -> rank-0 i1; the glue reads it (a sync point) and
// returns a Python bool. Different shapes are unequal; dtypes are promoted.
V equal(Context& cx) {
  auto& b = cx.b;
  if (cx.tensor(0).dims() != cx.tensor(1).dims()) return {b.constant(0, DType::Bool)};
  auto [x, y] = promote(cx, 0, 1);
  if (x.type.numel() == 0) return {b.constant(1, DType::Bool)};
  Value eq = b.compare(x, y, "EQ");
  return {b.reduce(eq, b.constant(1, DType::Bool), iota_dims(eq.rank()), "stablehlo.and")};
}

// ---- unique

// Stable ascending sort of a 1-D vector: {values, source positions}. NaN
// sorts last, as in PyTorch.
std::pair<Value, Value> sort_1d(hlo::Builder& b, Value x) {
  Value pos = b.iota(TensorType{DType::I64, x.dims()}, 0);
  TensorType s{x.dtype(), {}}, si{DType::I64, {}};
  bool fp = hlo::is_floating(x.dtype());
  hlo::Builder::RegionFn less = [fp](hlo::Builder& b, const std::vector<Value>& a) {
    Value lt = b.compare(a[0], a[1], "LT");
    if (fp) lt = b.or_(lt, b.and_(b.compare(a[1], a[1], "NE"), b.compare(a[0], a[0], "EQ")));
    return V{lt};
  };
  auto r = b.op_multi("stablehlo.sort", {x, pos}, {x.type, pos.type}, "dimension = 0 : i64, is_stable = true",
                      {{{s, s, si, si}, less}});
  return {r[0], r[1]};
}

// Runs of equal consecutive rows of `v` ([n] elements or [n, m] rows,
// n > 0): {padded first-of-run rows, group id of each row [n], padded run
// lengths [n], number of runs}.
struct Runs {
  Value values, group, counts, count;
};
Runs runs(hlo::Builder& b, Value v) {
  int64_t n = v.dims()[0];
  Value is_new = b.full(1, TensorType{DType::Bool, {1}});
  if (n > 1) {
    Dims lo(v.rank(), 0), hi = v.dims(), one(v.rank(), 1);
    lo[0] = 1;
    Value cur = b.slice(v, lo, hi, one);
    lo[0] = 0;
    hi[0] = n - 1;
    Value ne = b.compare(cur, b.slice(v, lo, hi, one), "NE");
    if (ne.rank() == 2) ne = b.reduce(ne, b.constant(0, DType::Bool), {1}, "stablehlo.or");
    is_new = b.concatenate({is_new, ne}, 0);
  }
  Runs r;
  r.group = b.sub(prefix_sum(b, b.convert(is_new, DType::I64)), b.full(1, TensorType{DType::I64, {n}}));
  r.values = v.type.numel() == 0 ? b.full(0, v.type) : compact(b, is_new, v, b.full(0, v.type));
  r.counts = b.scatter(b.full(0, TensorType{DType::I64, {n}}), b.reshape(r.group, {n, 1}),
                       b.full(1, TensorType{DType::I64, {n}}), {}, {0}, {0}, "stablehlo.add");
  r.count = count_true(b, is_new);
  return r;
}

// x with `dim` moved to the front and the other dims flattened: [n, m].
Dims front_perm(int64_t rank, int64_t dim) {
  Dims perm{dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) perm.push_back(d);
  return perm;
}
Value rows_along(hlo::Builder& b, Value x, int64_t dim) {
  int64_t n = x.dims()[dim];
  Value t = b.transpose(x, front_perm(x.rank(), dim));
  return b.reshape(t, {n, n == 0 ? 0 : x.type.numel() / n});
}
// The inverse of rows_along for rows [k, m]: a tensor of x's shape with k
// along `dim`.
Value unrows(hlo::Builder& b, Value rows, const Dims& x_dims, int64_t dim) {
  Dims perm = front_perm(static_cast<int64_t>(x_dims.size()), dim), shape;
  for (int64_t d : perm) shape.push_back(d == dim ? rows.dims()[0] : x_dims[d]);
  Dims inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return b.transpose(b.reshape(rows, shape), inv);
}

// Stable lexicographic ascending sort of rows [n, m]: the source position
// of each sorted row.
Value sort_rows(hlo::Builder& b, Value rows) {
  int64_t n = rows.dims()[0], m = rows.dims()[1];
  std::vector<Value> ops;
  std::vector<TensorType> types, scalars;
  for (int64_t c = 0; c < m; ++c) {
    ops.push_back(b.reshape(b.slice(rows, {0, c}, {n, c + 1}, {1, 1}), {n}));
    types.push_back(ops.back().type);
  }
  ops.push_back(b.iota(TensorType{DType::I64, {n}}, 0));
  types.push_back(ops.back().type);
  for (const auto& t : types) {
    scalars.push_back(TensorType{t.dtype, {}});
    scalars.push_back(TensorType{t.dtype, {}});
  }
  hlo::Builder::RegionFn less = [m](hlo::Builder& b, const std::vector<Value>& a) {
    Value lt = b.constant(0, DType::Bool);
    for (int64_t c = m - 1; c >= 0; --c) {
      Value x = a[2 * c], y = a[2 * c + 1];
      lt = b.or_(b.compare(x, y, "LT"), b.and_(b.compare(x, y, "EQ"), lt));
    }
    return V{lt};
  };
  return b.op_multi("stablehlo.sort", ops, types, "dimension = 0 : i64, is_stable = true", {{scalars, less}}).back();
}

// unique_consecutive / unique_dim along `dim` (sorted rows for unique_dim):
// padded output, inverse [n], padded counts, count. Inverse and counts are
// always computed, as on CPU.
V unique_along(Context& cx, int64_t dim, bool sort) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  // CPU dispatches on every type but complex first, then reads self.size(dim).
  if (hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "unique_dim");
  if (x.rank() == 0)
    cx.fail("Dimension specified as " + std::to_string(dim) + " but tensor has no dimensions", ErrorKind::Index);
  dim = cx.dim(dim, x.rank());
  int64_t n = x.dims()[dim];
  if (x.type.numel() == 0) {
    if (n != 0) cx.fail("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    Value none = b.full(0, TensorType{DType::I64, {0}});
    return {x, none, none, b.constant(0, DType::I64)};
  }
  Value rows = rows_along(b, x, dim);
  Value perm;
  if (sort) {
    perm = sort_rows(b, rows);
    rows = b.take_along(rows, perm, 0);
  }
  Runs r = runs(b, rows);
  Value inv = r.group;
  if (sort) inv = b.scatter(b.full(0, TensorType{DType::I64, {n}}), b.reshape(perm, {n, 1}), r.group, {}, {0}, {0}, "");
  return {unrows(b, r.values, x.dims(), dim), inv, r.counts, r.count};
}

// unique_consecutive(self, return_inverse=False, return_counts=False,
// dim=None) -> padded output, inverse, padded counts, count.
V unique_consecutive(Context& cx) {
  auto& b = cx.b;
  if (!cx.none(3)) return unique_along(cx, cx.integer(3), false);
  Value x = cx.tensor(0);
  if (hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "unique");
  bool inverse = cx.flag_or(1, false), counts = cx.flag_or(2, false);
  int64_t n = x.type.numel();
  Value none = b.full(0, TensorType{DType::I64, {0}});
  if (n == 0)
    return {b.full(0, TensorType{x.dtype(), {0}}), inverse ? b.full(0, TensorType{DType::I64, x.dims()}) : none, none,
            b.constant(0, DType::I64)};
  Runs r = runs(b, b.reshape(x, {n}));
  return {r.values, inverse ? b.reshape(r.group, x.dims()) : none, counts ? r.counts : none, r.count};
}

// unique_dim(self, dim, sorted=True, return_inverse=False,
// return_counts=False): unique rows along dim, always sorted, as on CPU.
V unique_dim(Context& cx) { return unique_along(cx, cx.integer(1), true); }

// _unique2(self, sorted=True, return_inverse=False, return_counts=False)
// -> padded sorted unique values, inverse, padded counts, count. The values
// are sorted whatever `sorted` says, as on CPU.
V unique2(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  if (hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "unique");
  bool inverse = cx.flag_or(2, false), counts = cx.flag_or(3, false);
  int64_t n = x.type.numel();
  Value none = b.full(0, TensorType{DType::I64, {0}});
  if (n == 0)
    return {b.full(0, TensorType{x.dtype(), {0}}), inverse ? b.full(0, TensorType{DType::I64, x.dims()}) : none,
            counts ? b.full(0, TensorType{DType::I64, {0}}) : none, b.constant(0, DType::I64)};
  auto [sorted, perm] = sort_1d(b, b.reshape(x, {n}));
  Runs r = runs(b, sorted);
  Value inv = none;
  if (inverse) {
    // The element that sorted to position i came from perm[i].
    Value g = b.scatter(b.full(0, TensorType{DType::I64, {n}}), b.reshape(perm, {n, 1}), r.group, {}, {0}, {0}, "");
    inv = b.reshape(g, x.dims());
  }
  return {r.values, inv, counts ? r.counts : none, r.count};
}

// _unique(self, sorted=True, return_inverse=False): _unique2 without counts.
V unique(Context& cx) {
  V r = unique2(cx);
  return {r[0], r[1], r[3]};
}

// repeat_interleave.Tensor(repeats, *, output_size): element i of the result
// is the j with cumsum(repeats)[j-1] <= i < cumsum(repeats)[j]. The glue
// supplies output_size (sum(repeats)) when the caller did not.
V repeat_interleave(Context& cx) {
  auto& b = cx.b;
  Value rep = cx.tensor(0);
  // ATen dispatches on the index types (Int, Long) before its checks.
  if (rep.dtype() != DType::I32 && rep.dtype() != DType::I64) refuse_dtype(cx, rep.dtype(), "repeat_interleave_cpu");
  if (rep.rank() != 1) cx.fail("repeat_interleave only accept 1D vector as repeat");
  if (cx.none(1)) cx.fail("repeat_interleave: output_size is required");
  int64_t out = cx.integer(1), n = rep.type.numel();
  if (out == 0 || n == 0) return {b.full(0, TensorType{rep.dtype(), {out}})};
  Value ends = prefix_sum(b, b.convert(b.reshape(rep, {n}), DType::I64));  // [n]
  Value pos = b.iota(TensorType{DType::I64, {out, n}}, 0);
  Value passed = b.compare(b.broadcast_in_dim(ends, {out, n}, {1}), pos, "LE");  // run j ended at or before i
  Value j = b.reduce(b.convert(passed, DType::I64), b.constant(0, DType::I64), {1}, "stablehlo.add");
  return {b.convert(j, rep.dtype())};
}

// bincount(self, weights=None, minlength=0): the glue raises minlength to
// max(self) + 1 first, so minlength is the output size here.
V bincount(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  // ATen dispatches on the integral types before its checks.
  if (!hlo::is_integral(x.dtype()) || x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), "bincount_cpu");
  if (cx.integer_or(2, 0) < 0) cx.fail("minlength should be >= 0");
  if (x.rank() != 1) cx.fail("bincount only supports 1-d non-negative integral inputs.");
  int64_t size = cx.integer_or(2, 0), n = x.type.numel();
  DType out = DType::I64;
  Value w;
  if (!cx.none(1)) {
    w = cx.tensor(1);
    if (w.rank() != 1 || w.dims()[0] != n) cx.fail("weights should be 1-d and have the same length as input");
    out = w.dtype() == DType::F32 ? DType::F32 : DType::F64;
    w = b.convert(w, out);
  }
  TensorType t{out, {size}};
  if (n == 0 || size == 0) return {b.full(0, t)};
  Value idx = b.convert(x, DType::I64);
  Value bad =
      b.reduce(b.compare(idx, b.constant(0, DType::I64), "LT"), b.constant(0, DType::Bool), {0}, "stablehlo.or");
  cx.check(bad, "bincount only supports 1-d non-negative integral inputs.");
  Value upd = cx.none(1) ? b.full(1, TensorType{out, {n}}) : w;
  return {b.scatter(b.full(0, t), b.reshape(idx, {n, 1}), upd, {}, {0}, {0}, "stablehlo.add")};
}

}  // namespace

std::vector<Entry> data_dependent_lowerings() {
  return {
      {"aten::nonzero", nonzero, Traits().set_narrowed({0}).set_out_same_dtype()},
      {"aten::nonzero_static", nonzero_static},
      {"aten::masked_select", masked_select, Traits().set_narrowed({0})},
      {"aten::masked_scatter", masked_scatter},
      {"aten::equal", equal},
      {"aten::unique_consecutive", unique_consecutive, Traits().set_narrowed({0, 2}, 3)},
      {"aten::_unique", unique, Traits().set_narrowed({0})},
      {"aten::_unique2", unique2, Traits().set_narrowed({0, 2})},
      {"aten::unique_dim", unique_dim, Traits().set_narrowed({0, 2}, 1)},
      {"aten::repeat_interleave.Tensor", repeat_interleave, Traits().set_prepare(HostPrep::RepeatInterleave)},
      {"aten::bincount", bincount, Traits().set_prepare(HostPrep::Bincount)},
  };
}

}  // namespace torch_pjrt::lowering
