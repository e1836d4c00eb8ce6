// Non-blocking host<->device copies: the ordered thread that does their host
// side. The copies themselves are Engine::upload_async / download_async
// (engine.h, defined in transfer.cc).
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
#include <mutex>
#include <thread>

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

}  // namespace torch_pjrt::engine
