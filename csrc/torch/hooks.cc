// The PrivateUse1 hooks (at::PrivateUse1HooksInterface): what torch asks the
// tpu backend about its devices, generators, storages and pinned memory.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_or_zero() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count_or_zero(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage(storage, static_cast<int64_t>(newsize), hlo::DType::U8);
  }
  bool isPinnedPtr(const void* p) const override { return engine::HostMemory::is_pinned(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasCompatibleShallowCopyType(c10::DispatchKeySet, c10::DispatchKeySet) const { return true; }
};

struct Registration {
  Registration() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} g_registration;

}  // namespace

}  // namespace torch_pjrt::glue
