// The current tpu device of each thread, the device count and the check of a
// device index (the rest of the device is in the files device.h lists).
#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {
thread_local c10::DeviceIndex t_device = 0;
}  // namespace

c10::DeviceIndex device_count_or_zero() {
  return Engine::available() ? static_cast<c10::DeviceIndex>(Engine::get().device_count()) : 0;
}

void check_device(c10::DeviceIndex d) {
  if (!Engine::available()) TORCH_CHECK(false, "tpu device unavailable: ", Engine::load_error());
  TORCH_CHECK(d >= 0 && d < Engine::get().device_count(), "Invalid device tpu:", static_cast<int>(d),
              ", the tpu platform has ", Engine::get().device_count(), " devices");
}

c10::DeviceIndex current_device() { return t_device; }

void set_current_device(c10::DeviceIndex d) {
  check_device(d);
  t_device = d;
}

void set_current_device_unchecked(c10::DeviceIndex d) noexcept { t_device = d; }

}  // namespace torch_pjrt::glue
