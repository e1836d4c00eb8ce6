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

int64_t ViewSpec::span() const {
  if (numel() == 0) return 0;
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  return last + 1;
}

bool ViewSpec::in_bounds(int64_t storage_numel) const {
  if (numel() == 0) return true;
  for (int64_t s : strides)
    if (s < 0) return false;
  return offset >= 0 && offset + span() <= storage_numel;
}

namespace {

// Element index (past the offset) of every element of the view, as an i64
// tensor of the view's sizes.
Value element_indices(Builder& b, const ViewSpec& v) {
  TensorType t{DType::I64, v.sizes};
  Value idx = b.full(0, t);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    idx = b.add(idx, b.mul(b.iota(t, static_cast<int64_t>(d)), b.full(static_cast<double>(v.strides[d]), t)));
  }
  return idx;
}

// The box dims of a view (size > 1, stride > 0) by decreasing stride, when
// each steps over whole multiples of the next; false when it is no box.
bool box_dims(const ViewSpec& v, std::vector<int64_t>* box) {
  box->clear();
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] > 1 && v.strides[d] > 0) box->push_back(static_cast<int64_t>(d));
  // By decreasing stride, ties in dim order (an insertion sort: a few dims,
  // and std::stable_sort would allocate a buffer per view).
  for (size_t k = 1; k < box->size(); ++k)
    for (size_t j = k; j > 0 && v.strides[(*box)[j - 1]] < v.strides[(*box)[j]]; --j)
      std::swap((*box)[j - 1], (*box)[j]);
  for (size_t k = 0; k + 1 < box->size(); ++k) {
    int64_t outer = v.strides[(*box)[k]], inner = v.strides[(*box)[k + 1]];
    if (outer % inner != 0 || outer < inner * v.sizes[(*box)[k + 1]]) return false;
  }
  return true;
}

// Box dims are in stride order; the view's order puts them back, and
// broadcasts over size-1 and stride-0 dims.
Value box_to_view(Builder& b, Value x, const ViewSpec& v, const std::vector<int64_t>& box) {
  std::vector<int64_t> order(box.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return box[a] < box[c]; });
  x = b.transpose(x, Dims(order.begin(), order.end()));
  Dims bdims;
  for (int64_t k : order) bdims.push_back(box[k]);
  return b.broadcast_in_dim(x, v.sizes, bdims);
}

// A strided box: the view's span at the runtime offset (always inside the
// storage), padded to whole rows, reshaped into the box's region and sliced.
Value read_box(Builder& b, Value flat, const ViewSpec& v, Value offset) {
  std::vector<int64_t> box;
  box_dims(v, &box);
  Dims region;
  int64_t length = 1;
  if (!box.empty()) {
    region.push_back(v.sizes[box[0]]);
    for (size_t k = 0; k + 1 < box.size(); ++k) region.push_back(v.strides[box[k]] / v.strides[box[k + 1]]);
    region.push_back(v.strides[box.back()]);
    length = v.sizes[box[0]] * v.strides[box[0]];
  }
  const int64_t span = v.span();
  Value x = b.dynamic_slice(flat, {offset}, {span});
  if (length > span) x = b.pad(x, b.constant(0, v.dtype), {0}, {length - span}, {0});
  Dims box_sizes;
  if (!box.empty()) {
    x = b.reshape(x, region);
    Dims limit;
    for (int64_t d : box) limit.push_back(v.sizes[d]);
    box_sizes = limit;
    limit.push_back(1);
    x = b.slice(x, Dims(limit.size(), 0), limit, Dims(limit.size(), 1));
  }
  return box_to_view(b, b.reshape(x, box_sizes), v, box);
}

// Flat indices of the view's elements at the runtime offset, as [numel, 1].
Value flat_indices(Builder& b, const ViewSpec& v, Value offset) {
  Value idx = b.reshape(element_indices(b, v), {v.numel(), 1});
  return b.add(idx, b.broadcast_in_dim(offset, {v.numel(), 1}, {}));
}

// A box at a static offset as a static slice of the whole storage: the
// storage reshaped into [storage / outer stride, box region...] and the
// view's coordinates in it. False when the storage does not split so, or
// the view wraps a row of it.
struct StaticBox {
  std::vector<int64_t> box;  // box dims by decreasing stride
  Dims region, start, limit;
};
bool static_box(const ViewSpec& v, int64_t storage_numel, StaticBox* out) {
  if (!box_dims(v, &out->box) || out->box.empty()) return false;
  const std::vector<int64_t>& box = out->box;
  const int64_t outer = v.strides[box[0]];
  if (storage_numel % outer != 0) return false;
  Dims& region = out->region;
  region = {storage_numel / outer};
  for (size_t k = 0; k + 1 < box.size(); ++k) region.push_back(v.strides[box[k]] / v.strides[box[k + 1]]);
  region.push_back(v.strides[box.back()]);
  Dims extent;
  for (int64_t d : box) extent.push_back(v.sizes[d]);
  extent.push_back(1);
  out->start.assign(region.size(), 0);
  out->limit.assign(region.size(), 0);
  int64_t rest = v.offset;
  for (size_t k = region.size(); k-- > 0;) {
    out->start[k] = rest % region[k];
    rest /= region[k];
  }
  if (rest != 0) return false;
  for (size_t k = 0; k < region.size(); ++k) {
    out->limit[k] = out->start[k] + extent[k];
    if (out->limit[k] > region[k]) return false;
  }
  return true;
}

}  // namespace

Access access_of(const ViewSpec& v, int64_t storage_numel) {
  if (v.numel() == 0) return Access::Empty;
  if (v.is_contiguous()) return v.numel() == storage_numel ? Access::Whole : Access::Contiguous;
  thread_local std::vector<int64_t> box;  // reused: program keys ask this of every view
  return box_dims(v, &box) ? Access::Box : Access::Gather;
}

Value read_view(Builder& b, Value flat, const ViewSpec& v, Access access, Value offset) {
  switch (access) {
    case Access::Empty:
      return b.full(0, TensorType{v.dtype, v.sizes});
    case Access::Whole:
      return b.reshape(flat, v.sizes);
    case Access::Contiguous:
      return b.reshape(b.dynamic_slice(flat, {offset}, {v.numel()}), v.sizes);
    case Access::Box:
      return read_box(b, flat, v, offset);
    case Access::Gather:
      break;
  }
  // Overlapping windows (unfold, as_strided): gather element by element.
  Value g = b.gather(flat, flat_indices(b, v, offset), {}, {0}, {0}, {1}, {v.numel()});
  return b.reshape(g, v.sizes);
}

Value write_view(Builder& b, Value flat, Value update, const ViewSpec& v, Access access, Value offset) {
  switch (access) {
    case Access::Empty:
      return flat;
    case Access::Whole:
      return b.reshape(update, {flat.type.numel()});
    case Access::Contiguous:
      return b.dynamic_update_slice(flat, b.reshape(update, {v.numel()}), {offset});
    case Access::Box:
    case Access::Gather:
      break;
  }
  return b.scatter(flat, flat_indices(b, v, offset), b.reshape(update, {v.numel()}), {}, {0}, {0}, "");
}

Value read_view_at_offset(Builder& b, Value flat, const ViewSpec& v, Access access) {
  const int64_t numel = flat.type.numel();
  StaticBox sb;
  switch (access) {
    case Access::Empty:
    case Access::Whole:
      return read_view(b, flat, v, access, Value{});
    case Access::Contiguous:
      return b.reshape(b.slice(flat, {v.offset}, {v.offset + v.numel()}, {1}), v.sizes);
    case Access::Box:
      if (!static_box(v, numel, &sb)) break;
      {
        Value x = b.slice(b.reshape(flat, sb.region), sb.start, sb.limit, Dims(sb.region.size(), 1));
        Dims box_sizes;
        for (int64_t d : sb.box) box_sizes.push_back(v.sizes[d]);
        return box_to_view(b, b.reshape(x, box_sizes), v, sb.box);
      }
    case Access::Gather:
      break;
  }
  return read_view(b, flat, v, access, b.constant(static_cast<double>(v.offset), DType::I64));
}

Value write_view_at_offset(Builder& b, Value flat, Value update, const ViewSpec& v, Access access) {
  const int64_t numel = flat.type.numel();
  StaticBox sb;
  bool overlaps = false;  // a written dim of stride 0
  for (size_t d = 0; d < v.sizes.size(); ++d) overlaps |= v.sizes[d] > 1 && v.strides[d] == 0;
  if (access == Access::Box && !overlaps && static_box(v, numel, &sb)) {
    // The update's dims in box order, as a block of the reshaped storage.
    Dims kept, kept_sizes;
    for (size_t d = 0; d < v.sizes.size(); ++d)
      if (v.sizes[d] > 1) kept.push_back(static_cast<int64_t>(d)), kept_sizes.push_back(v.sizes[d]);
    Value u = b.reshape(update, kept_sizes);
    Dims perm;
    for (int64_t d : sb.box) perm.push_back(std::find(kept.begin(), kept.end(), d) - kept.begin());
    u = b.transpose(u, perm);
    Dims block;
    for (size_t k = 0; k < sb.region.size(); ++k) block.push_back(sb.limit[k] - sb.start[k]);
    u = b.reshape(u, block);
    std::vector<Value> starts;
    for (int64_t s : sb.start) starts.push_back(b.constant(static_cast<double>(s), DType::I64));
    return b.reshape(b.dynamic_update_slice(b.reshape(flat, sb.region), u, starts), {numel});
  }
  if (access == Access::Empty || access == Access::Whole) return write_view(b, flat, update, v, access, Value{});
  return write_view(b, flat, update, v, access, b.constant(static_cast<double>(v.offset), DType::I64));
}

}  // namespace torch_pjrt::engine
