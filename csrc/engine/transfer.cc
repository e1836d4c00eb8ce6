#include "engine/transfer.h"

#include <cstring>

#include "engine/host_memory.h"
#include "engine/trace.h"

namespace torch_pjrt::engine {

CopyThread::CopyThread() : thread_([this] { loop(); }) {}

CopyThread::~CopyThread() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CopyThread::post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> g(mu_);
    work_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void CopyThread::loop() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;
      work = std::move(work_.front());
      work_.pop_front();
    }
    work();
  }
}

CompletionPtr Transfers::download(Slot& slot, void* dst, std::shared_ptr<void> keep) {
  Span span("copy_to_host_async");
  auto done = std::make_shared<Completion>();
  Slot::State st = slot.state();
  if (!st.buffer) {
    if (std::exception_ptr failed = slot.failure()) std::rethrow_exception(failed);
    std::memset(dst, 0, slot.nbytes);
    done->arrive();
    return done;
  }
  std::string what = std::string(st.producer ? st.producer : "a device program") + ", then the copy to the host";
  runtime::Event copied = st.buffer->to_host_async(dst, slot.nbytes);
  executor_.add_transfer(done, std::move(what));
  // The buffer and the host block stay alive until the copy is done.
  runtime::Event::when_ready(std::move(copied), [done, buffer = std::move(st.buffer), keep = std::move(keep)](
                                                    const std::string& error) { done->arrive(error); });
  return done;
}

CompletionPtr Transfers::upload(Slot& slot, const void* src, hlo::DType dtype, std::shared_ptr<void> keep) {
  Span span("copy_from_host_async");
  auto done = std::make_shared<Completion>();
  const std::vector<int64_t> dims = {slot.nbytes / hlo::byte_size(dtype)};
  const auto type = static_cast<runtime::ElementType>(hlo::pjrt_code(dtype));
  if (client_.platform_name() != "cpu") {
    runtime::Client::Upload up = client_.from_host_async(src, type, dims, slot.device);
    slot.set({std::move(up.buffer), dtype, nullptr});
    executor_.add_transfer(done, "the copy from the host");
    runtime::Event::when_ready(std::move(up.read),
                               [done, keep = std::move(keep)](const std::string& error) { done->arrive(error); });
    return done;
  }
  HostBlockPtr staging = HostMemory::allocate(static_cast<size_t>(slot.nbytes));
  runtime::BufferPtr old = slot.begin_write();
  executor_.add_transfer(done, "the copy from the host");
  std::call_once(copies_once_, [&] { copies_ = std::make_unique<CopyThread>(); });
  copies_->post([this, &slot, src, dtype, type, dims, done, keep = std::move(keep), staging = std::move(staging),
                 old = std::move(old)]() mutable {
    try {
      Span span("copy_from_host_async.memcpy");
      std::memcpy(staging->data, src, static_cast<size_t>(slot.nbytes));
      void* data = staging->data;
      runtime::BufferPtr buffer = client_.lend_host(data, type, dims, slot.device,
                                                    [staging = std::move(staging)]() mutable { staging.reset(); });
      slot.set({std::move(buffer), dtype, nullptr});
      done->arrive();
    } catch (const std::exception& e) {
      slot.restore(std::move(old));
      done->arrive(e.what());
    }
  });
  return done;
}

}  // namespace torch_pjrt::engine
