// The engine: runs op calls on the device and owns their device state.
//
// The torch glue describes one ATen call as an OpCall (call.h: views of
// storage slots, runtime scalars, static arguments) and calls Engine::run.
// The engine builds the call's key (cache.h) before any StableHLO is
// printed and looks it up in the program cache; on a miss ProgramBuilder
// (program.h) lowers it through the lowering table and the plugin compiles
// it once. The engine then binds the program's parameters (slot buffers,
// runtime scalars, RNG states, view offsets), donates the buffers of storages
// the program overwrites when no one else holds them, enqueues the program
// (executor.h) and stores the results: written storages into their slots
// (slot.h), fresh results back to the glue. Runtime values are always
// program parameters, never part of a key.
//
// Thread-safety: all public methods may be called from any thread at once
// (torch's autograd runs backward on its own device thread, and users run
// ops from several Python threads). The cache, executor and metrics guard
// themselves; each slot guards its own state. A thread waits for a pending
// slot only while it holds no pending slot of its own, and no lock is held
// while the host waits for a device program. Torch does not serialise
// storages: two threads writing one storage race as on CPU (the last write
// wins), but the process never sees a torn buffer.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cache.h"
#include "engine/call.h"
#include "engine/executor.h"
#include "engine/metrics.h"
#include "engine/program.h"
#include "engine/slot.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// The eager modes. Fused is accepted by the API but not implemented yet.
enum class Mode { Debug, Strict, Fused };

// What a call produced: the buffers of results that go to fresh tensors, in
// order, with their types (results written to targets are already stored).
struct CallResult {
  std::vector<runtime::BufferPtr> buffers;
  const std::vector<hlo::TensorType>* types = nullptr;  // the program's signature's, alive for the process
  using Check = PendingCheck;
  std::vector<Check> checks;  // only with OpCall::defer_checks
};

class Engine {
 public:
  // The process-wide engine. The plugin is loaded on first use from the path
  // given to configure(); failures are rethrown on every later use.
  static Engine& get();
  static void configure(const std::string& plugin_path);
  static const std::string& plugin_path();
  // True when the plugin loaded; false (and no throw) when it did not.
  static bool available();
  // True once the engine exists (without trying to load the plugin).
  static bool started();
  // The error that made the plugin unavailable ("" when it loaded).
  static std::string load_error();

  runtime::Client& client() { return *client_; }
  int device_count() const { return client_->device_count(); }

  // Runs one op: looks up or compiles its program and enqueues it. Strict
  // mode returns at once; debug mode waits and raises errors here.
  CallResult run(const OpCall& call);
  // Queues runtime checks a deferred call returned (read at the next sync).
  void add_checks(std::vector<CallResult::Check> checks);

  // Sync point: waits for every program enqueued so far, then reads pending
  // runtime checks; raises the first failure of either.
  void sync();
  // Copies a slot's whole buffer to host memory (a sync point).
  void download(Slot& slot, void* dst);
  // Reads a small result buffer of a program (a data-dependent count, the
  // bool of aten::equal) into `dst`, which holds `nbytes` (the buffer's whole
  // size). A sync point: waits for every program enqueued so far and raises
  // pending runtime checks first, so a value computed from bad input is never
  // returned. Errors of the producing program are raised naming `op`.
  void read_result(const runtime::BufferPtr& buffer, void* dst, size_t nbytes, const std::string& op);
  // Replaces a slot's buffer with host data of `dtype` (flat).
  void upload(Slot& slot, const void* src, DType dtype);
  // Makes sure a slot holds a buffer of `dtype` (zero-filled if never
  // written, re-interpreted through the host if written with another dtype)
  // and returns it.
  runtime::BufferPtr ensure_buffer(Slot& slot, DType dtype);
  // Gives a fresh slot the result buffer of a program (a new tensor's data).
  void adopt(Slot& slot, runtime::BufferPtr buffer, DType dtype);

  Mode mode() const { return mode_.load(); }
  void set_mode(Mode m) { mode_.store(m); }

  Metrics metrics() { return metrics_.snapshot(); }
  void reset_metrics() { metrics_.reset(); }
  void count_fallback(const std::string& op) { metrics_.fallback(op); }
  // Makes `op` appear in metrics()["op_calls"]; `op` must live for the process.
  void register_op(OpDef* op) { metrics_.register_op(op); }
  // Bytes of live device buffers (and reserved unwritten storages), and
  // their peak since reset_peak().
  int64_t allocated_bytes(int device) const { return runtime::DeviceMemory::get().current(device); }
  int64_t peak_allocated_bytes(int device) const { return runtime::DeviceMemory::get().peak(device); }
  void reset_peak(int device) { runtime::DeviceMemory::get().reset_peak(device); }
  // Number of cached programs, and the hex hash of each one's key.
  size_t cache_size() { return cache_.size(); }
  std::vector<std::string> program_keys() { return cache_.key_hashes(); }
  // The key the call would be cached under (for tests and diagnostics).
  ProgramKey key_of(const OpCall& call) const;

 private:
  explicit Engine(std::unique_ptr<runtime::Client> client);
  std::unique_ptr<CachedProgram> compile(const std::vector<const OpCall*>& calls);
  runtime::BufferPtr scalar_buffer(const uint8_t* bytes, DType dtype, int device);

  std::unique_ptr<runtime::Client> client_;
  int64_t identity_;  // the first word of every key
  std::atomic<Mode> mode_{Mode::Strict};
  ProgramCache cache_;
  Executor executor_;
  MetricsRecorder metrics_;
  // Uploaded runtime scalars by (bits, dtype and device), reused across calls.
  struct ScalarKey {
    uint64_t bits;
    uint32_t kind;
    bool operator==(const ScalarKey& o) const { return bits == o.bits && kind == o.kind; }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const { return std::hash<uint64_t>()(k.bits * 31 + k.kind); }
  };
  std::mutex scalars_mu_;
  std::unordered_map<ScalarKey, runtime::BufferPtr, ScalarKeyHash> scalars_;
};

}  // namespace torch_pjrt::engine
