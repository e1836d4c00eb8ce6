#include "engine/bucketed_view.h"

#include <algorithm>

namespace torch_pjrt::engine {

using hlo::DType;
using hlo::TensorType;
using hlo::Value;

namespace {

// Element `k` of the rank-1 i64 value `v`, as a rank-0 value.
Value element(hlo::Builder& b, Value v, int64_t k) { return b.reshape(b.slice(v, {k}, {k + 1}, {1}), {}); }

// The flat index of each element of `ref`'s view at its padded sizes: offset
// plus each position times its true stride (from `shape`).
Value bucketed_indices(hlo::Builder& b, const BucketedRef& ref, Value shape, Value offset) {
  const int64_t rank = static_cast<int64_t>(ref.padded.size());
  const TensorType index_type{DType::I64, ref.padded};
  Value index = b.broadcast_in_dim(offset, ref.padded, {});
  for (int64_t d = 0; d < rank; ++d) {
    Value stride = b.broadcast_in_dim(element(b, shape, rank + d), ref.padded, {});
    index = b.add(index, b.mul(b.iota(index_type, d), stride));
  }
  return index;
}

}  // namespace

Value read_bucketed_view(hlo::Builder& b, Value flat, const BucketedRef& ref, Value shape, Value offset) {
  const int64_t rank = static_cast<int64_t>(ref.padded.size());
  hlo::Dims index_dims = ref.padded;
  index_dims.push_back(1);
  // Indices past the true sizes are clamped into the storage: they read
  // padding, which the dims' true sizes hide.
  Value index = b.reshape(bucketed_indices(b, ref, shape, offset), index_dims);
  Value v = b.gather(flat, index, {}, {0}, {0}, {1}, ref.padded);
  for (int64_t d = 0; d < rank; ++d)
    if ((ref.dynamic_sizes >> d) & 1u) v = b.set_dimension_size(v, b.convert(element(b, shape, d), DType::I32), d);
  return v;
}

Value write_bucketed_view(hlo::Builder& b, Value flat, Value update, const BucketedRef& ref, Value shape,
                          Value offset) {
  const int64_t rank = static_cast<int64_t>(ref.padded.size());
  const TensorType index_type{DType::I64, ref.padded};
  Value index = bucketed_indices(b, ref, shape, offset);
  Value inside;
  for (int64_t d = 0; d < rank; ++d) {
    if (!((ref.dynamic_sizes >> d) & 1u)) continue;
    Value size = b.broadcast_in_dim(element(b, shape, d), ref.padded, {});
    Value in = b.compare(b.iota(index_type, d), size, "LT");
    inside = inside.id < 0 ? in : b.and_(inside, in);
  }
  // Padding goes to an index past the storage: XLA's scatter skips an
  // update whose window lies out of bounds, so it writes nothing.
  if (inside.id >= 0) index = b.select(inside, index, b.full(static_cast<double>(flat.type.numel()), index_type));
  const int64_t n = index_type.numel();
  return b.scatter(flat, b.reshape(index, {n, 1}), b.reshape(b.to_static(update), {n}), {}, {0}, {0}, "");
}

TensorType capacity_of(const TensorType& r, const hlo::Dims& buckets) {
  TensorType t = r;
  for (int64_t d = 0; d < r.rank(); ++d)
    if (r.is_dynamic(d)) t.dims[d] = buckets.at(d);
  return t;
}

namespace {

// `r` (with dynamic dims) as a static value at its capacity: the true sizes
// fit the buckets, so cutting loses nothing.
Value static_at_buckets(hlo::Builder& b, Value r, const hlo::Dims& buckets) {
  const int64_t rank = r.rank();
  Value padded = b.to_static(r);
  const TensorType target = capacity_of(r.type, buckets);
  hlo::Dims zero(rank, 0), one(rank, 1), high(rank, 0), limit = padded.dims();
  bool cut = false, grow = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (target.dims[d] < limit[d]) limit[d] = target.dims[d], cut = true;
    if (target.dims[d] > padded.dims()[d]) high[d] = target.dims[d] - padded.dims()[d], grow = true;
  }
  if (cut) padded = b.slice(padded, zero, limit, one);
  if (grow) padded = b.pad(padded, b.constant(0, padded.dtype()), zero, high, zero);
  return padded;
}

}  // namespace

Value fit_to_buckets(hlo::Builder& b, Value r, Value sizes, const hlo::Dims& buckets) {
  Value v = static_at_buckets(b, r, buckets);
  for (int64_t d = 0; d < r.rank(); ++d)
    if (r.type.is_dynamic(d)) v = b.set_dimension_size(v, b.convert(element(b, sizes, d), DType::I32), d);
  return v;
}

Value compact_bucketed_result(hlo::Builder& b, Value r, Value sizes, const hlo::Dims& buckets) {
  const int64_t rank = r.rank();
  int first = -1, count = 0;
  for (int64_t d = 0; d < rank; ++d)
    if (r.type.is_dynamic(d)) {
      if (first < 0) first = static_cast<int>(d);
      ++count;
    }
  Value padded = static_at_buckets(b, r, buckets);
  const int64_t cap = padded.type.numel();
  bool prefix = count == 1;  // one dynamic dim with only size-1 dims before it
  for (int d = 0; d < first; ++d) prefix &= padded.dims()[d] == 1;
  if (prefix) return b.reshape(padded, {cap});
  // Element i of the flat result is the padded element at i's multi-index
  // in the true sizes (row-major).
  const TensorType flat_index{DType::I64, {cap}};
  Value rest = b.iota(flat_index, 0);
  std::vector<Value> index(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value size = b.broadcast_in_dim(element(b, sizes, d), {cap}, {});
    index[d] = d == 0 ? rest : b.binary("stablehlo.remainder", rest, size);
    if (d > 0) rest = b.div(rest, size);
  }
  for (auto& v : index) v = b.reshape(v, {cap, 1});
  hlo::Dims all, ones(rank, 1);
  for (int64_t d = 0; d < rank; ++d) all.push_back(d);
  return b.gather(padded, b.concatenate(index, 1), {}, all, all, ones, {cap});
}

}  // namespace torch_pjrt::engine
