// The profiler sink: spans of engine work (engine/trace.h) become
// torch.profiler ranges.
#include <ATen/record_function.h>

#include "engine/trace.h"
#include "torch/common.h"

namespace torch_pjrt::glue {

namespace {

// Engine spans (engine/trace.h) become torch.profiler ranges.
bool trace_active() { return at::hasCallbacks(); }
void* trace_begin(const std::string& name) {
  auto* range = new at::RecordFunction(at::RecordScope::USER_SCOPE);
  if (!range->isActive()) {
    delete range;
    return nullptr;
  }
  range->before(name);
  return range;
}
void trace_end(void* range) { delete static_cast<at::RecordFunction*>(range); }
const engine::TraceSink g_trace_sink{&trace_active, &trace_begin, &trace_end};

struct Registration {
  Registration() { engine::set_trace_sink(&g_trace_sink); }
} g_registration;

}  // namespace

}  // namespace torch_pjrt::glue
