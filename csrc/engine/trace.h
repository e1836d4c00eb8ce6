// Spans of engine work for a profiler: lowering, compiling, enqueuing a
// program, running a fused region, waiting at a sync point and copies.
//
// The core knows no profiler. The torch glue installs a sink that turns
// spans into torch.profiler ranges (RecordFunction); with no sink, or while
// the sink reports no profiler listening, a span costs one atomic load and
// one call, and its name is never built.
//
// Thread-safety: install the sink once, before spans start; spans may open
// and close on any thread (each closes on the thread that opened it).
#pragma once

#include <atomic>
#include <string>

namespace torch_pjrt::engine {

struct TraceSink {
  bool (*active)();                         // whether anyone listens now
  void* (*begin)(const std::string& name);  // opens a range; returns its handle
  void (*end)(void* handle);                // closes it
};

// Installs `sink` (which must live for the process); nullptr removes it.
void set_trace_sink(const TraceSink* sink);

// A range "tpu::<what>" or, with a detail, "tpu::<what> (<detail>)".
class Span {
 public:
  explicit Span(const char* what) : Span(what, nullptr) {}
  Span(const char* what, const std::string* detail);
  ~Span();
  Span(const Span&) = delete;

 private:
  const TraceSink* sink_ = nullptr;
  void* handle_ = nullptr;
};

}  // namespace torch_pjrt::engine
