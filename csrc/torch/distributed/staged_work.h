// The Work of a host-staged collective: completes when the host engine's work
// has completed and the results are written back into the caller's tensors.
//
// Completion: where the host work has a future (most Gloo collectives), its
// callback writes back and completes this work's future on the host engine's
// thread, so `get_future()` (DDP's comm hooks) and `async_op=True` overlap
// with what the caller does next. Host work without a future (Gloo's send,
// recv and reduce_scatter) is written back by the first wait() or
// isCompleted() that sees it done; its future completes then. Errors of the host work or of the write-back are set on
// the future and rethrown by wait(), with their own exception class.
//
// Thread-safety: every method may be called from any thread; the write-back
// runs exactly once (std::call_once).
#pragma once

#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "torch/distributed/host_stage.h"

namespace torch_pjrt::glue::distributed {

class StagedWork : public c10d::Work {
 public:
  // `host`: the host engine's work over `stage`'s host tensors.
  static c10::intrusive_ptr<StagedWork> start(int rank, c10d::OpType type, const char* name,
                                              c10::intrusive_ptr<c10d::Work> host, HostStage stage);
  // `host_has_future`: whether host->getFuture() is supported (use start()).
  StagedWork(int rank, c10d::OpType type, const char* name, c10::intrusive_ptr<c10d::Work> host, HostStage stage,
             bool host_has_future);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  // Writes back and completes the future; `error`: the host work's failure.
  void finish(std::exception_ptr error);

  c10::intrusive_ptr<c10d::Work> host_;
  HostStage stage_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag finished_;
  const bool host_has_future_;
};

}  // namespace torch_pjrt::glue::distributed
