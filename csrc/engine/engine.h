// The eager executor: storage slots, the compile cache keyed on an op's
// structure, program execution, sync points, runtime checks and metrics.
//
// The torch glue describes one ATen call as an OpCall (views of storage
// slots, runtime scalars, static arguments) and calls Engine::run. The
// engine looks the call's structure up in the in-memory cache before any
// StableHLO is printed; on a miss it builds the program through the lowering
// table, compiles it once and remembers it. Runtime values (Python scalars,
// RNG seeds and offsets) are always program parameters, never part of a key.
//
// Thread-safety: all public methods may be called from any thread at once
// (torch's autograd runs backward on its own device thread, and users run
// ops from several Python threads). The cache, scalar cache, in-flight
// queue, pending checks and metrics are guarded by one mutex, `mu_`; each
// slot guards its own state (see Slot). A slot's mutex is never held while
// `mu_` is taken, nor the other way round, and no lock is held while the
// host waits for a device program. Torch does not serialise storages: two
// threads writing one storage race as on CPU (the last write wins), but the
// process never sees a torn buffer.
#pragma once

#include <atomic>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/view.h"
#include "lowering/context.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

using hlo::DType;

// The device memory behind one torch storage. Owned by the storage's DataPtr
// (created by the allocator, deleted with the storage).
//
// Thread-safety: `device` and `nbytes` never change. The buffer, its dtype
// and its producer are read and replaced together under the slot's own
// mutex, so a thread that reads a storage while another writes it sees
// either the old or the new buffer, never a torn one. Only the engine
// replaces a slot's buffer (Engine::run, upload, adopt).
class Slot {
 public:
  Slot(int device, int64_t nbytes);
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  struct State {
    runtime::BufferPtr buffer;       // flat 1-D, nbytes / byte_size(dtype) elements; null until written
    DType dtype = DType::U8;         // element type of `buffer`
    const char* producer = nullptr;  // ATen name of the op that wrote `buffer` last (for async errors)
  };
  // A consistent copy of the current state (the buffer is shared, not copied).
  State state() const;
  bool has_buffer() const;

  const int device;
  const int64_t nbytes;

 private:
  friend class Engine;
  void set(State s);

  mutable std::mutex mu_;
  State state_;
};

// The eager modes. Fused is accepted by the API but not implemented yet.
enum class Mode { Debug, Strict, Fused };

// One argument of a call as the glue hands it over.
struct CallArg {
  using Kind = lowering::Arg::Kind;
  Kind kind = Kind::None;
  // Tensor (and each element of TensorList): a view of a slot.
  struct TensorRef {
    Slot* slot = nullptr;
    ViewSpec view;
  };
  TensorRef tensor;
  std::vector<TensorRef> list;
  std::vector<int64_t> present;  // Tensor?[]: 1 per position with a tensor
  // Scalar: a rank-0 runtime value (f64/i64/bool for Python numbers, or the
  // dtype of a zero-dim host tensor when `host_tensor`).
  DType scalar_dtype = DType::F64;
  bool host_tensor = false;
  uint8_t scalar_bytes[8] = {};
  // Static values (part of the key).
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::string s;
  // Rng: seed and offset for this call.
  uint64_t rng[2] = {0, 0};
};

// A registered op: its ATen name and lowering. Lives for the process.
struct OpDef {
  OpDef(std::string name, lowering::LowerFn lower) : name(std::move(name)), lower(lower) {}
  std::string name;  // "aten::add.Tensor"
  lowering::LowerFn lower;
  std::atomic<int64_t> calls{0};  // programs run for this op (metrics()["op_calls"])
};

struct OpCall {
  const OpDef* op = nullptr;
  int device = 0;
  std::vector<CallArg> args;
  // One entry per op result: the view the result is written into (in-place
  // and out= variants), or slot == nullptr for a fresh output tensor.
  std::vector<CallArg::TensorRef> targets;
  // Strict mode: hand the program's runtime checks back in CallResult
  // instead of queueing them, for a caller that still validates the call
  // after it ran (out= casts) and queues them with add_checks() only if the
  // call succeeds, so a refused call leaves no check behind.
  bool defer_checks = false;
};

// What a call produced: the buffers of results that go to fresh tensors, in
// order, with their types (results written to targets are already stored).
struct CallResult {
  std::vector<runtime::BufferPtr> buffers;
  std::vector<hlo::TensorType> types;
  struct Check {
    runtime::BufferPtr failed;
    std::string message;
    lowering::ErrorKind kind;
  };
  std::vector<Check> checks;  // only with OpCall::defer_checks
};

struct Metrics {
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t executions = 0;
  int64_t syncs = 0;
  double compile_seconds = 0;
  std::map<std::string, int64_t> fallback_ops;
  std::map<std::string, int64_t> op_calls;  // lowered ops run, by ATen name
};

// Raised for a failed runtime check of a program (an out-of-range index, an
// integer division by zero); `kind` is the Python class it becomes.
struct CheckError : std::runtime_error {
  CheckError(const std::string& what, lowering::ErrorKind kind) : std::runtime_error(what), kind(kind) {}
  lowering::ErrorKind kind;
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

  Metrics metrics();
  void reset_metrics();
  void count_fallback(const std::string& op);
  // Makes `op` appear in metrics()["op_calls"]; `op` must live for the process.
  void register_op(OpDef* op);
  int64_t allocated_bytes(int device) const;
  int64_t peak_allocated_bytes(int device) const;
  void reset_peak(int device);
  void track_alloc(int device, int64_t delta);
  // Number of cached programs.
  size_t cache_size();

 private:
  explicit Engine(std::unique_ptr<runtime::Client> client);
  struct Entry;
  struct Key {
    std::vector<int64_t> words;
    size_t hash;
    bool operator==(const Key& o) const { return hash == o.hash && words == o.words; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return k.hash; }
  };

  void make_key(const OpCall& call, std::vector<int64_t>& words) const;
  std::unique_ptr<Entry> build(const OpCall& call);
  runtime::BufferPtr scalar_buffer(const CallArg& a, int device);

  std::unique_ptr<runtime::Client> client_;
  std::atomic<Mode> mode_{Mode::Strict};
  std::mutex mu_;
  std::unordered_map<Key, std::unique_ptr<Entry>, KeyHash> cache_;
  // Uploaded runtime scalars by (bits, dtype and device), reused across calls.
  struct ScalarKey {
    uint64_t bits;
    uint32_t kind;
    bool operator==(const ScalarKey& o) const { return bits == o.bits && kind == o.kind; }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const { return std::hash<uint64_t>()(k.bits * 31 + k.kind); }
  };
  std::unordered_map<ScalarKey, runtime::BufferPtr, ScalarKeyHash> scalars_;
  using PendingCheck = CallResult::Check;
  std::vector<PendingCheck> pending_checks_;
  // Completion of programs enqueued since the last sync (with the op name for
  // errors). Bounded: past kMaxInFlight the oldest half is awaited.
  std::deque<std::pair<runtime::Event, const char*>> in_flight_;
  static constexpr size_t kMaxInFlight = 4096;
  void await_in_flight(size_t keep);
  std::vector<OpDef*> ops_;
  Metrics metrics_;
  static constexpr int kMaxDevices = 64;
  std::atomic<int64_t> allocated_[kMaxDevices] = {};
  std::atomic<int64_t> peak_[kMaxDevices] = {};
};

}  // namespace torch_pjrt::engine
