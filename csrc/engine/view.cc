#include "engine/view.h"

#include <algorithm>
#include <numeric>

namespace torch_pjrt::engine {

using hlo::Builder;
using hlo::Dims;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;

int64_t ViewSpec::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool ViewSpec::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {

// Flat element index of every element of the view, as an i64 tensor of the
// view's sizes.
Value element_indices(Builder& b, const ViewSpec& v) {
  TensorType t{DType::I64, v.sizes};
  Value idx = b.full(static_cast<double>(v.offset), t);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    idx = b.add(idx, b.mul(b.iota(t, static_cast<int64_t>(d)), b.full(static_cast<double>(v.strides[d]), t)));
  }
  return idx;
}

// A view whose non-broadcast dims, ordered by decreasing stride, each step
// over whole multiples of the next: it is a strided box of the flat buffer and
// reads with pad + slice + reshape, no gather.
bool read_as_box(Builder& b, Value flat, const ViewSpec& v, Value* out) {
  std::vector<int64_t> box;  // dims with size > 1 and stride > 0
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] > 0) box.push_back(static_cast<int64_t>(d));
  std::stable_sort(box.begin(), box.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  for (size_t k = 0; k + 1 < box.size(); ++k) {
    int64_t outer = v.strides[box[k]], inner = v.strides[box[k + 1]];
    if (outer % inner != 0 || outer < inner * v.sizes[box[k + 1]]) return false;
  }
  const int64_t n = flat.type.numel();
  // Region of the flat buffer the box spans, padded when the last row's
  // stride reaches past the end of the storage.
  Dims region;
  int64_t length = 1;
  if (!box.empty()) {
    region.push_back(v.sizes[box[0]]);
    for (size_t k = 0; k + 1 < box.size(); ++k) region.push_back(v.strides[box[k]] / v.strides[box[k + 1]]);
    region.push_back(v.strides[box.back()]);
    length = v.sizes[box[0]] * v.strides[box[0]];
  }
  Value x = flat;
  if (v.offset + length > n) x = b.pad(x, b.constant(0, v.dtype), {0}, {v.offset + length - n}, {0});
  x = b.slice(x, {v.offset}, {v.offset + length}, {1});
  Dims box_sizes;
  if (!box.empty()) {
    x = b.reshape(x, region);
    Dims limit;
    for (int64_t d : box) limit.push_back(v.sizes[d]);
    box_sizes = limit;
    limit.push_back(1);
    x = b.slice(x, Dims(limit.size(), 0), limit, Dims(limit.size(), 1));
  }
  x = b.reshape(x, box_sizes);
  // Box dims are in stride order; put them back in view order, then
  // broadcast over size-1 and stride-0 dims.
  std::vector<int64_t> order(box.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return box[a] < box[c]; });
  x = b.transpose(x, Dims(order.begin(), order.end()));
  Dims bdims;
  for (int64_t k : order) bdims.push_back(box[k]);
  *out = b.broadcast_in_dim(x, v.sizes, bdims);
  return true;
}

}  // namespace

Value read_view(Builder& b, Value flat, const ViewSpec& v) {
  const int64_t n = flat.type.numel();
  if (v.numel() == 0) return b.full(0, TensorType{v.dtype, v.sizes});
  if (v.covers(n)) return b.reshape(flat, v.sizes);
  if (v.is_contiguous()) return b.reshape(b.slice(flat, {v.offset}, {v.offset + v.numel()}, {1}), v.sizes);
  Value out;
  if (read_as_box(b, flat, v, &out)) return out;
  // Overlapping windows (unfold, as_strided): gather element by element.
  Value idx = b.reshape(element_indices(b, v), {v.numel(), 1});
  Value g = b.gather(flat, idx, {}, {0}, {0}, {1}, {v.numel()});
  return b.reshape(g, v.sizes);
}

Value write_view(Builder& b, Value flat, Value update, const ViewSpec& v) {
  const int64_t n = flat.type.numel();
  if (v.numel() == 0) return flat;
  if (v.covers(n)) return b.reshape(update, {n});
  if (v.is_contiguous())
    return b.dynamic_update_slice(flat, b.reshape(update, {v.numel()}),
                                  {b.constant(static_cast<double>(v.offset), DType::I64)});
  Value idx = b.reshape(element_indices(b, v), {v.numel(), 1});
  return b.scatter(flat, idx, b.reshape(update, {v.numel()}), {}, {0}, {0}, "");
}

}  // namespace torch_pjrt::engine
