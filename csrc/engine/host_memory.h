// Pinned host memory: the blocks behind pin_memory(), torch.empty(...,
// pin_memory=True) and DataLoader(pin_memory=True), and the staging blocks of
// non-blocking uploads.
//
// A block is page-aligned and resident: its pages are faulted in when it is
// made (MAP_POPULATE), so a copy into it runs at memcpy speed. The plugins'
// own host memory is fresh for each buffer, and first-touch page faults make
// a plain upload about five times slower than memcpy on the CPU plugin. It
// is not page-locked (mlock needs a privilege PyTorch users rarely have);
// where a plugin needs locked memory for DMA, PJRT stages the copy itself.
//
// Freed blocks are cached by size for reuse, up to kMaxCachedBytes, as
// torch.cuda's caching host allocator does.
//
// Ownership: a block lives while any shared_ptr to it does (the tensor's
// DataPtr, a copy in flight). Thread-safety: all functions may be called
// from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace torch_pjrt::engine {

struct HostBlock {
  void* data;
  size_t bytes;  // a multiple of the page size, >= what was asked for
  HostBlock(void* d, size_t b) : data(d), bytes(b) {}
  HostBlock(const HostBlock&) = delete;
  ~HostBlock();  // back to the cache, or unmapped
};
using HostBlockPtr = std::shared_ptr<HostBlock>;

class HostMemory {
 public:
  // A block of at least `bytes` (at least one page). Throws std::bad_alloc.
  static HostBlockPtr allocate(size_t bytes);
  // The live block whose memory holds `p`, or null.
  static HostBlockPtr find(const void* p);
  static bool is_pinned(const void* p) { return find(p) != nullptr; }
  // Bytes of live blocks, and of cached free ones.
  static int64_t live_bytes();
  static int64_t cached_bytes();
  // Unmaps the cached free blocks.
  static void empty_cache();

  static constexpr int64_t kMaxCachedBytes = int64_t{1} << 30;
};

}  // namespace torch_pjrt::engine
