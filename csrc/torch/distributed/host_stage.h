// Host staging of one collective's tensors: the only place a `tpu` tensor
// enters or leaves a host collective engine (Gloo).
//
// A tensor already in host memory (device cpu) is handed to the engine as it
// is. A contiguous `tpu` tensor whose device memory is host memory (the CPU
// plugin) is lent: the host tensor is its buffer's own memory
// (Engine::lend_host_memory), which the collective reads and writes in place,
// with no copy either way. Any other `tpu` tensor is read into a new
// contiguous host tensor (an input), gets an empty one (an output), or both
// (read and written); after the collective, write_back() copies each staged
// result into the caller's tensor in place: same TensorImpl, same storage, so
// DDP's bucket views and Python's identity of the tensor hold, and every view
// of the storage sees the result.
//
// Thread-safety: a HostStage belongs to one collective. It is filled on the
// calling thread; write_back() runs once, on whichever thread completes the
// collective (the host engine's callback thread, or the one that waits).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace torch_pjrt::glue::distributed {

class HostStage {
 public:
  // The host tensor that the collective reads for `t`; `t` is not written.
  at::Tensor input(const at::Tensor& t);
  // The host tensor that receives `t`'s result; its values are not read.
  at::Tensor output(const at::Tensor& t);
  // Read and written (allreduce, reduce).
  at::Tensor input_output(const at::Tensor& t);

  std::vector<at::Tensor> inputs(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> outputs(const std::vector<at::Tensor>& ts);
  std::vector<at::Tensor> inputs_outputs(const std::vector<at::Tensor>& ts);
  std::vector<std::vector<at::Tensor>> inputs(const std::vector<std::vector<at::Tensor>>& lists);
  std::vector<std::vector<at::Tensor>> outputs(const std::vector<std::vector<at::Tensor>>& lists);

  // Copies each staged result into its tpu tensor, without autograd and
  // without a version bump (the host engine writes CPU tensors the same way).
  void write_back() const;
  // Ends the loans once the collective is done (lent buffers can be donated
  // again). The host tensors over lent memory must not be read afterwards.
  void release() { lent_.clear(); }

  // The caller's tensors that the collective writes, in the order staged
  // (the value of the collective's future, as Gloo gives its own).
  const std::vector<at::Tensor>& results() const { return results_; }

  // Whether any tensor was staged (false: every tensor is a host tensor and
  // the collective can be handed to the host engine directly).
  bool staged() const { return staged_; }

 private:
  struct Pending {
    at::Tensor device, host;
  };
  at::Tensor stage(const at::Tensor& t, bool read, bool written);
  // A host tensor over `t`'s own device memory, or undefined if it cannot be lent.
  at::Tensor lend(const at::Tensor& t);

  std::vector<Pending> pending_;
  std::vector<std::shared_ptr<void>> lent_;  // the lent buffers (runtime::BufferPtr)
  std::vector<at::Tensor> results_;
  bool staged_ = false;
};

}  // namespace torch_pjrt::glue::distributed
