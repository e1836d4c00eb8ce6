// Counters of what the engine did, for torch_pjrt.metrics().
//
// Thread-safety: all methods may be called from any thread at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/call.h"
#include "engine/disk_cache.h"

namespace torch_pjrt::engine {

struct Metrics {
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t executions = 0;
  int64_t syncs = 0;
  int64_t donations = 0;  // input buffers given to the program that overwrote them
  double compile_seconds = 0;
  // Seconds host threads spent blocked until device work finished (sync
  // points, too many programs in flight, debug mode's per-op wait): high
  // when the device, not the host, bounds the step.
  double wait_seconds = 0;
  // Seconds a device was running programs, while device timing is on
  // (Engine::set_device_timing): each program counts from the later of its
  // enqueue and the end of the program before it to its own end. Beside
  // the wall time of the same work it says how much of the step the device
  // bounds: the step cannot run faster than its programs.
  double device_seconds = 0;
  // Programs loaded from the persistent tiers, and the seconds that took
  // (reading, checking and deserialising); `disk` has the tiers' counters.
  int64_t disk_loads = 0;
  double load_seconds = 0;
  DiskCacheStats disk;
  std::map<std::string, int64_t> fallback_ops;
  std::map<std::string, int64_t> op_calls;  // lowered ops run, by ATen name
  // Compiles by program name: the ATen name of a one-op program, the name
  // of a fused region's or graph's.
  std::map<std::string, int64_t> compiles_by_name;
  // Fused mode: regions run, their calls (sum and largest), why they ran,
  // and regions that did not compile and ran call by call instead.
  int64_t regions = 0;
  int64_t region_calls = 0;
  int64_t region_calls_max = 0;
  std::map<std::string, int64_t> flush_reasons;
  int64_t region_replays = 0;
  // torch.compile: graph calls that ran their captured program directly.
  int64_t graph_replays = 0;
  // Async compile: regions that ran call by call while their program
  // compiled in the background.
  int64_t regions_run_while_compiling = 0;
  // Regions whose program compiled while they were sealed (the region lock
  // released, fused.h), and how many are sealed now (not reset).
  int64_t regions_sealed = 0;
  int64_t regions_compiling = 0;
  // Shape buckets: calls that ran a bucketed program, the elements their
  // fresh results hold past their true sizes, and structures refused.
  int64_t bucket_hits = 0;
  int64_t padded_elements = 0;
  int64_t bucket_refusals = 0;
};

class MetricsRecorder {
 public:
  void compiled(double seconds, const std::string& name);
  void loaded(double seconds);
  void cache_hit();
  void executed(int64_t donations);
  void synced();
  void waited(double seconds);
  // A program enqueued at `enqueued` finished at `done` (device timing).
  void device_ran(std::chrono::steady_clock::time_point enqueued, std::chrono::steady_clock::time_point done);
  void flushed(const char* reason, int64_t calls);
  void replayed();
  void graph_replayed();
  void ran_while_compiling();
  // A region was sealed (+1) or unsealed (-1).
  void sealed(int delta);
  void bucketed(int64_t padded_elements);
  void bucket_refused();
  void fallback(const std::string& op);
  // Makes `op` appear in op_calls; `op` must live for the process.
  void register_op(OpDef* op);
  Metrics snapshot();
  void reset();

 private:
  std::mutex mu_;
  Metrics m_;
  std::vector<OpDef*> ops_;
  std::chrono::steady_clock::time_point last_done_{};  // the latest end device_ran saw
};

// Adds the seconds from its construction to its destruction to `metrics`'
// wait_seconds: put one around a wait for device work.
class WaitTimer {
 public:
  explicit WaitTimer(MetricsRecorder& metrics) : metrics_(metrics), start_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() { metrics_.waited(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()); }
  WaitTimer(const WaitTimer&) = delete;

 private:
  MetricsRecorder& metrics_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace torch_pjrt::engine
