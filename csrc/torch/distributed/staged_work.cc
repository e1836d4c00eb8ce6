#include "torch/distributed/staged_work.h"

#include <ATen/core/ivalue.h>

namespace torch_pjrt::glue::distributed {

StagedWork::StagedWork(int rank, c10d::OpType type, const char* name, c10::intrusive_ptr<c10d::Work> host,
                       HostStage stage, bool host_has_future)
    : Work(rank, type, name),
      host_(std::move(host)),
      stage_(std::move(stage)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      host_has_future_(host_has_future) {}

c10::intrusive_ptr<StagedWork> StagedWork::start(int rank, c10d::OpType type, const char* name,
                                                 c10::intrusive_ptr<c10d::Work> host, HostStage stage) {
  // Work has no way to ask whether getFuture() is supported but to call it
  // (Gloo's send, recv and reduce_scatter works raise).
  c10::intrusive_ptr<c10::ivalue::Future> host_future;
  try {
    host_future = host->getFuture();
  } catch (const c10::Error&) {
  }
  auto work = c10::make_intrusive<StagedWork>(rank, type, name, std::move(host), std::move(stage), bool(host_future));
  if (host_future) {
    // The callback holds the work alive until it has run.
    host_future->addCallback(
        [work](c10::ivalue::Future& done) { work->finish(done.hasError() ? done.exception_ptr() : nullptr); });
  }
  return work;
}

void StagedWork::finish(std::exception_ptr error) {
  std::call_once(finished_, [&] {
    if (error) {
      stage_.release();
      future_->setError(error);
      return;
    }
    try {
      stage_.write_back();
      stage_.release();
      future_->markCompleted(c10::IValue(stage_.results()));
    } catch (...) {
      stage_.release();
      future_->setError(std::current_exception());
    }
  });
}

bool StagedWork::isCompleted() {
  if (future_->completed()) return true;
  if (host_has_future_ || !host_->isCompleted()) return false;
  finish(host_->exception());
  return true;
}

bool StagedWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr StagedWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

std::vector<at::Tensor> StagedWork::result() {
  wait();
  return stage_.results();
}

bool StagedWork::wait(std::chrono::milliseconds timeout) {
  if (!host_has_future_) {
    try {
      host_->wait(timeout);
      finish(nullptr);
    } catch (...) {
      finish(std::current_exception());
    }
  } else if (timeout != kNoTimeout && !future_->completed()) {
    host_->wait(timeout);  // raises when the host work times out
  }
  future_->wait();
  if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  return true;
}

}  // namespace torch_pjrt::glue::distributed
