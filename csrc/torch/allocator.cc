// The tpu device allocator: a c10::DeviceAllocator whose DataPtr context is
// the storage's Slot (the memory is the slot's PJRT buffer), and new_tensor,
// a tpu tensor made around a buffer.
#include <ATen/EmptyTensor.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {

// Storages get unique, never-dereferenced addresses so that torch's aliasing
// checks on data pointers stay meaningful. The memory itself is the slot's
// PJRT buffer.
std::atomic<uintptr_t> g_next_address{uintptr_t{1} << 44};

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex d = current_device();
    check_device(d);
    auto* slot = new Slot(d, static_cast<int64_t>(n));
    uintptr_t size = (std::max<size_t>(n, 1) + 255) & ~uintptr_t{255};
    void* address = reinterpret_cast<void*>(g_next_address.fetch_add(size));
    return {address, slot, &Engine::release_slot, c10::Device(c10::DeviceType::PrivateUse1, d)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied by address; use Tensor.copy_");
  }
  bool initialized() override { return Engine::available(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    c10::CachingDeviceAllocator::DeviceStats s;
    auto& e = Engine::get();
    for (auto* stat : {&s.allocated_bytes[0], &s.active_bytes[0], &s.reserved_bytes[0], &s.requested_bytes[0]}) {
      stat->current = e.allocated_bytes(d);
      stat->peak = e.peak_allocated_bytes(d);
    }
    return s;
  }
  // torch.accelerator.get_memory_info, torch.tpu.mem_get_info: (free, total)
  // bytes. Total: the device's memory (the plugin's bytes_limit; the host's
  // physical memory on the CPU plugin). Free: total less what the plugin
  // reports in use, or, when it reports nothing, less this process's live
  // buffers and reserved storages (memory_allocated).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override {
    check_device(d);
    Engine& e = Engine::get();
    const int64_t total = std::max<int64_t>(e.client().device_bytes_limit(d), 0);
    int64_t used = e.client().device_bytes_in_use(d);
    if (used < 0) used = e.allocated_bytes(d);
    return {static_cast<size_t>(std::max<int64_t>(total - used, 0)), static_cast<size_t>(total)};
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex d) override { Engine::get().reset_peak(d); }
};

TpuAllocator g_allocator;

// The allocator of every tpu storage.
struct Registration {
  Registration() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_allocator); }
} g_registration;

}  // namespace

c10::Allocator* tpu_allocator() { return &g_allocator; }

at::Tensor new_tensor(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device, runtime::BufferPtr buffer,
                      int64_t capacity) {
  c10::DeviceIndex saved = current_device();
  set_current_device_unchecked(device);
  at::Tensor t = at::detail::empty_generic(capacity ? at::IntArrayRef{capacity} : sizes, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype, std::nullopt);
  set_current_device_unchecked(saved);
  // A bucketed result: a contiguous tensor at the start of a larger storage.
  if (capacity) t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  if (buffer) Engine::get().adopt(*slot_of(t), std::move(buffer), to_hlo(dtype));
  return t;
}

}  // namespace torch_pjrt::glue
