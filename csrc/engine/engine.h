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
// Fused mode (region.h): a call that can fuse does not run at once. run()
// lowers it alone, once per structure and without compiling, to learn its
// fresh results' types and to raise bad arguments at the op; the glue makes
// the fresh tensors and hands their slots to join(), which adds the call to
// the open region. The region runs as one program at flush(): at a sync
// point or read, an upload into one of its storages, a call that cannot
// fuse, a mode or device change, a storage viewed as another dtype, the size
// caps, or a cut at the op stream's period.
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
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/bucket.h"
#include "engine/cache.h"
#include "engine/call.h"
#include "engine/disk_cache.h"
#include "engine/executor.h"
#include "engine/host_memory.h"
#include "engine/metrics.h"
#include "engine/program.h"
#include "engine/region.h"
#include "engine/slot.h"
#include "engine/transfer.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// The eager modes: one program per op, waited for (Debug) or async
// (Strict); or ops joined into regions that run as one program (Fused).
enum class Mode { Debug, Strict, Fused };

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
  // mode returns at once; debug mode waits and raises errors here. Fused
  // mode returns a deferred result for a fusable call (see join), and
  // flushes the open region before it runs any other call.
  CallResult run(const OpCall& call);
  // Fused mode: adds a call that run() deferred to the open region, with
  // the slots of its fresh results (new storages of `planned.types`, in
  // order: `fresh[0, n_fresh)`). May flush the region (caps, period).
  // Nothing reads or writes those slots until the region runs; readers
  // flush it first. Takes `call`'s contents without copying them: `call`'s
  // arguments and targets are left holding an earlier region's spent ones
  // (their vectors keep their capacity), which the caller resets or drops.
  void join(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned);
  // Runs the open region now (nothing when it is empty).
  void flush(FlushReason why);
  // Capture of a compiled graph, by the thread that runs it in fused mode:
  // begin_capture() runs the open region; until end_capture() the calls this
  // thread joins form one region that is never cut (no caps, no period).
  // One capture at a time: begin_capture() returns false (and the caller
  // must not call end_capture) while another thread captures.
  // end_capture() runs that region as one program and returns its capture,
  // or nullptr when the graph did not run as exactly one region of this
  // thread's calls with constant parameters (a flush inside it, a call from
  // another thread, a random op, a host scalar tensor). Not nestable.
  // `*compiling` (when given) tells whether the region's program was still
  // being compiled in the background (set_async_compile), so that it ran
  // call by call and a later call may capture it.
  // `dynamic`: the graph has symbolic sizes (torch.compile's dynamic=True,
  // mark_dynamic, automatic dynamic), so a size of its calls that takes a
  // new value is dynamic at once (ShapeHistory::observe's `eager`).
  // `bucket_size` > 0: its bucketed sizes are multiples of it (bucket_of).
  bool begin_capture(bool dynamic = false, int64_t bucket_size = 0);
  std::shared_ptr<const RegionCapture> end_capture(bool* compiling = nullptr);
  // Async compile (torch.compile's async_compile option, and fused mode
  // with torch_pjrt.set_async_compile): a region whose program is not
  // compiled yet runs call by call, as strict mode runs them, while one
  // background thread per program compiles it into the cache (and its disk
  // tiers); a later run of the same region finds it there. A program that
  // failed to compile in the background is compiled in the foreground the
  // next time, where its error surfaces as usual. Any thread.
  void set_async_compile(bool on) { async_compile_.store(on); }
  bool async_compile() const { return async_compile_.load(); }
  // Device timing: while on, each program's end is observed (one PJRT
  // completion callback per program) and counted in metrics'
  // device_seconds. Off by default, for that callback. Any thread.
  void set_device_timing(bool on) { device_timing_.store(on); }
  // Waits for every background compile (async compile, compiles that lost
  // a race with the shared tier), then for the pending cache writes (the
  // process does this at exit).
  void finish_background_work();
  // Runs a captured program on `slots` (one per capture slot, in order):
  // reads their buffers, writes the slots the program writes, queues its
  // runtime checks. Runs the open region first.
  void replay(const RegionCapture& capture, const std::vector<Slot*>& slots);
  // The StableHLO module the open region would run, when it references
  // `slot`; "" otherwise.
  std::string region_text(const Slot& slot);
  // The deleter of a storage's DataPtr: deletes its slot, or, while the open
  // region references it, marks it dead and deletes it after the flush.
  static void release_slot(void* slot);
  // Where the user's code is ("file.py:LINE"), asked when a call with
  // runtime checks joins a region; set by the glue.
  void set_location_hook(std::string (*hook)()) { location_hook_ = hook; }

  // Caps of a fused region (a region flushes when it reaches either).
  static constexpr size_t kMaxRegionCalls = 512;
  static constexpr int64_t kMaxRegionBytes = int64_t{1} << 30;
  // A region cut at the stream's period holds at least this many calls
  // (whole periods), so a stream of one repeated op still fuses.
  static constexpr int64_t kMinPeriodCut = 32;
  // Queues runtime checks a deferred call returned (read at the next sync).
  void add_checks(std::vector<CallResult::Check> checks);

  // Sync point: runs the open region, waits for every program enqueued so
  // far, then reads pending runtime checks; raises the first failure of
  // either.
  void sync(FlushReason why = FlushReason::Sync);
  // Whether a slot holds data (runs the open region first when it writes it).
  bool has_data(Slot& slot);
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

  // Non-blocking copies (transfer.h says how each maps onto PJRT). Each
  // returns at once; a sync point waits for it and raises its error.
  // Starts copying a slot's whole buffer into `dst`, which `keep` holds
  // until the copy is done; `dst` is undefined until then.
  CompletionPtr download_async(Slot& slot, void* dst, std::shared_ptr<void> keep);
  // Starts replacing a slot's buffer with the host data at `src` (flat, of
  // `dtype`), which `keep` holds and nobody changes until the copy is done.
  // The slot reads as the new data from now on.
  CompletionPtr upload_async(Slot& slot, const void* src, DType dtype, std::shared_ptr<void> keep);
  // What a torch Event records: a Completion of all the work enqueued so
  // far, on any stream (runs the open region first). All streams of a
  // device feed its one PJRT device, which orders work by data: a program
  // or copy waits for the buffers it reads.
  CompletionPtr record();
  // Whether all the work enqueued so far is done (never waits for it).
  bool idle();
  // Makes sure a slot holds a buffer of `dtype` (zero-filled if never
  // written, re-interpreted through the host if written with another dtype)
  // and returns it.
  runtime::BufferPtr ensure_buffer(Slot& slot, DType dtype);
  // Gives a fresh slot the result buffer of a program (a new tensor's data).
  void adopt(Slot& slot, runtime::BufferPtr buffer, DType dtype);
  // The elements a new storage for a host upload of `sizes` should hold: 0
  // for exactly its elements, else a capacity with its dynamic dims at their
  // buckets (UploadHistory, bucket.h). Records the sizes. Any thread.
  int64_t upload_capacity(DType dtype, const hlo::Dims& sizes) {
    return buckets_ ? uploads_.capacity(dtype, sizes) : 0;
  }
  // The elements a new storage of `sizes` (an empty tensor) made inside a
  // graph with symbolic sizes, on the capturing thread, should hold: 0 for
  // exactly its elements, else its buckets' capacity (UploadHistory with
  // `eager`), so that the calls writing and reading it run bucketed.
  // Anywhere else 0. Any thread.
  int64_t graph_capacity(DType dtype, const hlo::Dims& sizes);
  // Makes dims `dims` of uploads like `sizes` (the same dtype and other
  // sizes) dynamic, bucketed by bucket_of(n, bucket_size): a graph input's
  // symbolic dims (torch.compile).
  void mark_dynamic_upload(DType dtype, const hlo::Dims& sizes, const hlo::Dims& dims, int64_t bucket_size = 0) {
    if (buckets_) uploads_.mark(dtype, sizes, dims, bucket_size);
  }

  // torch.set_float32_matmul_precision, as hlo::Precision (part of every
  // key; the default, Highest, is exact float32 as on CPU).
  void set_matmul_precision(hlo::Precision p) { precision_.store(p); }
  hlo::Precision matmul_precision() const { return precision_.load(); }

  Mode mode() const { return mode_.load(); }
  // Runs the open region, then switches.
  void set_mode(Mode m);

  Metrics metrics() {
    Metrics m = metrics_.snapshot();
    m.disk = disk_->stats();
    return m;
  }
  void reset_metrics() {
    metrics_.reset();
    disk_->reset_stats();
  }
  // Forgets which sizes changed (bucket.h) and where fused mode placed each
  // call, as if no call had run (test isolation; compiled programs stay).
  void forget_shapes();
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
  // The persistent tiers (disabled when TORCH_PJRT_CACHE_DIR is off and no
  // shared tier is set). Programs compiled are written there in the
  // background; flush_disk_cache() waits for those writes (the process does
  // at exit).
  DiskCache& disk_cache() { return *disk_; }
  void flush_disk_cache() { disk_->flush(); }
  // Bytes of the results of the last program this thread enqueued (what
  // an out-of-memory message reports as asked for).
  static int64_t last_request_bytes();
  // What the persistent tiers' fingerprint directory hashes.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  explicit Engine(std::unique_ptr<runtime::Client> client);
  // A program for `calls` (key `key`): from the persistent tiers, else
  // lowered and compiled (and then written to them).
  // `plans`: per call, its bucketing or nullptr (empty: none is bucketed).
  // `zero_unwritten`: SlotNumbering::zero_unwritten, as the key decided it.
  std::shared_ptr<const CachedProgram> compile(const ProgramKey& key, const std::vector<const OpCall*>& calls,
                                               const std::vector<uint8_t>* dead = nullptr, const Plans& plans = {},
                                               bool zero_unwritten = true);
  // The same, for a program that `lower` makes when no tier has it: named
  // `name` in metrics, `summary` in the disk entry, run on `device`.
  std::shared_ptr<const CachedProgram> compile(const ProgramKey& key, const std::function<Program()>& lower, int device,
                                               const std::string& name, const std::string& summary);
  Program lower(const std::vector<const OpCall*>& calls, const std::vector<uint8_t>* dead, const Plans& plans = {},
                bool zero_unwritten = true);
  // Compiles a lowered program (at most one compile per core at once).
  std::shared_ptr<const CachedProgram> compile_module(Program program, int device, const std::string& name);
  // A shared-tier entry, deserialised; nullptr for none or a damaged one
  // (dropped from `tier`).
  std::shared_ptr<const CachedProgram> loaded(std::optional<DiskEntry> e, DiskCache::Tier tier, const std::string& hex,
                                              int device);
  // Compiles `program` on a thread of its own while `read` reads the shared
  // tier; returns whichever usable result comes first.
  std::shared_ptr<const CachedProgram> race(DiskCache::SharedRead& read, const ProgramKey& key, const std::string& hex,
                                            Program program, int device, const std::string& name, bool* from_shared);
  runtime::BufferPtr scalar_buffer(const uint8_t* bytes, DType dtype, int device);
  // An uploaded i64 vector of a bucketed call's true sizes and strides,
  // reused while the same values recur (layers of one step share them).
  runtime::BufferPtr shape_buffer(const std::vector<int64_t>& values, int device);
  // Runs one call as its own program. `observed`: what ShapeHistory found
  // for it already (its plan in bucket_scratch()); else a shape-generic
  // call is observed when its exact program is not cached.
  CallResult run_strict(const OpCall& call, const Shapes* observed = nullptr);
  // Runs `call` bucketed by `plan` (whose results it fills) into `result`;
  // false when it runs exact instead (bucketing refused, or a transient
  // compile failure). `exact_key`: the call's exact key. Argument errors
  // raise.
  bool run_bucketed(const OpCall& call, BucketPlan& plan, const ProgramKey& exact_key, CallResult& result);
  // Stores a single call's outputs (written storages into their slots,
  // fresh buffers into the result, checks queued, or waited for in debug
  // mode). A bucketed call passes its exact signature: its result types,
  // and the messages its checks raise (the bucketed lowering names the
  // bucket's sizes).
  struct Binding;
  CallResult store_outputs(const CachedProgram& program, const OpCall& call, Binding& s,
                           const Signature* exact = nullptr);
  static BucketPlan& bucket_scratch();  // this thread's
  // Whether this thread is capturing a compiled graph (begin_capture).
  bool capturing_here();
  // The signature of `call` (exact key `key`) lowered alone, never compiled
  // (cached by its key); raises the call's argument errors. `placement`:
  // where fused mode runs it.
  enum class Placement : int8_t {
    Undecided,  // fused mode has not seen it
    Joins,      // it joins the open region
    Alone,      // its shape changes from step to step: it runs alone
  };
  std::shared_ptr<const Signature> exact_signature(const OpCall& call, const ProgramKey& key,
                                                   Placement* placement = nullptr);
  // Fused mode: a deferred result for `call` (its key left in `key`).
  CallResult plan(const OpCall& call, ProgramKey& key, Placement* placement = nullptr);
  // Fused mode: makes `deferred` (plan()'s result for `call`, exact key
  // `exact_key`) join the region bucketed by bucket_scratch()'s plan; false
  // (and `deferred` unchanged) when bucketing is refused.
  bool plan_bucketed(const OpCall& call, const ProgramKey& exact_key, CallResult& deferred);
  // Refuses `plan`'s pattern for good (ShapeHistory::refuse) and counts it;
  // returns false.
  bool refuse_buckets(const BucketPlan& plan);
  // plan.results: the exact call's result sizes, each at bucket_of(d, multiple).
  static void bucket_results(BucketPlan& plan, const Signature& exact, int64_t multiple);
  void run_region();
  // The open region's calls run one by one, as strict mode runs them: when
  // its program did not compile, compiles in the background, or failed
  // before it started (out of memory). A call that fails, or reads a
  // storage that a failed call should have written, leaves its targets
  // failed (Slot::fail: readers rethrow its error); the calls before and
  // after it keep their results. Rethrows the first failure at the end.
  void run_calls_alone(const std::vector<const OpCall*>& calls);
  void check_scalars(const Signature& sig, const OpCall& call, int32_t index) const;
  // Binds the program's parameters for `calls` (their distinct slots in
  // `slots`), donates what it may and executes it; outputs into `outs`.
  // Returns the number of donated buffers.
  int64_t execute(const CachedProgram& program, const OpCall* const* calls, size_t n, const std::vector<Slot*>& slots,
                  Binding& b, const std::string& name);
  // The buffer of a parameter that is not a slot (scalar, RNG state, view
  // offset) of `calls`, whose tensor references are `refs`.
  // `exact_fresh`: a bucketed call's exact result types (ResultShape).
  runtime::BufferPtr constant_param(const Signature::ParamSource& p, const OpCall* const* calls,
                                    const std::vector<const TensorRef*>& refs, int device,
                                    const std::vector<hlo::TensorType>* exact_fresh = nullptr);
  // Donates, executes and tracks a program whose parameters are bound in
  // b.keep; outputs into b.outs.
  int64_t launch(const CachedProgram& program, const std::vector<Slot*>& slots, Binding& b, const std::string& name,
                 const char* last_op);
  // Stores a region program's outputs: writes into `slots`, checks queued.
  void store_region_outputs(const Signature& sig, const std::vector<Slot*>& slots, Binding& b,
                            const std::vector<const char*>& writers, const std::vector<std::string>& check_messages);

  std::unique_ptr<runtime::Client> client_;
  std::vector<int64_t> bytes_limit_;  // per device: Client::device_bytes_limit
  int64_t identity_;                  // the first word of every key
  std::string fingerprint_;
  std::unique_ptr<DiskCache> disk_;
  // At most one compile per core at once; other threads keep dispatching.
  std::mutex compile_mu_;
  std::condition_variable compile_cv_;
  int compile_slots_ = 1;
  std::atomic<int> background_compiles_{0};
  std::atomic<Mode> mode_{Mode::Strict};
  std::atomic<hlo::Precision> precision_{hlo::Precision::Highest};
  // The first word of every key: the plugin's identity and the precision.
  int64_t key_identity() const { return identity_ ^ (static_cast<int64_t>(precision_.load()) << 56); }
  ProgramCache cache_;
  // Shape buckets (bucket.h); off with TORCH_PJRT_SHAPE_BUCKETS=0.
  ShapeHistory shapes_;
  UploadHistory uploads_;
  bool buckets_ = true;
  MetricsRecorder metrics_;
  Executor executor_{metrics_};
  std::once_flag copies_once_;
  std::unique_ptr<CopyThread> copies_;  // made at the first non-blocking upload
  // Uploaded runtime scalars by (bits, dtype and device), reused across calls.
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
  std::mutex scalars_mu_;
  std::unordered_map<ScalarKey, runtime::BufferPtr, ScalarKeyHash> scalars_;
  struct ShapeKeyHash {
    size_t operator()(const std::vector<int64_t>& v) const {
      return static_cast<size_t>(fnv_extend(kFnvBasis, v.data(), v.size()));
    }
  };
  std::unordered_map<std::vector<int64_t>, runtime::BufferPtr, ShapeKeyHash> shapes_buffers_;  // by values, device
  // Signatures of single calls (lowered, never compiled), for fused mode
  // and bucketed calls.
  struct KeyHash {
    size_t operator()(const ProgramKey& k) const { return static_cast<size_t>(k.hash); }
  };
  std::mutex signatures_mu_;
  struct ExactCall {
    std::shared_ptr<const Signature> signature;
    Placement placement;
    uint64_t generation;  // ShapeHistory::generation() when it was placed
  };
  std::unordered_map<ProgramKey, ExactCall, KeyHash> signatures_;
  // The open region. Recursive: a flush reads storages through paths that
  // may ask for a flush again (a no-op while `flushing_`).
  std::recursive_mutex region_mu_;
  Region region_;
  StreamPeriod period_;  // the op stream since the last sync point
  RecentPeriod recent_;  // its recent calls (join())
  bool capped_ = false;  // a cap cut the stream since the last sync point
  bool flushing_ = false;
  // Capture (begin_capture): the capturing thread, whether the region is
  // still one region of its calls, whether the next flush records it.
  std::thread::id capture_thread_;
  bool capturing_ = false;
  bool capture_ok_ = false;
  bool recording_ = false;
  std::shared_ptr<RegionCapture> captured_;
  bool capture_compiling_ = false;
  bool capture_dynamic_ = false;              // begin_capture(dynamic)
  std::atomic<bool> dynamic_capture_{false};  // capturing_ && capture_dynamic_ (read without the lock)
  int64_t capture_bucket_size_ = 0;  // begin_capture(bucket_size)  // the captured region's program was compiling
  // Async compile: whether it is on, and the keys compiling in the
  // background or failed there (compiled in the foreground next time).
  std::atomic<bool> async_compile_{false};
  std::atomic<bool> device_timing_{false};
  std::mutex async_mu_;
  std::unordered_set<ProgramKey, KeyHash> async_compiling_, async_failed_;
  // Starts compiling `calls` (the open region, key `key`) on a background
  // thread, unless it is compiling already; false when it failed there
  // before. Lowers here: the calls' slots may die once the region runs.
  bool compile_in_background(const ProgramKey& key, const std::vector<const OpCall*>& calls,
                             const std::vector<uint8_t>& dead, const Plans& plans, bool zero_unwritten);
  std::string (*location_hook_)() = nullptr;
};

}  // namespace torch_pjrt::engine
