#include "engine/slot.h"

namespace torch_pjrt::engine {

// A slot that has no buffer reserves its bytes in DeviceMemory (a storage
// that will be written); once it holds a buffer, the buffer counts itself.
Slot::Slot(int device, int64_t nbytes) : device(device), nbytes(nbytes) {
  runtime::DeviceMemory::get().add(device, nbytes);
}

Slot::~Slot() {
  if (!state_.buffer) runtime::DeviceMemory::get().add(device, -nbytes);
}

bool Slot::blocked() const {
  return pending_ || (sealed_.load(std::memory_order_relaxed) && sealer_ != std::this_thread::get_id());
}

Slot::State Slot::state() const {
  std::unique_lock<std::mutex> g(mu_);
  written_.wait(g, [&] { return !blocked(); });
  return state_;
}

bool Slot::has_buffer() const { return state().buffer != nullptr; }

void Slot::set(State s) {
  runtime::BufferPtr old;  // released after the lock: destroying a buffer calls into PJRT
  {
    std::unique_lock<std::mutex> g(mu_);
    // Another thread's sealed region writes it first, unless this set ends
    // a write that began before it was sealed (a donation, an upload).
    written_.wait(g, [&] { return pending_ || !blocked(); });
    if (!state_.buffer && !pending_ && s.buffer) runtime::DeviceMemory::get().add(device, -nbytes);
    old = std::move(state_.buffer);
    state_ = std::move(s);
    failure_ = nullptr;
    pending_ = false;
    if (state_.buffer) ever_written_.store(true, std::memory_order_release);
  }
  written_.notify_all();
}

void Slot::fail(std::exception_ptr failure) {
  runtime::BufferPtr old;
  {
    std::unique_lock<std::mutex> g(mu_);
    written_.wait(g, [&] { return !blocked(); });
    if (state_.buffer) runtime::DeviceMemory::get().add(device, nbytes);  // reserved again, as before a write
    old = std::move(state_.buffer);
    failure_ = std::move(failure);
    ever_written_.store(true, std::memory_order_release);  // so that programs read it, and rethrow
  }
}

std::exception_ptr Slot::failure() const {
  std::lock_guard<std::mutex> g(mu_);
  return failure_;
}

bool Slot::take_if_unshared(const runtime::BufferPtr& ours) {
  std::lock_guard<std::mutex> g(mu_);
  // Two owners: this slot and the caller's copy.
  if (blocked() || !ours || state_.buffer != ours || ours.use_count() != 2) return false;
  state_.buffer.reset();
  pending_ = true;
  return true;
}

runtime::BufferPtr Slot::begin_write() {
  std::unique_lock<std::mutex> g(mu_);
  written_.wait(g, [&] { return !blocked(); });
  // The reservation of a never-written slot ends now: set() will not.
  if (!state_.buffer) runtime::DeviceMemory::get().add(device, -nbytes);
  pending_ = true;
  ever_written_.store(true, std::memory_order_release);
  return state_.buffer;
}

void Slot::restore(runtime::BufferPtr buffer) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!buffer) runtime::DeviceMemory::get().add(device, nbytes);  // reserved again
    state_.buffer = std::move(buffer);
    pending_ = false;
  }
  written_.notify_all();
}

void Slot::seal() {
  std::lock_guard<std::mutex> g(mu_);
  sealer_ = std::this_thread::get_id();
  sealed_.store(true, std::memory_order_release);
  region_index_.store(-1, std::memory_order_release);
}

bool Slot::unseal() {
  std::lock_guard<std::mutex> g(mu_);
  sealed_.store(false, std::memory_order_release);
  sealer_ = std::thread::id();
  // Notified under the lock: a waiter may delete the slot once it runs.
  written_.notify_all();
  return released_;
}

bool Slot::defer_release() {
  std::lock_guard<std::mutex> g(mu_);
  if (!sealed_.load(std::memory_order_relaxed)) return false;
  released_ = true;
  return true;
}

}  // namespace torch_pjrt::engine
