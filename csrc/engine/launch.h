// Launching a compiled program: binding its parameters, donating what it
// overwrites, executing it, and storing its outputs.
//
// The parameters come from the program's Signature (program.h): slot
// buffers (read through the engine, which runs a fused region that writes
// them first), and constants: runtime scalars and view offsets from the
// constant pool (uploaded once per value and reused), RNG states, and the
// true sizes of bucketed views. Before it runs, a program whose results need
// more bytes than the device has is refused, where nothing is donated yet.
// The old buffer of each storage the program overwrites is donated when only
// its slot and this launch hold it (Slot::take_if_unshared); the executor
// destroys donated buffers once the program ran. Outputs are stored into the
// written slots; fresh results go back to the caller, runtime checks to the
// executor (or are waited for at once in debug mode).
//
// Thread-safety: every method may be called from any thread; a Binding is
// one launch's, used by one thread. The constant pool guards itself.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/bucket_plan.h"
#include "engine/cache.h"
#include "engine/call.h"
#include "engine/executor.h"
#include "engine/key.h"
#include "engine/metrics.h"
#include "engine/program.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// What a call produced: the buffers of results that go to fresh tensors, in
// order, with their types (results written to targets are already stored).
// A deferred result (fused mode) has types and no buffers: the caller makes
// the fresh tensors and passes them to Engine::join.
struct CallResult {
  std::vector<runtime::BufferPtr> buffers;
  std::shared_ptr<const std::vector<hlo::TensorType>> types;  // shared with the program or signature
  using Check = PendingCheck;
  std::vector<Check> checks;  // only with OpCall::defer_checks
  bool deferred = false;
  bool has_checks = false;  // deferred: the call makes runtime checks
  // Shape buckets: per fresh result, the elements its buffer holds when
  // that is more than the tensor's (its storage has this capacity), else 0.
  // Empty when no result is bucketed.
  std::vector<int64_t> capacities;
  uint64_t structure = 0;  // deferred: the call's key hash
  // Deferred and bucketed: how the call joins the region (its refs in the
  // order of the joined call, whose fresh results are whole writes).
  std::shared_ptr<const BucketPlan> plan;
};

// What one launch needs besides its result. Single calls keep one per
// thread, so that a small op allocates nothing here once warm (a launch is
// not re-entered on a thread: nothing it calls runs another op); a region
// uses its own. release() drops every buffer reference.
struct Binding {
  ProgramKey key;
  SlotNumbering numbering;
  std::vector<const TensorRef*> refs;
  std::vector<runtime::BufferPtr> keep, outs;
  std::vector<PJRT_Buffer*> raw;
  std::vector<int64_t> kept;
  std::vector<runtime::Buffer*> donated;
  std::vector<std::pair<Slot*, runtime::BufferPtr>> taken;
  const std::vector<hlo::TensorType>* exact_fresh = nullptr;  // a bucketed call's

  void release() {
    keep.clear();
    outs.clear();
    taken.clear();
  }
};

class Launcher {
 public:
  // The buffer of a slot as a program reads it (`dtype`): Engine::ensure_buffer.
  using ReadSlot = std::function<runtime::BufferPtr(Slot&, DType)>;
  // `client`, `metrics` and `executor` outlive the launcher.
  Launcher(runtime::Client& client, MetricsRecorder& metrics, Executor& executor, ReadSlot read_slot);

  // Binds the parameters of `program` for the `n` calls at `calls` (their
  // distinct slots in `slots`), donates what it may and executes it; the
  // outputs are left in `b.outs`. Returns the number of donated buffers.
  // Raises (nothing donated) when the results exceed the device's memory or
  // the plugin refuses to run it; errors name `name`.
  int64_t execute(const CachedProgram& program, const OpCall* const* calls, size_t n, const std::vector<Slot*>& slots,
                  Binding& b, const std::string& name);
  // Donates, executes and tracks a program whose parameters are bound in
  // b.keep (a replayed capture binds its own); outputs into b.outs.
  int64_t launch(const CachedProgram& program, const std::vector<Slot*>& slots, Binding& b, const std::string& name,
                 const char* last_op);
  // The buffer of a parameter that is not a slot (scalar, RNG state, view
  // offset, bucketed shape) of `calls`, whose tensor references are `refs`.
  // `exact_fresh`: a bucketed call's exact result types (ResultShape).
  runtime::BufferPtr constant_param(const Signature::ParamSource& p, const OpCall* const* calls,
                                    const std::vector<const TensorRef*>& refs, int device,
                                    const std::vector<hlo::TensorType>* exact_fresh = nullptr);

  // The buffer of `slot` as a program reads it (ReadSlot).
  runtime::BufferPtr read_slot(Slot& slot, DType dtype) { return read_slot_(slot, dtype); }

  // Stores a single call's outputs: written storages into their slots,
  // fresh buffers into the result, checks queued (kept in the result with
  // OpCall::defer_checks), or waited for and raised at once when `wait`
  // (debug mode). A bucketed call passes its exact signature: its result
  // types, and the messages its checks raise.
  CallResult store_outputs(const CachedProgram& program, const OpCall& call, Binding& b, bool wait,
                           const Signature* exact = nullptr);
  // Stores a region program's outputs: writes into `slots` (each named by
  // the op that wrote it, `writers`), checks queued with `check_messages`.
  void store_region_outputs(const Signature& sig, const std::vector<Slot*>& slots, Binding& b,
                            const std::vector<const char*>& writers, const std::vector<std::string>& check_messages);

  // Raises the call's Python-scalar checks (evaluated on the host, before
  // anything runs): `index` is the call's position in the signature.
  static void check_scalars(const Signature& sig, const OpCall& call, int32_t index);
  // Bytes of the results of the last program this thread launched (what an
  // out-of-memory message reports as asked for).
  static int64_t last_request_bytes();
  static void set_last_request_bytes(int64_t bytes);
  // The user's line of the region call this thread runs alone, for its
  // runtime checks' messages (null: none). Set by the fused scheduler.
  static void set_call_location(const std::string* location);

  // Device timing: each program's end is observed (a PJRT completion
  // callback) and counted in metrics' device_seconds. Off by default.
  void set_device_timing(bool on) { device_timing_.store(on); }

 private:
  runtime::BufferPtr scalar_buffer(const uint8_t* bytes, DType dtype, int device);
  // An uploaded i64 vector of a bucketed call's true sizes and strides,
  // reused while the same values recur (layers of one step share them).
  runtime::BufferPtr shape_buffer(const std::vector<int64_t>& values, int device);

  runtime::Client& client_;
  MetricsRecorder& metrics_;
  Executor& executor_;
  ReadSlot read_slot_;
  std::vector<int64_t> bytes_limit_;  // per device: Client::device_bytes_limit
  std::atomic<bool> device_timing_{false};
  // The constant pool: uploaded runtime scalars by (bits, dtype, device),
  // and bucketed shapes by (values, device), reused across calls.
  struct ScalarKey {
    uint64_t bits[2];  // a complex128's two parts; the first 8 bytes (zero-padded) of a smaller value
    uint32_t kind;
    bool operator==(const ScalarKey& o) const { return bits[0] == o.bits[0] && bits[1] == o.bits[1] && kind == o.kind; }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const {
      return std::hash<uint64_t>()((k.bits[0] * 31 + k.bits[1]) * 31 + k.kind);
    }
  };
  struct ShapeKeyHash {
    size_t operator()(const std::vector<int64_t>& v) const {
      return static_cast<size_t>(fnv_extend(kFnvBasis, v.data(), v.size()));
    }
  };
  std::mutex constants_mu_;
  std::unordered_map<ScalarKey, runtime::BufferPtr, ScalarKeyHash> scalars_;
  std::unordered_map<std::vector<int64_t>, runtime::BufferPtr, ShapeKeyHash> shapes_;
};

}  // namespace torch_pjrt::engine
