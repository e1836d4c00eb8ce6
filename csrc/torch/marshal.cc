// Marshalling: one schema argument (an IValue) into one engine CallArg.
#include <cmath>
#include <cstring>

#include "torch/ops.h"

namespace torch_pjrt::glue {

using Kind = CallArg::Kind;

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

[[noreturn]] void device_mismatch(const at::Tensor& a, c10::DeviceIndex device) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              static_cast<int>(device), " and ", a.device(), "!");
}

// ---------------------------------------------------------------- arguments

ArgType arg_type(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  switch (t->kind()) {
    case c10::TypeKind::TensorType:
      return ArgType::Tensor;
    case c10::TypeKind::NumberType:
    case c10::TypeKind::FloatType:
      return ArgType::Scalar;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return ArgType::Int;
    case c10::TypeKind::BoolType:
      return ArgType::Bool;
    case c10::TypeKind::ScalarTypeType:
      return ArgType::DType;
    case c10::TypeKind::StringType:
      return ArgType::String;
    case c10::TypeKind::GeneratorType:
      return ArgType::Generator;
    case c10::TypeKind::ListType: {
      c10::TypePtr e = t->castRaw<c10::ListType>()->getElementType();
      if (e->kind() == c10::TypeKind::TensorType) return ArgType::TensorList;
      if (auto oe = e->cast<c10::OptionalType>())
        if (oe->getElementType()->kind() == c10::TypeKind::TensorType) return ArgType::OptTensorList;
      if (e->kind() == c10::TypeKind::IntType || e->kind() == c10::TypeKind::SymIntType) return ArgType::Ints;
      if (e->kind() == c10::TypeKind::BoolType) return ArgType::Bools;
      if (e->kind() == c10::TypeKind::NumberType || e->kind() == c10::TypeKind::FloatType) return ArgType::ScalarList;
      return ArgType::Ignore;
    }
    default:
      return ArgType::Ignore;  // Layout, Device, MemoryFormat: no effect on the program
  }
}

void set_scalar(CallArg& a, const c10::Scalar& s) {
  a.kind = Kind::Scalar;
  a.host_tensor = false;
  if (s.isBoolean()) {
    a.scalar_dtype = hlo::DType::Bool;
    a.scalar_bytes[0] = s.toBool();
  } else if (s.isIntegral(false)) {
    a.scalar_dtype = hlo::DType::I64;
    int64_t v = s.toLong();
    std::memcpy(a.scalar_bytes, &v, 8);
  } else if (s.isComplex()) {
    // A Python complex travels as complex128, as a Python float travels as
    // float64: the program rounds it to the op's dtype, as CPU does.
    c10::complex<double> z = s.toComplexDouble();
    static_assert(sizeof z == sizeof a.scalar_bytes);
    a.scalar_dtype = hlo::DType::C128;
    std::memcpy(a.scalar_bytes, &z, sizeof z);
  } else {
    a.scalar_dtype = hlo::DType::F64;
    double v = s.toDouble();
    std::memcpy(a.scalar_bytes, &v, 8);
  }
}

void set_tensor(CallArg& a, const at::Tensor& t, DeviceCheck& dc) {
  if (t.is_privateuseone()) {
    dc.see(t);
    a.kind = Kind::Tensor;
    a.tensor.slot = slot_of(t);
    view_into(t, a.tensor.view);
    return;
  }
  // A CPU scalar (Python number or zero-dim tensor) mixes with tpu tensors
  // as on CUDA; anything else is a device mismatch.
  if (t.dim() == 0 && t.is_cpu()) {
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      set_scalar(a, t.item());
    } else {
      a.kind = Kind::Scalar;
      a.host_tensor = true;
      a.scalar_dtype = to_hlo(t.scalar_type());
      TORCH_CHECK_TYPE(t.element_size() <= static_cast<int64_t>(sizeof a.scalar_bytes), "torch_pjrt: dtype ",
                       t.scalar_type(), " is not supported as a CPU scalar on the tpu device");
      std::memcpy(a.scalar_bytes, t.data_ptr(), t.element_size());
    }
    return;
  }
  device_mismatch(t, dc.device < 0 ? 0 : dc.device);
}

thread_local std::vector<std::unique_ptr<OpCall>> PooledCall::t_pool;
thread_local size_t PooledCall::t_depth = 0;
thread_local std::vector<CallArg::TensorRef> PooledCall::t_spare_targets;
thread_local std::vector<CallArg> PooledCall::t_spare_args;

c10::SmallVector<at::Tensor, 4> fresh_tensors(OpCall& call, const engine::CallResult& r) {
  c10::SmallVector<at::Tensor, 4> out;
  const size_t n = r.deferred ? r.types->size() : r.buffers.size();
  c10::SmallVector<Slot*, 4> slots;
  for (size_t k = 0; k < n; ++k) {
    const auto& t = (*r.types)[k];
    const int64_t capacity = k < r.capacities.size() ? r.capacities[k] : 0;
    out.push_back(new_tensor(t.dims, to_torch(t.dtype), call.device, r.deferred ? nullptr : r.buffers[k], capacity));
    if (r.deferred) slots.push_back(slot_of(out.back()));
  }
  if (r.deferred) Engine::get().join(call, slots.data(), slots.size(), r);
  return out;
}

}  // namespace torch_pjrt::glue
