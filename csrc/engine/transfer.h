// Non-blocking host<->device copies (Transfers) and the ordered thread that
// does their host side (CopyThread). The engine runs a fused region that
// references the slot first (Engine::upload_async / download_async).
//
// How each direction maps onto PJRT:
// - device -> host: PJRT_Buffer_ToHostBuffer into the caller's pinned block,
//   which is asynchronous on every plugin; the block is held until the copy
//   completes.
// - host -> device on a platform whose device memory is host memory (the
//   CPU plugin): the data is copied here, on the copy thread, into a pinned
//   staging block whose pages are resident, which the plugin then adopts as
//   the buffer's memory (PJRT_HostBufferSemantics_kMutableZeroCopy). The
//   plugin's own upload writes fresh pages and runs about five times slower
//   than memcpy. The slot is pending meanwhile: a reader waits for the copy.
// - host -> device elsewhere: PJRT_Client_BufferFromHostBuffer reading the
//   caller's pinned block until the transfer completes (DMA); the block is
//   held until then.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/executor.h"
#include "engine/slot.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// One thread that runs posted work in order. Thread-safe; the destructor
// runs what was posted, then joins.
class CopyThread {
 public:
  CopyThread();
  ~CopyThread();
  CopyThread(const CopyThread&) = delete;
  // `work` must not throw.
  void post(std::function<void()> work);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool stop_ = false;
  std::thread thread_;
};

// The non-blocking copies of one client. Each returns at once; a sync point
// (the executor) waits for it and raises its error. Thread-safe.
class Transfers {
 public:
  // `client` and `executor` outlive it.
  Transfers(runtime::Client& client, Executor& executor) : client_(client), executor_(executor) {}
  // Starts copying a slot's whole buffer into `dst`, which `keep` holds
  // until the copy is done; `dst` is undefined until then.
  CompletionPtr download(Slot& slot, void* dst, std::shared_ptr<void> keep);
  // Starts replacing a slot's buffer with the host data at `src` (flat, of
  // `dtype`), which `keep` holds and nobody changes until the copy is done.
  // The slot reads as the new data from now on.
  CompletionPtr upload(Slot& slot, const void* src, hlo::DType dtype, std::shared_ptr<void> keep);

 private:
  runtime::Client& client_;
  Executor& executor_;
  std::once_flag copies_once_;
  std::unique_ptr<CopyThread> copies_;  // made at the first staged upload
};

}  // namespace torch_pjrt::engine
