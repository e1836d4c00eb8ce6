#include "engine/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <new>

namespace torch_pjrt::engine {
namespace {

struct Pool {
  std::mutex mu;
  std::map<uintptr_t, std::weak_ptr<HostBlock>> live;  // by start address
  std::multimap<size_t, void*> free;                   // by size
  int64_t live_bytes = 0;
  int64_t cached_bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: blocks may outlive static destructors
  return *p;
}

size_t round_to_pages(size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  n = n == 0 ? 1 : n;
  return (n + page - 1) / page * page;
}

}  // namespace

HostBlock::~HostBlock() {
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  p.live.erase(reinterpret_cast<uintptr_t>(data));
  p.live_bytes -= static_cast<int64_t>(bytes);
  if (p.cached_bytes + static_cast<int64_t>(bytes) <= HostMemory::kMaxCachedBytes) {
    p.free.emplace(bytes, data);
    p.cached_bytes += static_cast<int64_t>(bytes);
  } else {
    munmap(data, bytes);
  }
}

HostBlockPtr HostMemory::allocate(size_t want) {
  size_t bytes = round_to_pages(want);
  Pool& p = pool();
  void* data = nullptr;
  {
    std::lock_guard<std::mutex> g(p.mu);
    // Best fit among cached blocks at most twice the size asked for.
    auto it = p.free.lower_bound(bytes);
    if (it != p.free.end() && it->first <= 2 * bytes) {
      bytes = it->first;
      data = it->second;
      p.free.erase(it);
      p.cached_bytes -= static_cast<int64_t>(bytes);
    }
  }
  if (!data) {
    data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (data == MAP_FAILED) {
      empty_cache();
      data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (data == MAP_FAILED) throw std::bad_alloc();
    }
  }
  auto block = std::make_shared<HostBlock>(data, bytes);
  std::lock_guard<std::mutex> g(p.mu);
  p.live[reinterpret_cast<uintptr_t>(data)] = block;
  p.live_bytes += static_cast<int64_t>(bytes);
  return block;
}

HostBlockPtr HostMemory::find(const void* ptr) {
  auto a = reinterpret_cast<uintptr_t>(ptr);
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  auto it = p.live.upper_bound(a);
  if (it == p.live.begin()) return nullptr;
  --it;
  HostBlockPtr block = it->second.lock();
  if (!block || a >= it->first + block->bytes) return nullptr;
  return block;
}

int64_t HostMemory::live_bytes() {
  std::lock_guard<std::mutex> g(pool().mu);
  return pool().live_bytes;
}

int64_t HostMemory::cached_bytes() {
  std::lock_guard<std::mutex> g(pool().mu);
  return pool().cached_bytes;
}

void HostMemory::empty_cache() {
  Pool& p = pool();
  std::multimap<size_t, void*> free;
  {
    std::lock_guard<std::mutex> g(p.mu);
    free.swap(p.free);
    p.cached_bytes = 0;
  }
  for (auto& [bytes, data] : free) munmap(data, bytes);
}

}  // namespace torch_pjrt::engine
