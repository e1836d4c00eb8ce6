// The pinned host allocator: the memory of pinned CPU tensors
// (Tensor.pin_memory(), the hooks' getPinnedMemoryAllocator).
#include <cstring>

#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {

// Pinned host memory (engine/host_memory.h): CPU tensors whose blocks
// non-blocking copies may read or write after the copy call returned. The
// DataPtr's context holds the block; a copy in flight holds it too.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    engine::HostBlockPtr block;
    try {
      block = engine::HostMemory::allocate(n);
    } catch (const std::bad_alloc&) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "cannot allocate ", n, " bytes of pinned host memory");
    }
    void* data = block->data;
    return {data, new engine::HostBlockPtr(std::move(block)), &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

 private:
  static void release(void* ctx) { delete static_cast<engine::HostBlockPtr*>(ctx); }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

}  // namespace torch_pjrt::glue
