// The one torch <-> core dtype mapping, and a tpu tensor's view as the engine
// sees it (sizes, strides, offset, dtype).
#include "torch/common.h"

namespace torch_pjrt::glue {

using hlo::DType;

hlo::DType to_hlo(at::ScalarType t) {
  switch (t) {
    case at::kBool:
      return DType::Bool;
    case at::kByte:
      return DType::U8;
    case at::kChar:
      return DType::I8;
    case at::kShort:
      return DType::I16;
    case at::kInt:
      return DType::I32;
    case at::kLong:
      return DType::I64;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    case at::kFloat:
      return DType::F32;
    case at::kDouble:
      return DType::F64;
    case at::kComplexFloat:
      return DType::C64;
    case at::kComplexDouble:
      return DType::C128;
    case at::kUInt16:
      return DType::U16;
    case at::kUInt32:
      return DType::U32;
    case at::kUInt64:
      return DType::U64;
    default:
      break;
  }
  TORCH_CHECK_TYPE(false, "torch_pjrt: dtype ", t, " is not supported on the tpu device");
}

at::ScalarType to_torch(hlo::DType t) {
  static const at::ScalarType table[] = {at::kBool,   at::kByte,   at::kChar,         at::kShort,         at::kInt,
                                         at::kLong,   at::kHalf,   at::kBFloat16,     at::kFloat,         at::kDouble,
                                         at::kUInt32, at::kUInt64, at::kComplexFloat, at::kComplexDouble, at::kUInt16};
  static_assert(sizeof(table) / sizeof(table[0]) == hlo::kNumDTypes, "one torch dtype per hlo::DType");
  return table[static_cast<int>(t)];
}

void view_into(const at::Tensor& t, engine::ViewSpec& v) {
  v.dtype = to_hlo(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  // A size-1 dim's stride reaches no element, and PyTorch leaves any value
  // there (x[:, -1:] of a growing x keeps x's row stride): 1 keeps it out
  // of program keys and shape histories.
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] == 1) v.strides[d] = 1;
  v.offset = t.storage_offset();
}

engine::ViewSpec view_of(const at::Tensor& t) {
  engine::ViewSpec v;
  view_into(t, v);
  return v;
}

}  // namespace torch_pjrt::glue
