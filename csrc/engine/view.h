// The storage and view model: a storage is one flat 1-D device buffer; a
// tensor is a view of it (sizes, strides, offset, dtype), exactly as on CPU.
// Programs read a view out of the flat buffer and write a view back into a
// new flat buffer.
//
// A view's sizes, strides and dtype are static: they shape the program and
// are part of its key. Its offset is a runtime value: a program reaches the
// view at an i64 offset parameter (dynamic_slice, dynamic_update_slice or
// gather/scatter indices plus the offset), so `a[i]`, `narrow(0, i, n)` or a
// KV-cache write at `pos` compile one program for every i. The access path
// (Access) depends on the structure only, never on the offset. A compiled
// graph's views are read at their own offset instead (read_view_at_offset):
// the graph fixes it.
#pragma once

#include <cstdint>

#include "hlo/builder.h"

namespace torch_pjrt::engine {

struct ViewSpec {
  hlo::DType dtype = hlo::DType::F32;
  hlo::Dims sizes;
  hlo::Dims strides;
  int64_t offset = 0;

  int64_t numel() const;
  bool is_contiguous() const;
  // True when the view is exactly the whole storage of `storage_numel`
  // elements in row-major order.
  bool covers(int64_t storage_numel) const { return offset == 0 && numel() == storage_numel && is_contiguous(); }
  // 1 + the largest element index the view reaches past its offset (0 when
  // it is empty).
  int64_t span() const;
  // Whether every element of the view lies inside a storage of
  // `storage_numel` elements (programs clamp dynamic starts, so a view out of
  // range must be refused before it runs, never clamped).
  bool in_bounds(int64_t storage_numel) const;
};

// How a program reaches a view's elements in its storage.
//   Empty: no elements. Whole: the view is the whole storage (offset 0).
//   Contiguous: a row-major run of elements at the offset.
//   Box: a strided box (each dim steps over whole multiples of the next):
//        one dynamic_slice, then reshape and slice, no gather.
//   Gather: anything else (overlapping windows, as_strided): element indices.
enum class Access : uint8_t { Empty, Whole, Contiguous, Box, Gather };

// The access path of a view of a storage of `storage_numel` elements, from
// its structure alone (a view in bounds covering all elements has offset 0).
Access access_of(const ViewSpec& view, int64_t storage_numel);
// Whether programs take the view's offset as a parameter.
inline bool takes_offset(Access a) { return a != Access::Empty && a != Access::Whole; }

// The view's elements as a tensor of its sizes, read from `flat`. `offset` is
// the rank-0 i64 offset parameter when takes_offset(access), else unused.
hlo::Value read_view(hlo::Builder& b, hlo::Value flat, const ViewSpec& view, Access access, hlo::Value offset);
// A new flat buffer equal to `flat` with the view's elements replaced by
// `update` (already of the view's sizes and dtype).
hlo::Value write_view(hlo::Builder& b, hlo::Value flat, hlo::Value update, const ViewSpec& view, Access access,
                      hlo::Value offset);

// The same at the view's own offset, fixed in the program (compiled graphs,
// whose views are fixed by the graph): static slices of the storage reshaped
// into the view's box, which XLA fuses into their users, where it can; the
// paths above at a constant offset elsewhere.
hlo::Value read_view_at_offset(hlo::Builder& b, hlo::Value flat, const ViewSpec& view, Access access);
hlo::Value write_view_at_offset(hlo::Builder& b, hlo::Value flat, hlo::Value update, const ViewSpec& view,
                                Access access);

}  // namespace torch_pjrt::engine
