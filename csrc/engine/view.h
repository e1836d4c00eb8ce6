// The storage and view model: a storage is one flat 1-D device buffer; a
// tensor is a view of it (sizes, strides, offset, dtype), exactly as on CPU.
// Programs read a view out of the flat buffer and write a view back into a
// new flat buffer. The view spec is static and part of the compile key.
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
};

// The view's elements as a tensor of its sizes, read from `flat`.
hlo::Value read_view(hlo::Builder& b, hlo::Value flat, const ViewSpec& view);
// A new flat buffer equal to `flat` with the view's elements replaced by
// `update` (already of the view's sizes and dtype).
hlo::Value write_view(hlo::Builder& b, hlo::Value flat, hlo::Value update, const ViewSpec& view);

}  // namespace torch_pjrt::engine
