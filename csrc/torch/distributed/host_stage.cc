#include "torch/distributed/host_stage.h"

#include <ATen/core/LegacyTypeDispatch.h>

#include "torch/common.h"

namespace torch_pjrt::glue::distributed {

at::Tensor HostStage::lend(const at::Tensor& t) {
  if (!t.is_contiguous() || !Engine::available()) return at::Tensor();
  runtime::BufferPtr keep;
  void* memory = Engine::get().lend_host_memory(*slot_of(t), to_hlo(t.scalar_type()), &keep);
  if (!memory) return at::Tensor();
  lent_.push_back(std::move(keep));
  char* first = static_cast<char*>(memory) + t.storage_offset() * t.element_size();
  return at::from_blob(first, t.sizes(), t.strides(), t.options().device(at::kCPU));
}

at::Tensor HostStage::stage(const at::Tensor& t, bool read, bool written) {
  if (written) results_.push_back(t);
  if (!t.defined() || t.device().is_cpu()) return t;
  staged_ = true;
  if (at::Tensor lent = lend(t); lent.defined()) return lent;
  // Staging is not part of the autograd graph (the host engine is not).
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU));
  if (read) host.copy_(t);
  if (written) pending_.push_back({t, host});
  return host;
}

at::Tensor HostStage::input(const at::Tensor& t) { return stage(t, true, false); }
at::Tensor HostStage::output(const at::Tensor& t) { return stage(t, false, true); }
at::Tensor HostStage::input_output(const at::Tensor& t) { return stage(t, true, true); }

std::vector<at::Tensor> HostStage::inputs(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  for (const auto& t : ts) host.push_back(input(t));
  return host;
}

std::vector<at::Tensor> HostStage::outputs(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  for (const auto& t : ts) host.push_back(output(t));
  return host;
}

std::vector<at::Tensor> HostStage::inputs_outputs(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  for (const auto& t : ts) host.push_back(input_output(t));
  return host;
}

std::vector<std::vector<at::Tensor>> HostStage::inputs(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> host;
  for (const auto& l : lists) host.push_back(inputs(l));
  return host;
}

std::vector<std::vector<at::Tensor>> HostStage::outputs(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> host;
  for (const auto& l : lists) host.push_back(outputs(l));
  return host;
}

void HostStage::write_back() const {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  for (const auto& p : pending_) p.device.copy_(p.host);
}

}  // namespace torch_pjrt::glue::distributed
