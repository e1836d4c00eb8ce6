// Shared pieces of the torch glue: the torch <-> core dtype mapping, how a
// tensor maps to its storage slot and view, and error translation. Each
// declaration names the file that defines it (device.h lists the device's).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <string>

#include "engine/engine.h"

namespace torch_pjrt::glue {

using engine::Engine;
using engine::Slot;

// dtypes.cc: the one torch <-> hlo dtype mapping. Throws a TypeError for
// dtypes the device does not support.
hlo::DType to_hlo(at::ScalarType t);
at::ScalarType to_torch(hlo::DType t);

// The slot behind a tpu tensor's storage.
inline Slot* slot_of(const at::Tensor& t) { return static_cast<Slot*>(t.storage().data_ptr().get_context()); }
// dtypes.cc: a tensor's view (sizes, strides, offset, dtype).
engine::ViewSpec view_of(const at::Tensor& t);
// Writes t's view into `v`, reusing its storage.
void view_into(const at::Tensor& t, engine::ViewSpec& v);
inline engine::CallArg::TensorRef ref_of(const at::Tensor& t) { return {slot_of(t), view_of(t)}; }
// ref_of into an existing reference, reusing its view's storage.
inline void set_ref(engine::CallArg::TensorRef& r, const at::Tensor& t) {
  r.slot = slot_of(t);
  view_into(t, r.view);
}

// device.cc: the thread's current tpu device.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex d);

// allocator.cc
c10::Allocator* tpu_allocator();
// A new contiguous tpu tensor whose storage takes `buffer` (may be null).
// `capacity` > 0: the storage holds that many elements (a bucketed result's
// buffer), the tensor its first ones.
at::Tensor new_tensor(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device,
                      runtime::BufferPtr buffer = nullptr, int64_t capacity = 0);
// storage_kernels.cc: gives `storage` a new buffer of `nbytes` that keeps the
// first min(old, new) bytes (the rest is zero), as untyped_storage().resize_()
// and Tensor.resize_ need. `dtype`: what the kept bytes are (U8 when unknown).
void resize_storage(const c10::Storage& storage, int64_t nbytes, hlo::DType dtype);

// matmul_precision.cc: passes torch.get_float32_matmul_precision() to the
// engine when it changed (called before each op runs): "highest" is exact
// float32, "high" and "medium" let the platform use bf16 passes
// (hlo::Precision).
void follow_matmul_precision();

// generator.cc: seed and offset for one random op from the device's default
// generator or the one given; advances the generator.
void next_rng(const std::optional<at::Generator>& gen, c10::DeviceIndex device, uint64_t out[2]);
// Sets the seed of every device's default generator.
void manual_seed_all(uint64_t seed);
const at::Generator& default_generator(c10::DeviceIndex device);

// errors.cc: runs `fn`, turning core exceptions into the matching torch
// errors (and so Python exceptions). `op` names the ATen op for messages.
template <typename Fn>
auto translate_errors(const std::string& op, Fn&& fn) -> decltype(fn());
[[noreturn]] void rethrow_as_torch(const std::string& op);

// Set by the python module: "file.py:LINE" of the innermost Python frame, for
// debug-mode messages. Returns "" when unknown.
extern std::string (*python_location)();
// Set by the python module: torch_pjrt.ZeroDivisionError, the class an
// integer division by zero raises.
extern struct _object* zero_division_error;  // a PyObject*

template <typename Fn>
auto translate_errors(const std::string& op, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::Error&) {
    throw;
  } catch (...) {
    rethrow_as_torch(op);
  }
}

}  // namespace torch_pjrt::glue
