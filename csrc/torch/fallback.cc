// The CPU fallback: an op with no lowering runs on the CPU (copy in, run,
// copy out), counted in metrics and warned about once per op.
#include <ATen/native/CPUFallback.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "torch/ops.h"

namespace torch_pjrt::glue {
namespace {

bool fallback_is_error() {
  const char* v = std::getenv("TORCH_PJRT_FALLBACK");
  return v && std::string(v) == "error";
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = full_name(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error(), "The operator '", name,
                              "' has no tpu lowering, and TORCH_PJRT_FALLBACK=error forbids the CPU fallback.");
  {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> g(mu);
    if (warned.insert(name).second)
      TORCH_WARN("torch_pjrt: '", name, "' has no tpu lowering yet; it runs on the CPU (copy in, run, copy out).");
  }
  if (Engine::available()) {
    Engine::get().count_fallback(name);
    translate_errors(name, [] { Engine::get().flush(engine::FlushReason::Unfusable); });
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace torch_pjrt::glue

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_pjrt::glue::cpu_fallback>());
}
