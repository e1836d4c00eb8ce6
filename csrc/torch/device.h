// The `tpu` device as torch sees it, one file per concern (as PyTorch's
// OpenReg splits its device):
//   dtypes.cc            the torch <-> core dtype mapping, a tensor's view spec
//   device.cc            each thread's current device, the device count and checks
//   allocator.cc         the device allocator (a storage's context is its slot), new_tensor
//   host_allocator.cc    the pinned host allocator
//   guard.cc             the device guard: devices, streams, events
//   generator.cc         the generator (seed + offset), default generators, next_rng
//   hooks.cc             the PrivateUse1 hooks
//   profiler.cc          the sink that turns engine spans into torch.profiler ranges
//   matmul_precision.cc  torch's float32 matmul precision passed to the engine
//   errors.cc            error translation (rethrow_as_torch)
// This header declares what those files share beyond common.h; it is for
// them only.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>

#include "torch/common.h"

namespace torch_pjrt::glue {

// ---------------------------------------------------------------- device.cc

// The number of devices, 0 when the platform is unavailable.
c10::DeviceIndex device_count_or_zero();
// Raises unless `d` is a device of an available platform.
void check_device(c10::DeviceIndex d);
// Sets the thread's current device without checking it.
void set_current_device_unchecked(c10::DeviceIndex d) noexcept;

// ---------------------------------------------------------------- host_allocator.cc

// Pinned host memory (engine/host_memory.h) for CPU tensors.
c10::Allocator* pinned_allocator();

// ---------------------------------------------------------------- generator.cc

// A new generator of device `d` (the current device when negative).
at::Generator new_generator(c10::DeviceIndex d);

}  // namespace torch_pjrt::glue
