// Sorting and order statistics: sort, topk, kthvalue, median and nanmedian,
// mode, searchsorted and bucketize, and histc.
#include <algorithm>
#include <limits>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {

// Stable sort of x along dim: {values, int64 source positions}. NaN sorts as
// the largest value, as in PyTorch.
std::pair<Value, Value> sort_along(hlo::Builder& b, Value x, int64_t dim, bool descending) {
  Value pos = b.iota(TensorType{DType::I64, x.dims()}, dim);
  TensorType s{x.dtype(), {}}, si{DType::I64, {}};
  bool fp = hlo::is_floating(x.dtype());
  hlo::Builder::RegionFn less = [descending, fp](hlo::Builder& b, const std::vector<Value>& a) {
    Value lhs = a[0], rhs = a[1];
    if (descending) std::swap(lhs, rhs);
    Value lt = b.compare(lhs, rhs, "LT");
    if (fp) lt = b.or_(lt, b.and_(b.compare(rhs, rhs, "NE"), b.compare(lhs, lhs, "EQ")));
    return std::vector<Value>{lt};
  };
  auto r = b.op_multi("stablehlo.sort", {x, pos}, {x.type, pos.type},
                      "dimension = " + std::to_string(dim) + " : i64, is_stable = true", {{{s, s, si, si}, less}});
  return {r[0], r[1]};
}

namespace {

using V = std::vector<Value>;

// ---- sort and topk

V sort_impl(Context& cx, int64_t dim, bool descending) {
  auto& b = cx.b;
  Value x0 = cx.tensor(0);
  Value x = at_least_1d(b, x0);
  dim = cx.dim(dim, x.rank());
  if (hlo::is_complex(x.dtype())) cx.fail("Sort does not support complex dtypes on CPU");
  auto [v, i] = sort_along(b, x, dim, descending);
  return {b.reshape(v, x0.dims()), b.reshape(i, x0.dims())};
}
// sort(self, dim=-1, descending=False)
V sort(Context& cx) { return sort_impl(cx, cx.integer_or(1, -1), cx.flag_or(2, false)); }
// sort.stable(self, *, stable, dim=-1, descending=False)
V sort_stable(Context& cx) { return sort_impl(cx, cx.integer_or(2, -1), cx.flag_or(3, false)); }

// topk(self, k, dim=-1, largest=True, sorted=True)
V topk(Context& cx) {
  auto& b = cx.b;
  Value x0 = cx.tensor(0);
  Value x = at_least_1d(b, x0);
  int64_t k = cx.integer(1);
  int64_t dim = cx.dim(cx.integer_or(2, -1), x.rank());
  bool largest = cx.flag_or(3, true);
  if (k < 0 || k > x.dims()[dim]) cx.fail("selected index k out of range");
  if (x.dtype() == DType::Bool) cx.fail("topk does not support bool dtypes on CPU");
  if (hlo::is_complex(x.dtype())) cx.fail("topk does not support complex dtypes on CPU");
  // As on CPU, a 0-d input gives itself and index 0 for k = 0 as for k = 1.
  if (x0.rank() == 0) return {x0, b.full(0, TensorType{DType::I64, {}})};
  auto [v, i] = sort_along(b, x, dim, largest);
  Dims limit = x.dims();
  limit[dim] = k;
  Dims zero(x.rank(), 0), one(x.rank(), 1);
  v = b.slice(v, zero, limit, one);
  i = b.slice(i, zero, limit, one);
  Dims out = x0.rank() == 0 ? Dims{} : limit;
  return {b.reshape(v, out), b.reshape(i, out)};
}

// ---- order statistics: kthvalue, median, nanmedian, mode

// x gathered along dim at per-row positions `pos` (i64, x's shape with 1 at
// dim): the result has pos's shape.
Value take_at(hlo::Builder& b, Value x, Value pos, int64_t dim) {
  int64_t r = x.rank();
  return b.reshape(b.gather(x, along_coords(b, pos, dim), {}, iota_dims(r), iota_dims(r), Dims(r, 1), pos.dims()),
                   pos.dims());
}

// Result shape of reducing dim (dropped, or kept as 1).
Dims without_dim(const Dims& d, int64_t dim, bool keepdim) {
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i) {
    if (i != dim)
      out.push_back(d[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// kthvalue(self, k, dim=-1, keepdim=False) -> (values, indices): the k-th
// smallest along dim (NaN is the largest), indices from a stable sort.
V kthvalue(Context& cx) {
  auto& b = cx.b;
  Value x0 = cx.tensor(0);
  Value x = at_least_1d(b, x0);
  int64_t k = cx.integer(1);
  int64_t dim = cx.dim(cx.integer_or(2, -1), x.rank());
  bool keepdim = cx.flag_or(3, false);
  if (x.dims()[dim] == 0)
    cx.fail("kthvalue(): Expected reduction dim " + std::to_string(dim) + " to have non-zero size.", ErrorKind::Index);
  if (k < 1 || k > x.dims()[dim])
    cx.fail("kthvalue(): selected number k out of range for dimension " + std::to_string(dim));
  if (x.dtype() == DType::Bool || hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "kthvalue_cpu");
  auto [v, i] = sort_along(b, x, dim, false);
  Dims start(x.rank(), 0), limit = x.dims(), one(x.rank(), 1);
  start[dim] = k - 1;
  limit[dim] = k;
  Dims out = x0.rank() == 0 ? Dims{} : without_dim(x.dims(), dim, keepdim);
  return {b.reshape(b.slice(v, start, limit, one), out), b.reshape(b.slice(i, start, limit, one), out)};
}

// The median of x along dim as CPU computes it: the lower median of a
// stable sort; with NaNs, the first NaN (median) or the lower median of
// the other values (nanmedian, NaN when all are NaN).
std::pair<Value, Value> median_along(hlo::Builder& b, Value x, int64_t dim, bool ignore_nan) {
  int64_t n = x.dims()[dim];
  auto [v, i] = sort_along(b, x, dim, false);
  Dims kept = with_dim(x.dims(), dim, 1);
  Value nan = b.convert(b.compare(x, x, "NE"), DType::I64);
  Value num_nan = b.reshape(b.reduce(nan, b.constant(0, DType::I64), {dim}, "stablehlo.add"), kept);
  Value size = b.constant(n, DType::I64), one = b.constant(1, DType::I64), two = b.constant(2, DType::I64);
  Value pos;
  if (ignore_nan) {
    pos = b.div(b.sub(b.sub(size, num_nan), one), two);  // truncates: 0 when all are NaN
  } else {
    Value has_nan = b.compare(num_nan, b.constant(0, DType::I64), "GT");
    pos = b.select(has_nan, b.sub(size, num_nan), b.broadcast_to(b.constant((n - 1) / 2, DType::I64), kept));
  }
  return {take_at(b, v, pos, dim), take_at(b, i, pos, dim)};
}

V median_dim_impl(Context& cx, bool ignore_nan) {
  auto& b = cx.b;
  Value x0 = cx.tensor(0);
  Value x = at_least_1d(b, x0);
  int64_t dim = cx.dim(cx.integer(1), x.rank());
  bool keepdim = cx.flag_or(2, false);
  // As CPU: the dim, then a non-empty reduction (IndexError, "median()" for
  // both), then the dispatch on every type but bool and complex.
  if (x.dims()[dim] == 0)
    cx.fail("median(): Expected reduction dim " + std::to_string(dim) + " to have non-zero size.", ErrorKind::Index);
  if (x.dtype() == DType::Bool || hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "median_out");
  auto [v, i] = median_along(b, x, dim, ignore_nan);
  Dims out = x0.rank() == 0 ? Dims{} : without_dim(x.dims(), dim, keepdim);
  return {b.reshape(v, out), b.reshape(i, out)};
}
// median.dim / nanmedian.dim(self, dim, keepdim=False) -> (values, indices)
V median_dim(Context& cx) { return median_dim_impl(cx, false); }
V nanmedian_dim(Context& cx) { return median_dim_impl(cx, true); }

// median / nanmedian(self): over every element; NaN for an empty tensor.
V median_all_impl(Context& cx, bool ignore_nan) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool || hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "median_cpu");
  int64_t n = x.type.numel();
  if (n == 0) return {b.constant(std::numeric_limits<double>::quiet_NaN(), x.dtype())};
  Value flat = b.reshape(x, {n});
  return {b.reshape(median_along(b, flat, 0, ignore_nan).first, {})};
}
V median_all(Context& cx) { return median_all_impl(cx, false); }
V nanmedian_all(Context& cx) { return median_all_impl(cx, true); }

// mode(self, dim=-1, keepdim=False) -> (values, indices): the most frequent
// value along dim, the smallest one on ties, with the last index at which it
// occurs (as CPU's sort-and-count does).
V mode(Context& cx) {
  auto& b = cx.b;
  Value x0 = cx.tensor(0);
  Value x = at_least_1d(b, x0);
  int64_t dim = cx.dim(cx.integer_or(1, -1), x.rank());
  bool keepdim = cx.flag_or(2, false);
  int64_t n = x.dims()[dim];
  if (hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "mode_cpu");
  if (n == 0)
    cx.fail("mode(): Expected reduction dim " + std::to_string(dim) + " to have non-zero size.", ErrorKind::Index);
  Dims out = x0.rank() == 0 ? Dims{} : without_dim(x.dims(), dim, keepdim);
  if (n == 1) return {b.reshape(x, out), b.full(0, TensorType{DType::I64, out})};
  auto [v, i] = sort_along(b, x, dim, false);
  int64_t r = x.rank();
  Dims zero(r, 0), one(r, 1), head = x.dims(), tail_start(r, 0);
  head[dim] = n - 1;
  tail_start[dim] = 1;
  // differs[j]: sorted element j differs from element j + 1 (a NaN differs
  // from everything).
  Value differs = b.compare(b.slice(v, zero, head, one), b.slice(v, tail_start, x.dims(), one), "NE");
  Value yes = b.full(1, TensorType{DType::Bool, with_dim(x.dims(), dim, 1)});
  Value run_end = b.concatenate({differs, yes}, dim);
  Value run_start = b.concatenate({yes, differs}, dim);
  Value pos = b.iota(TensorType{DType::I64, x.dims()}, dim);
  // start of the run each element belongs to: a running max of run starts.
  Value starts = b.select(run_start, pos, b.constant(0, DType::I64));
  Dims window(r, 1);
  window[dim] = n;
  std::string win, str, pad;
  for (int64_t d = 0; d < r; ++d) {
    win += (d ? ", " : "") + std::to_string(window[d]);
    str += (d ? ", " : "") + std::string("1");
    pad += (d ? ", " : "") + std::string(d == dim ? "[" + std::to_string(n - 1) + ", 0]" : "[0, 0]");
  }
  std::string attrs = "window_dimensions = array<i64: " + win + ">, window_strides = array<i64: " + str +
                      ">, padding = dense<[" + pad + "]> : tensor<" + std::to_string(r) + "x2xi64>";
  TensorType si{DType::I64, {}};
  Value run_first = b.op_multi("stablehlo.reduce_window", {starts, b.constant(0, DType::I64)}, {starts.type}, attrs,
                               {{{si, si}, [](hlo::Builder& b, const std::vector<Value>& a) {
                                   return std::vector<Value>{b.max(a[0], a[1])};
                                 }}})[0];
  // Frequency at each run end (0 elsewhere); the first (smallest) run with
  // the greatest frequency wins.
  Value freq = b.select(run_end, b.add(b.sub(pos, run_first), b.constant(1, DType::I64)), b.constant(0, DType::I64));
  Value best =
      b.reshape(b.reduce(freq, b.constant(0, DType::I64), {dim}, "stablehlo.maximum"), with_dim(x.dims(), dim, 1));
  Value is_best = b.compare(freq, b.broadcast_to(best, x.dims()), "EQ");
  Value cand = b.select(is_best, pos, b.constant(n, DType::I64));
  Value at =
      b.reshape(b.reduce(cand, b.constant(n, DType::I64), {dim}, "stablehlo.minimum"), with_dim(x.dims(), dim, 1));
  return {b.reshape(take_at(b, v, at, dim), out), b.reshape(take_at(b, i, at, dim), out)};
}

// ---- searchsorted, bucketize, histc

// For each value, the number of boundaries before it along the last dim:
// left counts boundaries b with !(b >= v), right those with !(b > v), as
// CPU's binary search does (so a NaN value lands past the end).
Value search(Context& cx, Value bounds, Value values, bool right, bool out_int32) {
  auto& b = cx.b;
  DType t = hlo::promote_types(bounds.dtype(), values.dtype());
  bounds = b.convert(bounds, t);
  values = b.convert(values, t);
  DType out = out_int32 ? DType::I32 : DType::I64;
  int64_t m = bounds.dims().back();
  Dims vd = values.dims();
  if (values.type.numel() == 0 || m == 0) return b.full(0, TensorType{out, vd});
  Dims grid = appended(vd, m);
  Value vb = b.broadcast_in_dim(values, grid, iota_dims(values.rank()));
  Value bb;
  if (bounds.rank() == 1) {
    bb = b.broadcast_in_dim(bounds, grid, {values.rank()});
  } else {
    Dims bdims = iota_dims(bounds.rank() - 1);
    bdims.push_back(values.rank());
    bb = b.broadcast_in_dim(bounds, grid, bdims);
  }
  Value before = b.not_(b.compare(bb, vb, right ? "GT" : "GE"));
  Value n = b.reduce(b.convert(before, DType::I64), b.constant(0, DType::I64), {values.rank()}, "stablehlo.add");
  return b.convert(n, out);
}

// The side searchsorted searches from: side ("left"/"right") wins over
// right, and they must agree when both are given.
bool search_right(Context& cx, size_t right_arg, size_t side_arg) {
  bool right = cx.flag_or(right_arg, false);
  if (cx.none(side_arg)) return right;
  const std::string& side = cx.str(side_arg);
  if (side != "left" && side != "right")
    cx.fail("torch.searchsorted(): side can only be 'left' or 'right' but got " + side);
  if (side == "left" && right)
    cx.fail("torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True");
  return side == "right";
}

// The sorted sequence of searchsorted (arg 0), reordered by sorter (arg 5)
// when one is given, checked against the values' shape.
Value sorted_sequence(Context& cx, const Dims& values) {
  auto& b = cx.b;
  Value seq = cx.tensor(0);
  if (seq.rank() == 0)
    cx.fail("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension");
  if (seq.rank() > 1) {
    bool ok = static_cast<int64_t>(values.size()) == seq.rank() &&
              std::equal(values.begin(), values.end() - 1, seq.dims().begin());
    if (!ok)
      cx.fail(
          "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
          "tensor and input value tensor must match, but we got boundaries tensor " +
          dims_str(seq.dims()) + " and input value tensor " + dims_str(values));
  }
  if (!cx.none(5)) {
    Value sorter = cx.tensor(5);
    if (sorter.dims() != seq.dims())
      cx.fail("torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor " +
              dims_str(seq.dims()) + "and got sorter tensor " + dims_str(sorter.dims()));
    Value idx = index_arg(cx, sorter);
    int64_t last = seq.rank() - 1;
    if (idx.type.numel() > 0) {
      Value bad = any_true(b, b.or_(b.compare(idx, b.constant(0, DType::I64), "LT"),
                                    b.compare(idx, b.constant(seq.dims()[last], DType::I64), "GE")));
      cx.check(bad, "torch.searchsorted(): sorter index out of range", ErrorKind::Runtime);
      seq = take_at(b, seq, idx, last);
    }
  }
  return seq;
}

// searchsorted.Tensor(sorted_sequence, self, *, out_int32, right, side, sorter)
V searchsorted_tensor(Context& cx) {
  Value values = cx.tensor(1);
  Value seq = sorted_sequence(cx, values.rank() == 0 ? Dims{1} : values.dims());
  bool right = search_right(cx, 3, 4);
  if (values.rank() == 0) {
    if (seq.rank() != 1)
      cx.fail("torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1");
    return {cx.b.reshape(search(cx, seq, cx.b.reshape(values, {1}), right, cx.flag_or(2, false)), {})};
  }
  return {search(cx, seq, values, right, cx.flag_or(2, false))};
}
// searchsorted.Scalar(sorted_sequence, Scalar self, *, out_int32, right, side, sorter)
V searchsorted_scalar(Context& cx) {
  Value seq = sorted_sequence(cx, {1});
  if (seq.rank() != 1)
    cx.fail("torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1");
  Value v = cx.b.reshape(cx.b.convert(cx.tensor(1), seq.dtype()), {1});
  return {cx.b.reshape(search(cx, seq, v, search_right(cx, 3, 4), cx.flag_or(2, false)), {})};
}
// bucketize.Tensor(self, boundaries, *, out_int32, right)
V bucketize_tensor(Context& cx) {
  Value bounds = cx.tensor(1);
  if (bounds.rank() != 1)
    cx.fail("boundaries tensor must be 1 dimension, but got dim(" + std::to_string(bounds.rank()) + ")");
  Value values = cx.tensor(0);
  if (values.rank() == 0)
    return {
        cx.b.reshape(search(cx, bounds, cx.b.reshape(values, {1}), cx.flag_or(3, false), cx.flag_or(2, false)), {})};
  return {search(cx, bounds, values, cx.flag_or(3, false), cx.flag_or(2, false))};
}
// bucketize.Scalar(Scalar self, boundaries, *, out_int32, right)
V bucketize_scalar(Context& cx) {
  Value bounds = cx.tensor(1);
  if (bounds.rank() != 1)
    cx.fail("boundaries tensor must be 1 dimension, but got dim(" + std::to_string(bounds.rank()) + ")");
  Value v = cx.b.reshape(cx.b.convert(cx.tensor(0), bounds.dtype()), {1});
  return {cx.b.reshape(search(cx, bounds, v, cx.flag_or(3, false), cx.flag_or(2, false)), {})};
}

// histc(self, bins=100, min=0, max=0): counts of the elements in `bins`
// equal bins over [min, max] (the data's range when min == max, widened by
// 1 on each side when that is empty). As on CPU, an element's bin is
// trunc((x - min) * bins / (max - min)) in self's dtype, the last bin is
// closed, and elements outside the range or NaN are ignored.
V histc(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t bins = cx.integer_or(1, 100);
  DType t = x.dtype();
  if (!hlo::is_floating(t))
    cx.fail("\"histogram_cpu\" not implemented for '" + std::string(hlo::scalar_type_name(t)) + "'",
            ErrorKind::NotImplemented);
  if (bins <= 0) cx.fail("torch.histc(): bins must be > 0, but got " + std::to_string(bins) + " for dimension 0");
  int64_t n = x.type.numel();
  Value lo = cx.none(2) ? b.constant(0, DType::F64) : cx.as(2, DType::F64);
  Value hi = cx.none(3) ? b.constant(0, DType::F64) : cx.as(3, DType::F64);
  Value flat = b.reshape(x, {n});
  if (n > 0) {
    Value same = b.compare(lo, hi, "EQ");
    Value dmin = b.reduce(flat, b.constant(std::numeric_limits<double>::infinity(), t), {0}, "stablehlo.minimum");
    Value dmax = b.reduce(flat, b.constant(-std::numeric_limits<double>::infinity(), t), {0}, "stablehlo.maximum");
    lo = b.select(same, b.convert(dmin, DType::F64), lo);
    hi = b.select(same, b.convert(dmax, DType::F64), hi);
  }
  // CPU's histc refuses min > max (after an equal pair took the data's range).
  cx.check(b.compare(lo, hi, "GT"), "torch.histc: max must be larger than min", ErrorKind::Runtime);
  Value empty = b.compare(lo, hi, "EQ");
  lo = b.select(empty, b.sub(lo, b.constant(1, DType::F64)), lo);
  hi = b.select(empty, b.add(hi, b.constant(1, DType::F64)), hi);
  DType acc = hlo::opmath_type(t);
  Value zeros = b.full(0, TensorType{acc, {bins}});
  if (n == 0) return {b.convert(zeros, t)};
  Value lo_t = b.convert(lo, t), hi_t = b.convert(hi, t);
  Value inside = b.and_(b.compare(flat, lo_t, "GE"), b.compare(flat, hi_t, "LE"));
  Value scaled = b.div(b.mul(b.sub(flat, lo_t), b.constant(static_cast<double>(bins), t)), b.sub(hi_t, lo_t));
  Value pos = b.convert(scaled, DType::I64);
  Value last = b.constant(bins - 1, DType::I64);
  pos = b.clamp(b.constant(0, DType::I64), pos, last);
  Value ones = b.convert(inside, acc);
  return {b.convert(b.scatter(zeros, b.reshape(pos, {n, 1}), ones, {}, {0}, {0}, "stablehlo.add"), t)};
}

}  // namespace

std::vector<Entry> sorting_lowerings() {
  return {
      {"aten::sort", sort, Traits().set_out_same_dtype()},
      {"aten::sort.stable", sort_stable, Traits().set_out_same_dtype()},
      {"aten::topk", topk},
      {"aten::kthvalue", kthvalue, Traits().set_out_same_dtype()},
      {"aten::median", median_all},
      {"aten::median.dim", median_dim, Traits().set_out_same_dtype()},
      {"aten::nanmedian", nanmedian_all},
      {"aten::nanmedian.dim", nanmedian_dim, Traits().set_out_same_dtype()},
      {"aten::mode", mode, Traits().set_out_same_dtype()},
      {"aten::searchsorted.Tensor", searchsorted_tensor, Traits().set_out_same_dtype()},
      {"aten::searchsorted.Scalar", searchsorted_scalar, Traits().set_out_same_dtype()},
      {"aten::bucketize.Tensor", bucketize_tensor, Traits().set_out_same_dtype()},
      {"aten::bucketize.Scalar", bucketize_scalar, Traits().set_out_same_dtype()},
      {"aten::histc", histc},
  };
}

}  // namespace torch_pjrt::lowering
