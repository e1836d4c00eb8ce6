// tpu_dist: the c10d backend of `tpu` tensors (and of host tensors in the
// same group), over an existing collective engine.
//
// Every collective is carried out in one place, carry_out(): its tensors are
// staged to host memory (HostStage), the host engine (a ProcessGroupGloo that
// torch built over the group's PrefixStore) runs it, and the results are
// written back into the caller's tensors when it completes (StagedWork). A
// collective with only host tensors goes to the host engine unchanged, so a
// group's CPU collectives behave exactly as Gloo's. A platform whose plugin
// runs collectives itself (TPU interconnect, NCCL in the CUDA plugin) would
// lower them into programs in carry_out() instead.
//
// Collectives never depend on the engine's fused regions: staging reads the
// input tensors, which flushes what they wait for, and nothing else. So ranks
// may run different code between collectives (MPMD).
//
// What the host engine lacks is done on the staged host tensors: PREMUL_SUM
// (scaled, then summed).
//
// Agreement: a collective whose ranks pass different dtypes or shapes makes
// Gloo abort the process (an EnforceNotMet thrown on its transport thread).
// Before each collective (not send/recv) the ranks exchange a fingerprint of
// the op and of the dtypes and shapes that must match, over the host engine,
// and every rank raises a ValueError naming the ranks that differ.
// TORCH_PJRT_DIST_CHECK=0 leaves the exchange out (one small allgather per
// collective).
//
// Thread-safety: as c10d asks of a Backend; the host engine orders the
// collectives that one thread issues.
#pragma once

#include <functional>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "torch/distributed/host_stage.h"

namespace torch_pjrt::glue::distributed {

class ProcessGroupTpu : public c10d::Backend {
 public:
  // `host`: the host engine's backend for this group (same rank and size).
  ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size);

  const std::string getBackendName() const override { return "tpu_dist"; }
  c10::intrusive_ptr<c10d::Backend> host() const { return host_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  void setSequenceNumberForGroup() override { host_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return host_->getSequenceNumberForGroup(); }
  void setTimeout(std::chrono::milliseconds timeout) override { host_->setTimeout(timeout); }
  void abort() override { host_->abort(); }
  void shutdown() override { host_->shutdown(); }

 private:
  // The one place a collective is carried out: runs `launch` (the host
  // engine's collective over the staged tensors) and returns the Work that
  // writes the results back. With nothing staged, the host work itself.
  c10::intrusive_ptr<c10d::Work> carry_out(c10d::OpType type, const char* name, HostStage stage,
                                           const std::function<c10::intrusive_ptr<c10d::Work>()>& launch);

  // Raises on every rank unless all ranks call the same op with the same
  // dtypes and shapes of `must_match` (see "Agreement").
  void agree(c10d::OpType type, const char* name, int64_t root, const std::vector<at::Tensor>& must_match);

  c10::intrusive_ptr<c10d::Backend> host_;
  const bool check_agreement_;
};

}  // namespace torch_pjrt::glue::distributed
