#include "torch/distributed/process_group.h"

#include <ATen/core/LegacyTypeDispatch.h>

#include "torch/distributed/staged_work.h"

namespace torch_pjrt::glue::distributed {

namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// PREMUL_SUM, which the host engine lacks: scales the host inputs by the op's
// factor and returns SUM. A host input that is the caller's own tensor (not a
// staged copy) and is only read is scaled into a new tensor.
c10d::ReduceOp premultiply(const c10d::ReduceOp& op, std::vector<at::Tensor>& host,
                           const std::vector<at::Tensor>& caller, bool caller_read_only) {
  if (op != c10d::ReduceOp::PREMUL_SUM) return op;
  const auto* factor = dynamic_cast<const c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor, "ReduceOp.PREMUL_SUM needs a factor (torch.distributed._make_nccl_premul_sum)");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  for (size_t i = 0; i < host.size(); ++i) {
    at::Tensor f = factor->tensor_factor.defined() ? factor->tensor_factor.to(at::kCPU)
                                                   : at::scalar_tensor(factor->double_factor, at::kDouble);
    const bool own = i < caller.size() && host[i].is_same(caller[i]);
    if (own && caller_read_only)
      host[i] = host[i].mul(f).to(host[i].scalar_type());
    else
      host[i].mul_(f);
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

// FNV-1a over the op, its root, and each tensor's dtype and sizes.
int64_t fingerprint(OpType type, int64_t root, const std::vector<at::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  mix(static_cast<int64_t>(type));
  mix(root);
  for (const auto& t : tensors) {
    mix(static_cast<int64_t>(t.scalar_type()));
    mix(t.dim());
    for (int64_t s : t.sizes()) mix(s);
  }
  return static_cast<int64_t>(h);
}

// "Float[4, 5], Long[]"
std::string describe(const std::vector<at::Tensor>& tensors) {
  std::string s;
  for (const auto& t : tensors) {
    if (!s.empty()) s += ", ";
    s += std::string(c10::toString(t.scalar_type())) + "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    s += "]";
  }
  return s;
}

bool point_to_point(OpType type) {
  return type == OpType::SEND || type == OpType::RECV || type == OpType::RECVANYSOURCE;
}

bool check_agreement_from_env() {
  const char* v = std::getenv("TORCH_PJRT_DIST_CHECK");
  return !(v && std::string(v) == "0");
}

}  // namespace

ProcessGroupTpu::ProcessGroupTpu(c10::intrusive_ptr<c10d::Backend> host, int rank, int size)
    : Backend(rank, size), host_(std::move(host)), check_agreement_(check_agreement_from_env()) {
  TORCH_CHECK(host_, "tpu_dist needs a host collective backend");
  TORCH_CHECK(host_->getRank() == rank && host_->getSize() == size, "tpu_dist: the host backend is rank ",
              host_->getRank(), " of ", host_->getSize(), ", expected ", rank, " of ", size);
}

void ProcessGroupTpu::agree(OpType type, const char* name, int64_t root, const std::vector<at::Tensor>& must_match) {
  if (!check_agreement_ || getSize() == 1 || point_to_point(type)) return;
  at::Tensor mine = at::full({1}, fingerprint(type, root, must_match), at::kLong);
  at::Tensor all = at::empty({getSize()}, at::kLong);
  host_->_allgather_base(all, mine, c10d::AllgatherOptions())->wait();
  const int64_t* f = all.const_data_ptr<int64_t>();
  std::string differ;
  for (int r = 0; r < getSize(); ++r)
    if (f[r] != f[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  TORCH_CHECK_VALUE(differ.empty(), "tpu_dist: the ranks did not call the same collective: rank(s) ", differ,
                    " passed another op, dtype or shape than rank 0 (this rank, ", getRank(), ", called ", name,
                    " with ", describe(must_match),
                    "). Every rank must call the same collective with the same dtypes "
                    "and shapes.");
}

WorkPtr ProcessGroupTpu::carry_out(OpType type, const char* name, HostStage stage,
                                   const std::function<WorkPtr()>& launch) {
  WorkPtr host_work = launch();
  if (!stage.staged()) return host_work;
  return StagedWork::start(getRank(), type, name, std::move(host_work), std::move(stage));
}

WorkPtr ProcessGroupTpu::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  agree(OpType::BROADCAST, "broadcast", opts.rootRank, tensors);
  HostStage stage;
  auto host = getRank() == opts.rootRank ? stage.inputs(tensors) : stage.outputs(tensors);
  return carry_out(OpType::BROADCAST, "tpu_dist:broadcast", std::move(stage),
                   [&] { return host_->broadcast(host, opts); });
}

WorkPtr ProcessGroupTpu::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  agree(OpType::ALLREDUCE, "all_reduce", opts.reduceOp, tensors);
  HostStage stage;
  auto host = stage.inputs_outputs(tensors);
  c10d::AllreduceOptions host_opts = opts;
  host_opts.reduceOp = premultiply(opts.reduceOp, host, tensors, false);
  return carry_out(OpType::ALLREDUCE, "tpu_dist:all_reduce", std::move(stage),
                   [&] { return host_->allreduce(host, host_opts); });
}

WorkPtr ProcessGroupTpu::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceCoalescedOptions& opts) {
  agree(OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", opts.reduceOp, tensors);
  HostStage stage;
  auto host = stage.inputs_outputs(tensors);
  c10d::AllreduceCoalescedOptions host_opts = opts;
  host_opts.reduceOp = premultiply(opts.reduceOp, host, tensors, false);
  return carry_out(OpType::ALLREDUCE_COALESCED, "tpu_dist:all_reduce_coalesced", std::move(stage),
                   [&] { return host_->allreduce_coalesced(host, host_opts); });
}

WorkPtr ProcessGroupTpu::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  agree(OpType::REDUCE, "reduce", opts.rootRank * 256 + opts.reduceOp, tensors);
  HostStage stage;
  auto host = stage.inputs_outputs(tensors);
  c10d::ReduceOptions host_opts = opts;
  host_opts.reduceOp = premultiply(opts.reduceOp, host, tensors, false);
  return carry_out(OpType::REDUCE, "tpu_dist:reduce", std::move(stage), [&] { return host_->reduce(host, host_opts); });
}

WorkPtr ProcessGroupTpu::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllgatherOptions& opts) {
  agree(OpType::ALLGATHER, "all_gather", 0, inputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::ALLGATHER, "tpu_dist:all_gather", std::move(stage),
                   [&] { return host_->allgather(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  agree(OpType::_ALLGATHER_BASE, "all_gather_into_tensor", 0, {input});
  HostStage stage;
  at::Tensor host_in = stage.input(input);
  at::Tensor host_out = stage.output(output);
  return carry_out(OpType::_ALLGATHER_BASE, "tpu_dist:all_gather_into_tensor", std::move(stage),
                   [&] { return host_->_allgather_base(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  agree(OpType::ALLGATHER_COALESCED, "all_gather_coalesced", 0, inputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::ALLGATHER_COALESCED, "tpu_dist:all_gather_coalesced", std::move(stage),
                   [&] { return host_->allgather_coalesced(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllgatherOptions& opts) {
  agree(OpType::COALESCED, "all_gather_into_tensor_coalesced", 0, inputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::COALESCED, "tpu_dist:all_gather_into_tensor_coalesced", std::move(stage),
                   [&] { return host_->allgather_into_tensor_coalesced(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                const c10d::GatherOptions& opts) {
  agree(OpType::GATHER, "gather", opts.rootRank, inputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::GATHER, "tpu_dist:gather", std::move(stage),
                   [&] { return host_->gather(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                 const c10d::ScatterOptions& opts) {
  agree(OpType::SCATTER, "scatter", opts.rootRank, outputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::SCATTER, "tpu_dist:scatter", std::move(stage),
                   [&] { return host_->scatter(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                        const c10d::ReduceScatterOptions& opts) {
  agree(OpType::REDUCE_SCATTER, "reduce_scatter", opts.reduceOp, outputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) {
    for (size_t i = 0; i < host_in.size(); ++i)
      host_opts.reduceOp = premultiply(opts.reduceOp, host_in[i], inputs[i], true);
  }
  return carry_out(OpType::REDUCE_SCATTER, "tpu_dist:reduce_scatter", std::move(stage),
                   [&] { return host_->reduce_scatter(host_out, host_in, host_opts); });
}

WorkPtr ProcessGroupTpu::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                              const c10d::ReduceScatterOptions& opts) {
  agree(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", opts.reduceOp, {output});
  HostStage stage;
  std::vector<at::Tensor> host_in{stage.input(input)};
  at::Tensor host_out = stage.output(output);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = premultiply(opts.reduceOp, host_in, {input}, true);
  return carry_out(OpType::_REDUCE_SCATTER_BASE, "tpu_dist:reduce_scatter_tensor", std::move(stage),
                   [&] { return host_->_reduce_scatter_base(host_out, host_in[0], host_opts); });
}

WorkPtr ProcessGroupTpu::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::ReduceScatterOptions& opts) {
  agree(OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = premultiply(opts.reduceOp, host_in, inputs, true);
  return carry_out(OpType::REDUCE_SCATTER_TENSOR_COALESCED, "tpu_dist:reduce_scatter_tensor_coalesced",
                   std::move(stage),
                   [&] { return host_->reduce_scatter_tensor_coalesced(host_out, host_in, host_opts); });
}

WorkPtr ProcessGroupTpu::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                                       std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  agree(OpType::ALLTOALL_BASE, "all_to_all_single", static_cast<int64_t>(input.scalar_type()), {});
  HostStage stage;
  at::Tensor host_in = stage.input(input);
  at::Tensor host_out = stage.output(output);
  return carry_out(OpType::ALLTOALL_BASE, "tpu_dist:all_to_all_single", std::move(stage), [&] {
    return host_->alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes, opts);
  });
}

WorkPtr ProcessGroupTpu::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::AllToAllOptions& opts) {
  agree(OpType::ALLTOALL, "all_to_all", inputs.empty() ? -1 : static_cast<int64_t>(inputs[0].scalar_type()), {});
  HostStage stage;
  auto host_in = stage.inputs(inputs);
  auto host_out = stage.outputs(outputs);
  return carry_out(OpType::ALLTOALL, "tpu_dist:all_to_all", std::move(stage),
                   [&] { return host_->alltoall(host_out, host_in, opts); });
}

WorkPtr ProcessGroupTpu::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  HostStage stage;
  auto host = stage.inputs(tensors);
  return carry_out(OpType::SEND, "tpu_dist:send", std::move(stage), [&] { return host_->send(host, dst_rank, tag); });
}

WorkPtr ProcessGroupTpu::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  HostStage stage;
  auto host = stage.outputs(tensors);
  return carry_out(OpType::RECV, "tpu_dist:recv", std::move(stage), [&] { return host_->recv(host, src_rank, tag); });
}

WorkPtr ProcessGroupTpu::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  HostStage stage;
  auto host = stage.outputs(tensors);
  return carry_out(OpType::RECVANYSOURCE, "tpu_dist:recv_anysource", std::move(stage),
                   [&] { return host_->recvAnysource(host, tag); });
}

WorkPtr ProcessGroupTpu::barrier(const c10d::BarrierOptions& opts) { return host_->barrier(opts); }

void ProcessGroupTpu::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  host_->monitoredBarrier(opts, wait_all_ranks);
}

}  // namespace torch_pjrt::glue::distributed
