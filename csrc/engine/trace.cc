#include "engine/trace.h"

namespace torch_pjrt::engine {
namespace {
std::atomic<const TraceSink*> g_sink{nullptr};
}

void set_trace_sink(const TraceSink* sink) { g_sink.store(sink, std::memory_order_release); }

Span::Span(const char* what, const std::string* detail) {
  const TraceSink* sink = g_sink.load(std::memory_order_acquire);
  if (!sink || !sink->active()) return;
  std::string name = std::string("tpu::") + what;
  if (detail && !detail->empty()) name += " (" + *detail + ")";
  sink_ = sink;
  handle_ = sink->begin(name);
}

Span::~Span() {
  if (sink_ && handle_) sink_->end(handle_);
}

}  // namespace torch_pjrt::engine
