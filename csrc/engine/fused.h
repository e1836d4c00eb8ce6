// Fused eager mode's scheduler: the open region, where it is cut, how it
// runs, and the captures of compiled graphs.
//
// A call that can fuse does not run at once. plan() lowers it alone, once
// per structure and never compiled (the SignatureTable), to learn its fresh
// results' types and to raise bad arguments at the op; the glue makes the
// fresh tensors and hands their slots to join(), which adds the call to the
// open Region (region.h). The region runs as one program at flush(): at a
// sync point or read, an upload into one of its storages, a call that cannot
// fuse, a mode or device change, a storage viewed as another dtype, the size
// caps, or a cut at the op stream's period (StreamPeriod, RecentPeriod).
// A call whose shape changes from step to step runs alone instead (bucket.h).
//
// No lock is held across a compile. A flush whose program is not compiled
// lowers it under the region lock, then seals the region: its storages are
// marked (Slot::seal) and a new, empty region opens. The lock is released
// while the compiler compiles (compiler.h) and the sealed region runs; other
// threads' calls keep joining the new region, and their flushes and syncs do
// not wait, unless they touch a sealed storage: a call that reads or writes
// one waits in join() until the sealed region has run, and any other reader
// or writer of it waits in the slot. A sealed region's storages are never in
// the open region, so one region never waits for another while it holds the
// lock. A flush reached with the lock already held (a mode switch, a
// capture) compiles under it.
//
// Capture of a compiled graph (torch.compile's replay path): between
// begin_capture() and end_capture() the calls one thread joins form one
// region that is never cut; its program, the storages it reaches and its
// constant parameters become a RegionCapture that replay() runs again on
// other storages with no lowering, no key and no per-op dispatch.
//
// Thread-safety: every public method may be called from any thread. The
// region lock (recursive: a flush reads storages through paths that may ask
// for a flush again, a no-op while `flushing_`) guards the open region, the
// periods and the capture state; the SignatureTable guards itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/bucket.h"
#include "engine/call.h"
#include "engine/compiler.h"
#include "engine/key.h"
#include "engine/launch.h"
#include "engine/metrics.h"
#include "engine/region.h"
#include "engine/settings.h"

namespace torch_pjrt::engine {

// Why a fused region ran (metrics()["flush_reasons"] counts them by name).
enum class FlushReason : uint8_t {
  Sync,       // sync(): torch_pjrt.synchronize, torch.tpu.synchronize
  Read,       // the host reads a value (.item(), .cpu(), print, a data-dependent op)
  Upload,     // host data replaces a storage the region references
  Unfusable,  // a call that cannot join (out=, data-dependent results), or the CPU fallback
  Mode,       // a mode switch
  Device,     // a call on another device
  DtypeView,  // a storage viewed as another dtype than the region reads it as
  CapCalls,   // kMaxRegionCalls calls
  CapBytes,   // kMaxRegionBytes of fresh results
  Period,     // a cut at the op stream's period
  Graph,      // the end of a captured compiled graph (begin_capture)
  Dynamic,    // a call whose shape changes from step to step runs alone (bucket.h)
};
constexpr int kNumFlushReasons = 12;
const char* flush_reason_name(FlushReason r);

// A compiled graph's program, captured the first time the graph ran as one
// fused region (torch.compile's replay path, python/torch_pjrt/dynamo.py):
// the program, the storages it reached in region order, and the buffers of
// its runtime scalars and view offsets. Those are constants of the graph for
// as long as its inputs keep their layout, which the caller guards. replay()
// binds new storages in the same order and runs the program with no lowering,
// no key and no per-op dispatch. Immutable once made; shared freely.
struct RegionCapture {
  std::shared_ptr<const CachedProgram> program;
  int device = 0;
  hlo::Precision precision = hlo::Precision::Highest;
  std::string name;
  // Per region slot: its identity at capture (compared, never dereferenced),
  // its bytes and whether its tensor died inside the graph.
  std::vector<uintptr_t> slot_ids;
  std::vector<int64_t> slot_nbytes;
  std::vector<uint8_t> dead;
  std::vector<const char*> writers;           // per slot: the op that writes it (nullptr: none)
  std::vector<runtime::BufferPtr> constants;  // per parameter: its buffer, or null for a slot
  std::vector<std::string> check_messages;    // per runtime check, with the user's line
};

// Where fused mode runs a call of one exact structure.
enum class Placement : int8_t {
  Undecided,  // fused mode has not seen it
  Joins,      // it joins the open region
  Alone,      // its shape changes from step to step: it runs alone
};

// Signatures of single calls, lowered and never compiled, by key: what fused
// mode's plan() and a bucketed call need to know of the exact call (fresh
// result types, checks), and where fused mode placed it. Any thread.
class SignatureTable {
 public:
  explicit SignatureTable(const Settings& settings) : settings_(settings) {}
  // The signature of `call` (exact key `key`), lowered now when unknown:
  // raises the call's argument errors. `placement` (when given): where fused
  // mode placed it, Undecided when that was decided before the shapes last
  // settled (ShapeHistory::generation `generation`).
  std::shared_ptr<const Signature> exact(const OpCall& call, const ProgramKey& key, uint64_t generation,
                                         Placement* placement = nullptr);
  // The signature of `call` lowered bucketed by `plan` (key `key`), cached.
  std::shared_ptr<const Signature> bucketed(const OpCall& call, const BucketPlan& plan, const ProgramKey& key);
  void place(const ProgramKey& key, Placement placement, uint64_t generation);
  // Forgets every placement (not the signatures).
  void forget_placements();

 private:
  struct Entry {
    std::shared_ptr<const Signature> signature;
    Placement placement;
    uint64_t generation;  // ShapeHistory::generation() when it was placed
  };
  std::shared_ptr<const Signature> insert(const ProgramKey& key, std::shared_ptr<const Signature> sig,
                                          Placement placement, Entry** entry);
  const Settings& settings_;
  std::mutex mu_;
  std::unordered_map<ProgramKey, Entry, ProgramKeyHash> entries_;
};

class FusedScheduler {
 public:
  // Runs one call as its own program (Engine's strict path); `observed`:
  // what ShapeHistory found for it already.
  using RunAlone = std::function<CallResult(const OpCall&, const Shapes* observed)>;
  // Everything referenced outlives the scheduler.
  FusedScheduler(const Settings& settings, Compiler& compiler, Launcher& launcher, MetricsRecorder& metrics,
                 ShapeHistory& shapes, RunAlone run_alone);

  // Fused mode's run: a deferred result for a call that joins (true), or
  // false when it runs alone, after the region was flushed (`*observed`: what
  // ShapeHistory found, when it looked). Raises the call's argument errors.
  bool plan(const OpCall& call, CallResult& deferred, std::optional<Shapes>& observed);
  // Adds a call that plan() deferred to the open region, with the slots of
  // its fresh results (new storages of `planned.types`, in order). May
  // flush the region (caps, period). Takes `call`'s contents without
  // copying them (see Engine::join).
  void join(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned);
  // Runs the open region now (nothing when it is empty).
  void flush(FlushReason why);
  // Runs the open region, then switches `mode` to `m` under the region lock,
  // so that a call joins either before the flush or after the new mode is
  // seen.
  void switch_mode(std::atomic<Mode>& mode, Mode m);

  // Capture (see Engine::begin_capture).
  bool begin_capture(bool dynamic, int64_t bucket_size);
  std::shared_ptr<const RegionCapture> end_capture(bool* compiling);
  void replay(const RegionCapture& capture, const std::vector<Slot*>& slots);
  // Whether this thread is capturing a compiled graph (begin_capture).
  bool capturing_here();
  // Capturing a graph with symbolic sizes (read without the lock), and its
  // bucket size.
  bool dynamic_capture() const { return dynamic_capture_.load(std::memory_order_acquire); }
  int64_t capture_bucket_size() const { return capture_bucket_size_; }

  // The StableHLO module the open region would run, when it references
  // `slot`; "" otherwise.
  std::string region_text(const Slot& slot);
  // A storage's deleter: deletes its slot, or marks it dead while the open
  // region references it (deleted after the flush), or leaves it to the
  // thread that sealed it.
  void release(Slot* slot);
  SignatureTable& signatures() { return signatures_; }
  // Forgets where each call was placed (test isolation).
  void forget_placements();
  void set_async_compile(bool on) { async_compile_.store(on); }
  bool async_compile() const { return async_compile_.load(); }
  void set_location_hook(std::string (*hook)()) { location_hook_ = hook; }

  // Caps of a fused region (a region flushes when it reaches either).
  static constexpr size_t kMaxRegionCalls = 512;
  static constexpr int64_t kMaxRegionBytes = int64_t{1} << 30;
  // A region cut at the stream's period holds at least this many calls
  // (whole periods), so a stream of one repeated op still fuses.
  static constexpr int64_t kMinPeriodCut = 32;

 private:
  class Lock;  // the region lock, counting how often this thread holds it
  // Joins a bucketed call (see plan); false when bucketing is refused.
  bool plan_bucketed(const OpCall& call, const ProgramKey& exact_key, CallResult& deferred);
  // Whether `call` touches a storage of a sealed region (it then waits).
  bool touches_sealed(const OpCall& call) const;
  // Adds `joined` to the open region; returns why the region must flush
  // after it, if it must.
  std::optional<FlushReason> add(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned,
                                 std::string location);
  // The cut after a call of structure `structure` joined, if any.
  std::optional<FlushReason> cut_after(uint64_t structure);
  // The calls of region `r` as one sequence to lower.
  Sequence sequence_of(const Region& r);
  // The program of region `r` (key `key`; `lowered`: already lowered, when
  // it is sealed); null when it compiles in the background meanwhile
  // (async compile). Raises when it does not lower or compile.
  std::shared_ptr<const CachedProgram> program_of(Region& r, const ProgramKey& key, Program* lowered, bool* hit);
  // Runs region `r` as one program, recording its capture when `record`. A
  // region that does not compile, compiles in the background, or fails
  // before its program starts runs call by call (run_calls_alone).
  void run_region(Region& r, const ProgramKey& key, Program* lowered, bool record);
  // Seals the open region (lowered as `lowered`), opens a new one, and runs
  // the sealed one with the lock released; then unseals it. `g` is held once
  // on entry and on return.
  void run_sealed(Lock& g, const ProgramKey& key, Program lowered);
  // The region's calls run one by one, as strict mode runs them: when its
  // program did not compile, compiles in the background, or failed before it
  // started (out of memory). A call that fails, or reads a storage that a
  // failed call should have written, leaves its targets failed (Slot::fail:
  // readers rethrow its error); the calls before and after it keep their
  // results. Rethrows the first failure at the end.
  void run_calls_alone(const Region& r, const std::vector<const OpCall*>& calls);
  // The capture of region `r` that ran `program` (null when a parameter is
  // not constant).
  std::shared_ptr<RegionCapture> capture_of(const Region& r, const std::shared_ptr<const CachedProgram>& program,
                                            std::vector<const char*> writers, std::vector<std::string> messages);
  // Refuses `plan`'s pattern for good (ShapeHistory::refuse) and counts it;
  // returns false.
  bool refuse_buckets(const BucketPlan& plan);

  const Settings& settings_;
  Compiler& compiler_;
  Launcher& launcher_;
  MetricsRecorder& metrics_;
  ShapeHistory& shapes_;
  RunAlone run_alone_;
  SignatureTable signatures_;
  std::atomic<bool> async_compile_{false};
  std::string (*location_hook_)() = nullptr;

  // The region lock, and what it guards.
  std::recursive_mutex mu_;
  std::condition_variable_any unsealed_;                // a sealed region's storages were unsealed
  std::unique_ptr<Region> region_;                      // the open region
  std::vector<std::unique_ptr<Region>> spare_regions_;  // ran, for the next seal
  StreamPeriod period_;                                 // the op stream since the last sync point
  RecentPeriod recent_;                                 // its recent calls (join())
  bool capped_ = false;                                 // a cap cut the stream since the last sync point
  bool flushing_ = false;                               // the open region runs under the lock
  // Capture (begin_capture): the capturing thread, whether the region is
  // still one region of its calls, whether the next flush records it.
  std::thread::id capture_thread_;
  bool capturing_ = false;
  bool capture_ok_ = false;
  bool recording_ = false;
  std::shared_ptr<RegionCapture> captured_;
  bool capture_compiling_ = false;            // the captured region's program was compiling
  bool capture_dynamic_ = false;              // begin_capture(dynamic)
  std::atomic<bool> dynamic_capture_{false};  // capturing_ && capture_dynamic_ (read without the lock)
  int64_t capture_bucket_size_ = 0;           // begin_capture(bucket_size)
};

}  // namespace torch_pjrt::engine
