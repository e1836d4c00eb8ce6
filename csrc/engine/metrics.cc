#include "engine/metrics.h"

#include <algorithm>

namespace torch_pjrt::engine {

void MetricsRecorder::compiled(double seconds, const std::string& name) {
  std::lock_guard<std::mutex> g(mu_);
  m_.compiles++;
  m_.compiles_by_name[name]++;
  m_.compile_seconds += seconds;
}

void MetricsRecorder::loaded(double seconds) {
  std::lock_guard<std::mutex> g(mu_);
  m_.disk_loads++;
  m_.load_seconds += seconds;
}

void MetricsRecorder::cache_hit() {
  std::lock_guard<std::mutex> g(mu_);
  m_.cache_hits++;
}

void MetricsRecorder::executed(int64_t donations) {
  std::lock_guard<std::mutex> g(mu_);
  m_.executions++;
  m_.donations += donations;
}

void MetricsRecorder::synced() {
  std::lock_guard<std::mutex> g(mu_);
  m_.syncs++;
}

void MetricsRecorder::waited(double seconds) {
  std::lock_guard<std::mutex> g(mu_);
  m_.wait_seconds += seconds;
}

void MetricsRecorder::device_ran(std::chrono::steady_clock::time_point enqueued,
                                 std::chrono::steady_clock::time_point done) {
  std::lock_guard<std::mutex> g(mu_);
  auto start = std::max(enqueued, last_done_);
  if (done > start) m_.device_seconds += std::chrono::duration<double>(done - start).count();
  last_done_ = std::max(last_done_, done);
}

void MetricsRecorder::flushed(const char* reason, int64_t calls) {
  std::lock_guard<std::mutex> g(mu_);
  m_.regions++;
  m_.region_calls += calls;
  m_.region_calls_max = std::max(m_.region_calls_max, calls);
  m_.flush_reasons[reason]++;
}

void MetricsRecorder::replayed() {
  std::lock_guard<std::mutex> g(mu_);
  m_.region_replays++;
}

void MetricsRecorder::bucketed(int64_t padded_elements) {
  std::lock_guard<std::mutex> g(mu_);
  m_.bucket_hits++;
  m_.padded_elements += padded_elements;
}

void MetricsRecorder::bucket_refused() {
  std::lock_guard<std::mutex> g(mu_);
  m_.bucket_refusals++;
}

void MetricsRecorder::graph_replayed() {
  std::lock_guard<std::mutex> g(mu_);
  m_.graph_replays++;
}

void MetricsRecorder::ran_while_compiling() {
  std::lock_guard<std::mutex> g(mu_);
  m_.regions_run_while_compiling++;
}

void MetricsRecorder::sealed(int delta) {
  std::lock_guard<std::mutex> g(mu_);
  if (delta > 0) m_.regions_sealed++;
  m_.regions_compiling += delta;
}

void MetricsRecorder::fallback(const std::string& op) {
  std::lock_guard<std::mutex> g(mu_);
  m_.fallback_ops[op]++;
}

void MetricsRecorder::register_op(OpDef* op) {
  std::lock_guard<std::mutex> g(mu_);
  ops_.push_back(op);
}

Metrics MetricsRecorder::snapshot() {
  std::lock_guard<std::mutex> g(mu_);
  Metrics m = m_;
  for (const OpDef* op : ops_)
    if (int64_t n = op->calls.load()) m.op_calls[op->name] += n;
  return m;
}

void MetricsRecorder::reset() {
  std::lock_guard<std::mutex> g(mu_);
  const int64_t compiling = m_.regions_compiling;  // a gauge
  m_ = Metrics{};
  m_.regions_compiling = compiling;
  for (OpDef* op : ops_) op->calls.store(0);
}

}  // namespace torch_pjrt::engine
