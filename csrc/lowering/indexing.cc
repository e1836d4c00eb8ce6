// Indexing and scatter: index_select, gather, the scatter family,
// index_add/fill/copy/reduce, advanced indexing (index, index_put), take and
// put, and embedding's dense backward.
//
// XLA's gather and dynamic-slice clamp out-of-range indices and its scatter
// drops them; PyTorch raises. Every op that takes indices therefore also
// computes a rank-0 i1 "some index was out of range" and hands it to
// cx.check(), which the engine turns into an IndexError.
#include <algorithm>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {

// An index tensor as i64; bool/uint8 masks (data-dependent shapes) and floats are refused.
Value index_arg(Context& cx, Value idx) {
  if (idx.dtype() == DType::Bool || idx.dtype() == DType::U8)
    cx.fail("boolean (mask) indices are data-dependent and not supported; use integer indices");
  if (!hlo::is_integral(idx.dtype()))
    cx.fail(std::string("tensors used as indices must be long or int tensors, got ") +
            std::string(hlo::dtype_name(idx.dtype())));
  return cx.b.convert(idx, DType::I64);
}

// Full coordinates for an element-wise gather/scatter along `dim`: shape
// idx.dims + [rank], where coordinate `dim` is idx and every other
// coordinate is the element's own position.
Value along_coords(hlo::Builder& b, Value idx, int64_t dim) {
  TensorType t{DType::I64, appended(idx.dims(), 1)};
  std::vector<Value> parts;
  for (int64_t d = 0; d < idx.rank(); ++d) parts.push_back(d == dim ? b.reshape(idx, t.dims) : b.iota(t, d));
  return b.concatenate(parts, idx.rank());
}

namespace {

using V = std::vector<Value>;

// ---- index helpers

// Registers the check that every element of `idx` (i64) lies in [0, size),
// or in [-size, size) when negative indices are allowed.
// `true_size` (i64, when given) is a bucketed dim's true size; the message
// then names the bound, and the engine prints the exact call's message.
void check_range(Context& cx, Value idx, int64_t size, int64_t dim, bool allow_negative, bool in_self_message = false,
                 ErrorKind kind = ErrorKind::Index, Value true_size = {}) {
  auto& b = cx.b;
  const bool dynamic = true_size.id >= 0;
  Value lo = dynamic ? (allow_negative ? b.neg(true_size) : b.constant(0, DType::I64))
                     : b.constant(allow_negative ? -size : 0, DType::I64);
  Value hi = dynamic ? true_size : b.constant(size, DType::I64);
  Value below = b.compare(idx, lo, "LT");  // sequenced: the golden text depends on the order
  Value above = b.compare(idx, hi, "GE");
  Value bad = any_true(b, b.or_(below, above));
  std::string where = "dimension " + std::to_string(dim) + " with size " + std::to_string(size);
  cx.check(bad,
           std::string(cx.op()) + (in_self_message ? ": index out of range in self (" + where + ")"
                                                   : ": index is out of bounds for " + where),
           kind);
}

// Negative indices wrapped by `size` (i64), or by `true_size` when given.
Value wrap_negative(hlo::Builder& b, Value idx, int64_t size, Value true_size = {}) {
  Value zero = b.constant(0, DType::I64);
  Value n = true_size.id >= 0 ? true_size : b.constant(size, DType::I64);
  return b.select(b.compare(idx, zero, "LT"), b.add(idx, n), idx);
}

// ---- index_select, gather, scatter

V index_select(Context& cx) {
  auto& b = cx.b;
  Value self0 = cx.tensor(0);
  Value self = at_least_1d(b, self0);
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  Value index = cx.tensor(2);
  if (index.rank() > 1) cx.fail("index_select(): Index is supposed to be a vector", ErrorKind::Index);
  int64_t n = index.type.numel(), size = self.dims()[dim];
  if (self0.rank() == 0 && n != 1)
    cx.fail("index_select(): Index to scalar can have only 1 value, got " + std::to_string(n) + " value(s)");
  Value idx = b.reshape(index_arg(cx, index), {n});
  Dims out = self0.dims();
  if (self0.rank() > 0) out[dim] = n;
  if (n > 0) check_range(cx, idx, size, dim, false, true);
  if (n == 0 || size == 0) return {b.full(0, TensorType{self.dtype(), out})};
  return {b.reshape(b.take_along(self, idx, dim), out)};
}

// `index` (made i64 and at least 1-D) validated for an along-`dim` op on
// `self` (and `src` when given), with its range check registered.
Value along_index(Context& cx, Value self, Value index, int64_t dim, const Value* src) {
  // An empty index of any dtype (an empty uint8 one too) selects nothing, as on CPU.
  if (index.type.numel() == 0) return at_least_1d(cx.b, cx.b.convert(index, DType::I64));
  Value idx = at_least_1d(cx.b, index_arg(cx, index));
  if (idx.rank() != self.rank()) cx.fail("Index tensor must have the same number of dimensions as input tensor");
  if (src && idx.rank() != src->rank()) cx.fail("Index tensor must have the same number of dimensions as src tensor");
  for (int64_t d = 0; d < self.rank(); ++d) {
    if (d != dim && idx.dims()[d] > self.dims()[d])
      cx.fail("Size does not match at dimension " + std::to_string(d) + " expected index " + dims_str(idx.dims()) +
              " to be smaller than self " + dims_str(self.dims()) + " apart from dimension " + std::to_string(dim));
    if (src && idx.dims()[d] > src->dims()[d])
      cx.fail("Size does not match at dimension " + std::to_string(d) + " expected index " + dims_str(idx.dims()) +
              " to be smaller than src " + dims_str(src->dims()));
  }
  // The scatter/gather CPU kernels check the range with TORCH_CHECK.
  check_range(cx, idx, self.dims()[dim], dim, false, false, ErrorKind::Runtime);
  return idx;
}

V gather(Context& cx) {
  auto& b = cx.b;
  Value self = at_least_1d(b, cx.tensor(0));
  Value index = cx.tensor(2);
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  if (index.type.numel() != 0 && index.dtype() != DType::I64 && index.dtype() != DType::I32)
    cx.fail("gather(): Expected dtype int32/int64 for index");
  Value idx = along_index(cx, self, index, dim, nullptr);
  // No indices, or a gathered dim of size 0 (every index then fails its check).
  if (idx.type.numel() == 0 || self.dims()[dim] == 0) return {b.full(0, TensorType{self.dtype(), index.dims()})};
  int64_t r = self.rank();
  Value g = b.gather(self, along_coords(b, idx, dim), {}, iota_dims(r), iota_dims(r), Dims(r, 1), idx.dims());
  return {b.reshape(g, index.dims())};
}

// The combiner of a NaN-propagating max (or min) scatter: the CPU plugin's
// bare stablehlo.maximum/minimum drop NaNs, PyTorch keeps them.
hlo::Builder::RegionFn extremum_region(bool is_max) {
  return [is_max](hlo::Builder& b, const std::vector<Value>& a) {
    Value pick_old = b.or_(b.compare(a[0], a[1], is_max ? "GT" : "LT"), b.compare(a[0], a[0], "NE"));
    return std::vector<Value>{b.select(pick_old, a[0], a[1])};
  };
}

// `src` (at least idx's shape) written into `self` at `idx` along `dim`:
// self[.., idx[p], ..] (combiner)= src[p] for every position p of idx.
// The combiners "amax" and "amin" propagate NaN.
Value scatter_along(hlo::Builder& b, Value self, Value idx, Value src, int64_t dim, std::string_view combiner) {
  if (idx.type.numel() == 0 || self.type.numel() == 0) return self;
  int64_t r = self.rank();
  Value upd = b.slice(src, Dims(r, 0), idx.dims(), Dims(r, 1));
  Value coords = along_coords(b, idx, dim);
  if (combiner == "amax" || combiner == "amin") {
    std::string attrs =
        "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [], inserted_window_dims = " +
        dims_str(iota_dims(r)) + ", scatter_dims_to_operand_dims = " + dims_str(iota_dims(r)) +
        ", index_vector_dim = " + std::to_string(coords.rank() - 1) +
        ">, indices_are_sorted = false, unique_indices = false";
    TensorType s{self.dtype(), {}};
    return b.op_multi("stablehlo.scatter", {self, coords, upd}, {self.type}, attrs,
                      {{{s, s}, extremum_region(combiner == "amax")}})[0];
  }
  return b.scatter(self, coords, upd, {}, iota_dims(r), iota_dims(r), combiner);
}

// (self, dim, index, src-or-value) of the scatter overloads: self and index
// at least 1-D, src converted to self's dtype (a Scalar broadcast to index).
struct ScatterArgs {
  Value self, idx, src;
  int64_t dim;
  Dims out;
};
ScatterArgs scatter_args(Context& cx) {
  auto& b = cx.b;
  ScatterArgs s;
  Value self0 = cx.tensor(0);
  s.out = self0.dims();
  s.self = at_least_1d(b, self0);
  s.dim = cx.dim(cx.integer(1), s.self.rank());
  // ATen's scatter_gather_dtype_check: an int32/int64 index, src of self's dtype.
  Value index = cx.tensor(2);
  if (index.type.numel() != 0 && index.dtype() != DType::I64 && index.dtype() != DType::I32)
    cx.fail("scatter(): Expected dtype int32/int64 for index");
  if (cx.arg(3).kind != Arg::Kind::Scalar && cx.tensor(3).dtype() != self0.dtype())
    cx.fail("scatter(): Expected self.dtype to be equal to src.dtype");
  if (cx.arg(3).kind == Arg::Kind::Scalar) {
    s.idx = along_index(cx, s.self, cx.tensor(2), s.dim, nullptr);
    s.src = b.broadcast_to(cx.as(3, s.self.dtype()), s.idx.dims());
  } else {
    s.src = at_least_1d(b, cx.as(3, s.self.dtype()));
    s.idx = along_index(cx, s.self, cx.tensor(2), s.dim, &s.src);
  }
  return s;
}

// The legacy scatter.reduce / scatter.value_reduce take "add" or "multiply" only.
std::string_view reduce_combiner(Context& cx, const std::string& reduce, DType t) {
  if (reduce == "add") return hlo::sum_op(t);
  if (reduce == "multiply") return hlo::product_op(t);
  cx.fail("reduce argument must be either add or multiply.");
}

V scatter_replace(Context& cx) {
  ScatterArgs s = scatter_args(cx);
  return {cx.b.reshape(scatter_along(cx.b, s.self, s.idx, s.src, s.dim, ""), s.out)};
}
// A summing scatter. As on CPU, float16 and bfloat16 sums accumulate in
// float32 and round once.
Value scatter_sum(hlo::Builder& b, Value self, Value idx, Value src, int64_t dim) {
  DType t = self.dtype(), acc = hlo::is_floating(t) ? hlo::opmath_type(t) : t;
  Value r = scatter_along(b, b.convert(self, acc), idx, b.convert(src, acc), dim, hlo::sum_op(acc));
  return b.convert(r, t);
}

V scatter_add(Context& cx) {
  ScatterArgs s = scatter_args(cx);
  return {cx.b.reshape(scatter_sum(cx.b, s.self, s.idx, s.src, s.dim), s.out)};
}
// scatter.reduce / scatter.value_reduce: reduce is "add" or "multiply".
V scatter_reduce_legacy(Context& cx) {
  ScatterArgs s = scatter_args(cx);
  std::string_view comb = reduce_combiner(cx, cx.str(4), s.self.dtype());
  return {cx.b.reshape(scatter_along(cx.b, s.self, s.idx, s.src, s.dim, comb), s.out)};
}

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self):
// reduce in sum, prod, mean, amax, amin.
// self with src reduced into it at idx along dim (the shared body of
// scatter_reduce.two and index_reduce): reduce is sum, prod, mean, amax or
// amin; without include_self the hit elements of self are left out.
Value scatter_reduce_into(hlo::Builder& b, Value self, Value idx, Value src, int64_t dim, const std::string& red,
                          bool include_self) {
  DType t = self.dtype();
  if (idx.type.numel() == 0 || self.type.numel() == 0) return self;
  // How many src elements land on each element of self.
  Value count = scatter_along(b, b.full(0, TensorType{DType::I64, self.dims()}), idx,
                              b.full(1, TensorType{DType::I64, idx.dims()}), dim, "stablehlo.add");
  Value hit = b.compare(count, b.constant(0, DType::I64), "GT");
  auto base = [&](double identity) { return include_self ? self : b.select(hit, b.constant(identity, t), self); };
  if (red == "sum") return scatter_sum(b, base(0), idx, src, dim);
  if (red == "prod") return scatter_along(b, base(1), idx, src, dim, hlo::product_op(t));
  if (red == "amax" || red == "amin") {
    // Without self, first overwrite the hit elements with one of their src
    // values; the extremum over src is then unchanged by it.
    Value start = include_self ? self : scatter_along(b, self, idx, src, dim, "");
    return scatter_along(b, start, idx, src, dim, red);
  }
  // mean
  Value sum = scatter_sum(b, base(0), idx, src, dim);
  Value n = include_self ? b.add(count, b.constant(1, DType::I64)) : count;
  n = b.convert(b.max(n, b.constant(1, DType::I64)), t);
  return hlo::is_floating(t) ? b.div(sum, n) : int_floor_div(b, sum, n);
}

V scatter_reduce_two(Context& cx) {
  ScatterArgs s = scatter_args(cx);
  std::string red = cx.str(4);
  if (red != "sum" && red != "prod" && red != "mean" && red != "amax" && red != "amin")
    cx.fail("reduce argument must be either sum, prod, mean, amax or amin, got " + red);
  Value r = scatter_reduce_into(cx.b, s.self, s.idx, s.src, s.dim, red, cx.flag_or(5, true));
  return {cx.b.reshape(r, s.out)};
}

// The checks ATen's index_add/index_reduce meta makes first, in its order:
// index a vector (IndexError), self and source of one dtype, dim within
// source, one source slice per index (IndexError).
void check_index_func(Context& cx, const Value& self0, int64_t dim, const Value& index, const Value& src0,
                      const std::string& name) {
  if (index.rank() > 1)
    cx.fail(name + "(): Index is supposed to be a vector, but got dim: " + std::to_string(index.rank()) +
                " with type: " + std::string(hlo::dtype_name(index.dtype())) + " and size: " + dims_str(index.dims()),
            ErrorKind::Index);
  if (self0.dtype() != src0.dtype())
    cx.fail(name + "(): self (" + std::string(hlo::dtype_name(self0.dtype())) + ") and source (" +
            std::string(hlo::dtype_name(src0.dtype())) + ") must have the same scalar type");
  if (dim != 0 && dim >= src0.rank())
    cx.fail(name + "(): Indexing dim " + std::to_string(dim) + " is out of bounds of the source tensor with dim " +
            std::to_string(src0.rank()));
  int64_t n = index.type.numel();
  if (n != (src0.rank() == 0 ? 1 : src0.dims()[dim])) {
    if (src0.rank() == 0)
      cx.fail("Dimension specified as " + std::to_string(dim) + " but tensor has no dimensions", ErrorKind::Index);
    cx.fail(name + "(): Number of indices (" + std::to_string(n) + ") should be equal to source.size(dim): (" +
            std::to_string(src0.dims()[dim]) + "), for dim: " + std::to_string(dim));
  }
}

// index_add(self, dim, index, source, *, alpha): self[.., index[i], ..] += alpha * source[.., i, ..].
V index_add(Context& cx) {
  auto& b = cx.b;
  Value self0 = cx.tensor(0);
  Value self = at_least_1d(b, self0);
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  Value index = cx.tensor(2);
  check_index_func(cx, self0, dim, index, cx.tensor(3), "index_add_");
  int64_t n = index.type.numel(), size = self.dims()[dim];
  Value idx = b.reshape(index_arg(cx, index), {n});
  Value src = at_least_1d(b, cx.as(3, self.dtype()));
  if (src.rank() != self.rank()) cx.fail("index_add_(): Source/destination tensor must have same slice shapes.");
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim && src.dims()[d] != self.dims()[d])
      cx.fail("index_add_(): Source/destination tensor must have same slice shapes. Destination slice shape: " +
              dims_str(self.dims()) + " at dimension " + std::to_string(dim) +
              " and source slice shape: " + dims_str(src.dims()) + " at dimension " + std::to_string(dim) + ".");
  if (src.dims()[dim] != n)
    cx.fail("index_add_(): Number of indices (" + std::to_string(n) + ") should be equal to source.size(dim) (" +
            std::to_string(src.dims()[dim]) + ")");
  // CPU checks a 1-D self itself (IndexError) and hands any other to
  // scatter_add's kernel (RuntimeError).
  const bool in_self = self.rank() <= 1;
  const ErrorKind kind = in_self ? ErrorKind::Index : ErrorKind::Runtime;
  if (n == 0 || self.type.numel() == 0) {
    if (n > 0) check_range(cx, idx, size, dim, false, in_self, kind);
    return {self0};
  }
  check_range(cx, idx, size, dim, false, in_self, kind);
  if (!cx.none(4)) {
    Value alpha = cx.as(4, self.dtype());
    src = b.binary(hlo::product_op(self.dtype()), src, alpha);
  }
  Dims window;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim) window.push_back(d);
  Value r = b.scatter(self, b.reshape(idx, {n, 1}), src, window, {dim}, {dim}, hlo::sum_op(self.dtype()));
  return {b.reshape(r, self0.dims())};
}

// ---- advanced indexing: self[i0, i1, ...] with integer index tensors

struct Advanced {
  Dims positions;          // indexed dims of self, ascending
  Value coords;            // i64 [*batch, k]: per batch element, the k indices (wrapped)
  Dims batch;              // the broadcast shape of the index tensors
  Dims result;             // the shape self[indices] has
  Dims offset_dims;        // where the non-indexed dims of self sit in `result`
  Dims rest;               // those non-indexed dims of self
  bool empty_dim = false;  // an indexed dim of self has size 0
  int64_t before = 0;      // where the batch dims start in `result`
  // Shape buckets: the batch dims that bucketed index tensors give, with
  // their true sizes (coords is static: padded there, with unspecified
  // indices in the padding, which a gather clamps).
  std::vector<std::pair<int64_t, Value>> batch_sizes;
};

// Reads a `Tensor?[]` argument: the present tensors in `values`, one entry
// per list position in `ints` (1 present, 0 None).
Advanced advanced_index(Context& cx, Value self, size_t arg) {
  auto& b = cx.b;
  const Arg& a = cx.arg(arg);
  if (a.kind != Arg::Kind::TensorList)
    cx.fail("argument " + std::to_string(arg) + " is not a list of optional tensors");
  std::vector<int64_t> present = a.ints;
  if (present.empty()) present.assign(a.values.size(), 1);
  size_t n_present = std::count_if(present.begin(), present.end(), [](int64_t p) { return p != 0; });
  if (n_present != a.values.size()) cx.fail("the presence list of the indices does not match its tensors");
  if (static_cast<int64_t>(present.size()) > self.rank())
    cx.fail("too many indices for tensor of dimension " + std::to_string(self.rank()) + " (got " +
                std::to_string(present.size()) + ")",
            ErrorKind::Index);
  Advanced adv;
  std::vector<Value> idxs;
  for (size_t p = 0, j = 0; p < present.size(); ++p) {
    if (!present[p]) continue;
    idxs.push_back(index_arg(cx, a.values[j++]));
    adv.positions.push_back(static_cast<int64_t>(p));
  }
  if (idxs.empty()) return adv;
  adv.batch = idxs[0].dims();
  for (const Value& i : idxs) {
    try {
      adv.batch = hlo::broadcast_shapes(adv.batch, i.dims());
    } catch (const hlo::BuildError&) {
      std::string shapes;
      for (const Value& k : idxs) shapes += (shapes.empty() ? "" : ", ") + dims_str(k.dims());
      cx.fail("shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes);
    }
  }
  int64_t nb = static_cast<int64_t>(adv.batch.size());
  bool nonempty = numel(adv.batch) > 0;
  std::vector<Value> parts;
  for (size_t j = 0; j < idxs.size(); ++j) {
    int64_t p = adv.positions[j], size = self.dims()[p];
    adv.empty_dim |= size == 0;
    Value idx = b.broadcast_to(idxs[j], adv.batch);
    // A bucketed dim is indexed against its true size.
    Value true_size = self.type.is_dynamic(p) ? b.convert(b.dimension_size(self, p), DType::I64) : Value{};
    if (nonempty) check_range(cx, idx, size, p, true, false, ErrorKind::Index, true_size);
    for (int64_t i = 0; i < nb; ++i) {
      bool known = false;
      for (const auto& [d, n] : adv.batch_sizes) known |= d == i;
      if (idx.type.is_dynamic(i) && !known) adv.batch_sizes.emplace_back(i, b.dimension_size(idx, i));
    }
    parts.push_back(b.to_static(b.reshape(wrap_negative(b, idx, size, true_size), appended(adv.batch, 1))));
  }
  adv.coords = b.concatenate(parts, nb);
  // NumPy: adjacent index dims put the batch dims in their place; otherwise
  // they go first.
  bool adjacent = adv.positions.back() - adv.positions.front() + 1 == static_cast<int64_t>(adv.positions.size());
  int64_t before = adjacent ? adv.positions.front() : 0;
  adv.before = before;
  Dims rest;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (std::find(adv.positions.begin(), adv.positions.end(), d) == adv.positions.end()) rest.push_back(d);
  for (size_t i = 0; i < rest.size(); ++i) {
    int64_t at = static_cast<int64_t>(i) < before ? static_cast<int64_t>(i) : static_cast<int64_t>(i) + nb;
    adv.offset_dims.push_back(at);
  }
  adv.result.assign(rest.size() + nb, 0);
  for (size_t i = 0; i < rest.size(); ++i) adv.result[adv.offset_dims[i]] = self.dims()[rest[i]];
  adv.rest = rest;
  for (int64_t i = 0; i < nb; ++i) adv.result[before + i] = adv.batch[i];
  return adv;
}

V index_tensor(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  Advanced adv = advanced_index(cx, self, 1);
  if (adv.positions.empty()) return {self};
  if (adv.empty_dim && numel(adv.batch) > 0)
    cx.fail("index is out of bounds for dimension with size 0", ErrorKind::Index);
  if (adv.empty_dim || numel(adv.result) == 0) return {b.full(0, TensorType{self.dtype(), adv.result})};
  Dims slice = self.dims();
  for (int64_t p : adv.positions) slice[p] = 1;
  // A bucketed self is gathered padded (the indices stay inside its true
  // sizes); its non-indexed dims keep their true sizes in the result. So do
  // bucketed index tensors: their padding gathers unspecified (clamped)
  // elements past the result's true sizes, and the range checks above saw
  // only their true elements.
  Value r = b.gather(b.to_static(self), adv.coords, adv.offset_dims, adv.positions, adv.positions, slice, adv.result);
  for (size_t i = 0; i < adv.rest.size(); ++i)
    if (self.type.is_dynamic(adv.rest[i]))
      r = b.set_dimension_size(r, b.dimension_size(self, adv.rest[i]), adv.offset_dims[i]);
  for (const auto& [d, n] : adv.batch_sizes) r = b.set_dimension_size(r, n, adv.before + d);
  return {r};
}

// self[mask] = values (or +=) for one bool/uint8 mask over dims [p, p + m)
// of self, the other list entries None: a select, no data-dependent shape,
// as long as `values` does not need the number of true elements (a scalar,
// or a value per non-masked element). Returns false when the indices are
// not a lone mask.
bool mask_put(Context& cx, Value self, Value values, bool accumulate, Value& out) {
  auto& b = cx.b;
  const Arg& a = cx.arg(1);
  if (a.kind != Arg::Kind::TensorList || a.values.size() != 1) return false;
  Value mask = a.values[0];
  if (mask.dtype() != DType::Bool && mask.dtype() != DType::U8) return false;
  std::vector<int64_t> present = a.ints.empty() ? std::vector<int64_t>{1} : a.ints;
  int64_t p = std::find(present.begin(), present.end(), 1) - present.begin();
  int64_t m = mask.rank(), r = self.rank();
  Dims masked(self.dims().begin() + std::min(p, r), self.dims().begin() + std::min(p + m, r));
  if (p + m > r || masked != mask.dims())
    cx.fail("The shape of the mask " + dims_str(mask.dims()) +
            " at index 0 does not match the shape of the indexed tensor " + dims_str(self.dims()) + " at index " +
            std::to_string(p));
  // self[mask] has shape pre + [K] + post; `values` must broadcast to it for any K.
  Dims pre(self.dims().begin(), self.dims().begin() + p), post(self.dims().begin() + p + m, self.dims().end());
  Dims one_k = pre, spread = pre;
  one_k.push_back(1);
  one_k.insert(one_k.end(), post.begin(), post.end());
  for (int64_t i = 0; i < m; ++i) spread.push_back(1);
  spread.insert(spread.end(), post.begin(), post.end());
  bool fits = false;
  try {
    fits = hlo::broadcast_shapes(values.dims(), one_k) == one_k;
  } catch (const hlo::BuildError&) {
  }
  if (!fits)
    cx.fail(
        "boolean (mask) indices are data-dependent: self[mask] = values is supported when values is a scalar or has "
        "one value per non-masked element (shape " +
        dims_str(one_k) + "), got values of shape " + dims_str(values.dims()));
  Value upd = b.broadcast_to(b.reshape(b.broadcast_to(values, one_k), spread), self.dims());
  Value pred = mask.dtype() == DType::Bool ? mask : b.compare(mask, b.constant(0, DType::U8), "NE");
  Dims bdims;
  for (int64_t i = 0; i < m; ++i) bdims.push_back(p + i);
  pred = b.broadcast_in_dim(pred, self.dims(), bdims);
  if (accumulate) {
    Value added = b.binary(hlo::sum_op(self.dtype()), self, upd);
    out = b.select(pred, added, self);
  } else {
    out = b.select(pred, upd, self);
  }
  return true;
}

// index_put(self, indices, values, accumulate): self[indices] = values (or +=).
V index_put(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  if (cx.tensor(2).dtype() != self.dtype())
    cx.fail("Index put requires the source and destination dtypes match, got " +
            std::string(hlo::dtype_name(self.dtype())) + " for the destination and " +
            std::string(hlo::dtype_name(cx.tensor(2).dtype())) + " for the source.");
  Value values = cx.as(2, self.dtype());
  bool accumulate = cx.flag_or(3, false);
  Value masked;
  if (mask_put(cx, self, values, accumulate, masked)) return {masked};
  Advanced adv = advanced_index(cx, self, 1);
  // Any index into a dim of size 0 is out of range; CPU says so before it
  // checks the values' shape.
  if (adv.empty_dim && numel(adv.batch) > 0)
    cx.fail("index is out of bounds for dimension with size 0", ErrorKind::Index);
  Dims target = adv.positions.empty() ? self.dims() : adv.result;
  try {
    if (hlo::broadcast_shapes(values.dims(), target) != target) throw hlo::BuildError("");
  } catch (const hlo::BuildError&) {
    cx.fail("shape mismatch: value tensor of shape " + dims_str(values.dims()) +
            " cannot be broadcast to indexing result of shape " + dims_str(target));
  }
  Value upd = b.broadcast_to(values, target);
  if (adv.positions.empty()) return {accumulate ? b.binary(hlo::sum_op(self.dtype()), self, upd) : upd};
  if (adv.empty_dim || numel(adv.result) == 0 || self.type.numel() == 0) return {self};
  return {b.scatter(self, adv.coords, upd, adv.offset_dims, adv.positions, adv.positions,
                    accumulate ? hlo::sum_op(self.dtype()) : "")};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
// scale_grad_by_freq): rows of grad_output summed into their weight rows.
V embedding_dense_backward(Context& cx) {
  auto& b = cx.b;
  Value grad = cx.tensor(0);
  // ATen checks the indices' dtype (Long or Int), then reads grad.size(-1).
  DType it = cx.tensor(1).dtype();
  if (it != DType::I64 && it != DType::I32)
    cx.fail("Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; but got " +
            std::string(hlo::scalar_type_name(it)) + " instead (while checking arguments for embedding_backward)");
  if (grad.rank() == 0) cx.fail("Dimension specified as -1 but tensor has no dimensions", ErrorKind::Index);
  Value idx = index_arg(cx, cx.tensor(1));
  int64_t num_weights = cx.integer(2), padding_idx = cx.integer(3);
  bool scale = cx.flag_or(4, false);
  int64_t n = idx.type.numel();
  if (grad.rank() != idx.rank() + 1 || !std::equal(idx.dims().begin(), idx.dims().end(), grad.dims().begin()))
    cx.fail("grad_output of shape " + dims_str(grad.dims()) + " does not match indices of shape " +
            dims_str(idx.dims()) + " plus the embedding dim");
  int64_t dsize = grad.dims().back();
  DType out = grad.dtype(), t = hlo::opmath_type(out);
  Value zeros = b.full(0, TensorType{t, {num_weights, dsize}});
  if (n == 0) return {b.convert(zeros, out)};
  idx = b.reshape(idx, {n});
  check_range(cx, idx, num_weights, 0, false, true);
  Value g = b.reshape(b.convert(grad, t), {n, dsize});
  if (padding_idx >= 0) {
    Value is_pad = b.compare(idx, b.constant(padding_idx, DType::I64), "EQ");
    g = b.select(b.broadcast_in_dim(is_pad, {n, dsize}, {0}), b.constant(0, t), g);
  }
  Value rows = b.reshape(idx, {n, 1});
  if (scale) {
    Value counts = b.scatter(b.full(0, TensorType{t, {num_weights}}), rows, b.full(1, TensorType{t, {n}}), {}, {0}, {0},
                             "stablehlo.add");
    Value per_row = b.take_along(counts, idx, 0);
    g = b.div(g, b.broadcast_in_dim(per_row, {n, dsize}, {0}));
  }
  return {b.convert(b.scatter(zeros, rows, g, {1}, {0}, {0}, "stablehlo.add"), out)};
}

// ---- index_fill, index_copy, index_reduce, take, put

// The 1-D i64 index of an index_* op along `dim` of `self` (which is at
// least 1-D); a 0-d index counts as one element.
Value vector_index(Context& cx, Value index, const char* name) {
  if (index.rank() > 1) cx.fail(std::string(name) + "(): Index is supposed to be a vector");
  return cx.b.reshape(index_arg(cx, index), {index.type.numel()});
}

// index_fill.int_Scalar / int_Tensor(self, dim, index, value): every slice
// self[.., index[i], ..] set to value; negative indices wrap.
V index_fill(Context& cx) {
  auto& b = cx.b;
  Value self0 = cx.tensor(0);
  Value self = at_least_1d(b, self0);
  // ATen's order: the value's rank, the index dtype (IndexError), the dim,
  // then no complex value into a real self.
  if (cx.arg(3).kind == Arg::Kind::Tensor && cx.tensor(3).rank() != 0)
    cx.fail("index_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
            std::to_string(cx.tensor(3).rank()) + " dimension(s).");
  if (cx.tensor(2).dtype() != DType::I64) cx.fail("index_fill_(): Expected dtype int64 for index.", ErrorKind::Index);
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  if (cx.tensor(2).rank() > 1) cx.fail("Index has to be a vector/scalar");
  if (!hlo::is_complex(self.dtype()) && hlo::is_complex(cx.tensor(3).dtype()))
    cx.fail("index_fill_(): Converting complex Scalar to non-complex type is not supported");
  Value idx = vector_index(cx, cx.tensor(2), "index_fill_");
  int64_t n = idx.dims()[0], size = self.dims()[dim];
  if (n == 0 || self.type.numel() == 0) return {self0};
  check_range(cx, idx, size, dim, true);
  idx = wrap_negative(b, idx, size);
  // hit[j]: some index names position j of dim.
  TensorType grid{DType::I64, {n, size}};
  Value eq = b.compare(b.broadcast_in_dim(idx, grid.dims, {0}), b.iota(grid, 1), "EQ");
  Value hit = b.reduce(eq, b.constant(0, DType::Bool), {0}, "stablehlo.or");
  Value value = b.convert(cx.tensor(3), self.dtype());
  Value r = b.select(b.broadcast_in_dim(hit, self.dims(), {dim}), b.broadcast_to(value, self.dims()), self);
  return {b.reshape(r, self0.dims())};
}

// The checks index_copy and index_reduce share: source has self's shape
// except along dim, where it has one slice per index.
void check_index_source(Context& cx, Value self, Value source, int64_t dim, int64_t n, const char* name) {
  bool ok = source.rank() == self.rank() && source.dims()[dim] == n;
  for (int64_t d = 0; ok && d < self.rank(); ++d) ok = d == dim || source.dims()[d] == self.dims()[d];
  if (!ok)
    cx.fail(std::string(name) +
            "(): Source/destination tensor must have same slice shapes, and the source must have "
            "one slice per index: self " +
            dims_str(self.dims()) + ", source " + dims_str(source.dims()) + ", dim " + std::to_string(dim) + ", " +
            std::to_string(n) + " indices");
}

// The index of an index_copy/index_reduce spread over source's shape, for
// a scatter along dim.
Value spread_index(hlo::Builder& b, Value idx, const Value& source, int64_t dim) {
  return b.broadcast_in_dim(idx, source.dims(), {dim});
}

// index_copy(self, dim, index, source): self[.., index[i], ..] = source[.., i, ..].
V index_copy(Context& cx) {
  auto& b = cx.b;
  Value self0 = cx.tensor(0);
  Value self = at_least_1d(b, self0);
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  {
    // ATen's index_copy meta, in its order.
    Value index = cx.tensor(2), src0 = cx.tensor(3);
    if (index.rank() >= 2)
      cx.fail("index_copy_(): Index should have dimension 1 or 0 (got " + std::to_string(index.rank()) + ")",
              ErrorKind::Index);
    int64_t n = index.type.numel();
    if (src0.rank() == 0 && n != 1)
      cx.fail("index_copy_(): When source is scalar, index should have one element (got " + std::to_string(n) + ")",
              ErrorKind::Index);
    if (src0.rank() != self0.rank() && src0.rank() != 0 && self0.rank() != 0)
      cx.fail(
          "index_copy_(): When source and destination are not scalars, their dimensionality must match. Source "
          "dimensionality (" +
              std::to_string(src0.rank()) + "), destination dimensionality (" + std::to_string(self0.rank()) + ")",
          ErrorKind::Index);
    if (index.dtype() != DType::I64)
      cx.fail("index_copy_(): Expected a long tensor for index, but got " +
              std::string(hlo::dtype_name(index.dtype())));
    if (self0.dtype() != src0.dtype())
      cx.fail("index_copy_(): self and source expected to have the same dtype, but got (self) " +
              std::string(hlo::dtype_name(self0.dtype())) + " and (source) " +
              std::string(hlo::dtype_name(src0.dtype())));
    Dims ss = self0.dims(), rs = src0.dims();
    if (!ss.empty()) ss.erase(ss.begin() + dim);
    if (!rs.empty() && dim < static_cast<int64_t>(rs.size())) rs.erase(rs.begin() + dim);
    if (ss != rs)
      cx.fail("index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: " +
              dims_str(ss) + " at dimension " + std::to_string(dim) + " and source slice shape: " + dims_str(rs) +
              " at dimension 0.");
    if (src0.rank() > 0 && n != src0.dims()[dim])
      cx.fail("index_copy_(): Number of indices (" + std::to_string(n) + ") should be equal to source.size(dim) (" +
                  std::to_string(src0.dims()[dim]) + ")",
              ErrorKind::Index);
  }
  Value idx = vector_index(cx, cx.tensor(2), "index_copy_");
  Value source = at_least_1d(b, cx.as(3, self.dtype()));
  int64_t n = idx.dims()[0];
  check_index_source(cx, self, source, dim, n, "index_copy_");
  if (n == 0 || self.type.numel() == 0) return {self0};
  check_range(cx, idx, self.dims()[dim], dim, false);
  Value r = scatter_along(b, self, spread_index(b, idx, source, dim), source, dim, "");
  return {b.reshape(r, self0.dims())};
}

// index_reduce(self, dim, index, source, reduce, *, include_self): reduce is
// prod, mean, amax or amin.
V index_reduce(Context& cx) {
  auto& b = cx.b;
  Value self0 = cx.tensor(0);
  Value self = at_least_1d(b, self0);
  std::string red = cx.str(4);
  if (red != "prod" && red != "mean" && red != "amax" && red != "amin")
    cx.fail("index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got " + red + ".");
  int64_t dim = cx.dim(cx.integer(1), self.rank());
  check_index_func(cx, self0, dim, cx.tensor(2), cx.tensor(3), "index_reduce_");
  Value idx = vector_index(cx, cx.tensor(2), "index_reduce_");
  Value source = at_least_1d(b, cx.as(3, self.dtype()));
  int64_t n = idx.dims()[0];
  check_index_source(cx, self, source, dim, n, "index_reduce_");
  if (n == 0 || self.type.numel() == 0) return {self0};
  check_range(cx, idx, self.dims()[dim], dim, false);
  Value r = scatter_reduce_into(b, self, spread_index(b, idx, source, dim), source, dim, red, cx.flag_or(5, true));
  return {b.reshape(r, self0.dims())};
}

// take(self, index): self.flatten()[index], shaped like index; negative
// indices wrap.
V take(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  Value index = cx.tensor(1);
  if (index.dtype() != DType::I64)
    cx.fail("take(): Expected a long tensor for index, but got " + std::string(hlo::dtype_name(index.dtype())));
  int64_t n = index.type.numel(), size = self.type.numel();
  if (n == 0) return {b.full(0, TensorType{self.dtype(), index.dims()})};
  if (size == 0) cx.fail("take(): tried to take from an empty tensor");
  Value idx = b.reshape(index, {n});
  check_range(cx, idx, size, 0, true);
  idx = wrap_negative(b, idx, size);
  return {b.reshape(b.take_along(b.reshape(self, {size}), idx, 0), index.dims())};
}

// put(self, index, source, accumulate): self.flatten()[index] = source (or
// +=); negative indices wrap.
V put(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  Value index = cx.tensor(1);
  Value source = cx.as(2, self.dtype());
  bool accumulate = cx.flag_or(3, false);
  if (index.dtype() != DType::I64)
    cx.fail("put_(): Expected a long tensor for index, but got " + std::string(hlo::dtype_name(index.dtype())));
  if (cx.tensor(2).dtype() != self.dtype())
    cx.fail("put_(): self and source expected to have the same dtype, but got self.dtype = " +
            std::string(hlo::dtype_name(self.dtype())) +
            " and source.dtype = " + std::string(hlo::dtype_name(cx.tensor(2).dtype())));
  int64_t n = index.type.numel(), size = self.type.numel();
  if (source.type.numel() != n)
    cx.fail("put_(): Expected source and index to have the same number of elements, but got source.numel() = " +
                std::to_string(source.type.numel()) + ", index.numel() = " + std::to_string(n),
            ErrorKind::Index);
  if (n == 0) return {self};
  if (size == 0) cx.fail("put_(): Tried to put elements into an empty tensor");
  Value idx = b.reshape(index, {n});
  check_range(cx, idx, size, 0, true);
  idx = wrap_negative(b, idx, size);
  Value flat = b.reshape(self, {size});
  Value src = b.reshape(source, {n});
  Value r = accumulate ? scatter_sum(b, flat, idx, src, 0) : scatter_along(b, flat, idx, src, 0, "");
  return {b.reshape(r, self.dims())};
}

}  // namespace

std::vector<Entry> indexing_lowerings() {
  return {
      {"aten::index_select", index_select, Traits().set_out_same_dtype()},
      {"aten::gather", gather, Traits().set_out_same_dtype()},
      {"aten::scatter.src", scatter_replace},
      {"aten::scatter.value", scatter_replace},
      {"aten::scatter.reduce", scatter_reduce_legacy},
      {"aten::scatter.value_reduce", scatter_reduce_legacy},
      {"aten::scatter_add", scatter_add},
      {"aten::scatter_reduce.two", scatter_reduce_two},
      {"aten::index_add", index_add},
      {"aten::index.Tensor", index_tensor, Traits().set_expand_masks().set_shape_generic()},
      {"aten::index_put", index_put, Traits().set_overlap_allowed().set_expand_masks()},
      // index's backward and index_put_(accumulate=True) call _index_put_impl_ (its in-place form).
      {"aten::_index_put_impl", index_put, Traits().set_overlap_allowed().set_expand_masks()},
      {"aten::embedding_dense_backward", embedding_dense_backward},
      {"aten::index_fill.int_Scalar", index_fill, Traits().set_overlap_allowed()},
      {"aten::index_fill.int_Tensor", index_fill, Traits().set_overlap_allowed()},
      {"aten::index_copy", index_copy},
      {"aten::index_reduce", index_reduce},
      {"aten::take", take, Traits().set_out_same_dtype()},
      {"aten::put", put},
  };
}

}  // namespace torch_pjrt::lowering
