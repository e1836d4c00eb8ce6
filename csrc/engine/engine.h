// The engine: runs op calls on the device and owns their device state.
//
// The torch glue describes one ATen call as an OpCall (call.h: views of
// storage slots, runtime scalars, static arguments) and calls Engine::run.
// The engine is the few steps that tie its parts together, each part the
// owner of one job:
//   key.h       the call's ProgramKey, made before any StableHLO is printed;
//   compiler.h  the program of a key: the cache's tiers (memory, host,
//               shared), lowering (ProgramBuilder, program.h) and compiling;
//   launch.h    binding the parameters (slot buffers, the constant pool of
//               scalars and offsets), donation, execution, storing outputs;
//   executor.h  programs in flight, runtime checks, sync points;
//   fused.h     fused mode's regions, cuts, sealed compiles and captures;
//   bucket.h    which sizes change from call to call (shape buckets);
//   transfer.h  non-blocking copies.
// Strict mode runs each call as its own program at once; debug mode also
// waits for it; fused mode defers fusable calls into the open region (run()
// returns a deferred result, then the glue calls join()). Runtime values are
// always program parameters, never part of a key.
//
// Thread-safety: all public methods may be called from any thread at once
// (torch's autograd runs backward on its own device thread, and users run
// ops from several Python threads). Each part guards itself; each slot
// guards its own state. A thread waits for a pending slot only while it
// holds no pending slot of its own, and no lock is held while the host waits
// for a device program or while a program compiles. Torch does not
// serialise storages: two threads writing one storage race as on CPU (the
// last write wins), but the process never sees a torn buffer.
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
#include "engine/call.h"
#include "engine/compiler.h"
#include "engine/executor.h"
#include "engine/fused.h"
#include "engine/host_memory.h"
#include "engine/key.h"
#include "engine/launch.h"
#include "engine/metrics.h"
#include "engine/settings.h"
#include "engine/slot.h"
#include "engine/transfer.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

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
  void set_async_compile(bool on) { fused_.set_async_compile(on); }
  bool async_compile() const { return fused_.async_compile(); }
  // Device timing: while on, each program's end is observed (one PJRT
  // completion callback per program) and counted in metrics'
  // device_seconds. Off by default, for that callback. Any thread.
  void set_device_timing(bool on) { launcher_.set_device_timing(on); }
  // Waits for every background compile (async compile, compiles that lost
  // a race with the shared tier), then for the pending cache writes (the
  // process does this at exit).
  void finish_background_work() { compiler_.finish_background_work(); }
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
  void set_location_hook(std::string (*hook)()) { fused_.set_location_hook(hook); }

  // Caps of a fused region (a region flushes when it reaches either).
  static constexpr size_t kMaxRegionCalls = FusedScheduler::kMaxRegionCalls;
  static constexpr int64_t kMaxRegionBytes = FusedScheduler::kMaxRegionBytes;
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
  // Lends the memory of a slot's buffer (flat, of `dtype`) to be read and
  // written in place by host code (a collective engine), where device memory
  // is host memory (the CPU plugin). A sync point: every program enqueued so
  // far has finished, so nothing in flight reads or writes it. Returns null,
  // and lends nothing, on other platforms or when anyone else holds the
  // buffer. `keep` receives the buffer: while the caller holds it, no program
  // takes the buffer by donation, and the memory stays valid. The lent memory
  // is the slot's data until the next op that writes the slot.
  void* lend_host_memory(Slot& slot, DType dtype, runtime::BufferPtr* keep);

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
    return settings_.buckets ? uploads_.capacity(dtype, sizes) : 0;
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
    if (settings_.buckets) uploads_.mark(dtype, sizes, dims, bucket_size);
  }

  // torch.set_float32_matmul_precision, as hlo::Precision (part of every
  // key; the default, Highest, is exact float32 as on CPU).
  void set_matmul_precision(hlo::Precision p) { settings_.precision.store(p); }
  hlo::Precision matmul_precision() const { return settings_.precision.load(); }

  Mode mode() const { return settings_.mode.load(); }
  // Runs the open region, then switches.
  void set_mode(Mode m) { fused_.switch_mode(settings_.mode, m); }

  Metrics metrics() {
    Metrics m = metrics_.snapshot();
    m.disk = compiler_.disk().stats();
    return m;
  }
  void reset_metrics() {
    metrics_.reset();
    compiler_.disk().reset_stats();
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
  size_t cache_size() { return compiler_.cached_programs(); }
  std::vector<std::string> program_keys() { return compiler_.key_hashes(); }
  // The key the call would be cached under (for tests and diagnostics).
  ProgramKey key_of(const OpCall& call) const;
  // The persistent tiers (disabled when TORCH_PJRT_CACHE_DIR is off and no
  // shared tier is set). Programs compiled are written there in the
  // background; flush_disk_cache() waits for those writes (the process does
  // at exit).
  DiskCache& disk_cache() { return compiler_.disk(); }
  void flush_disk_cache() { compiler_.disk().flush(); }
  // Bytes of the results of the last program this thread enqueued (what
  // an out-of-memory message reports as asked for).
  static int64_t last_request_bytes() { return Launcher::last_request_bytes(); }
  // What the persistent tiers' fingerprint directory hashes.
  const std::string& fingerprint() const { return compiler_.fingerprint(); }

 private:
  explicit Engine(std::unique_ptr<runtime::Client> client);
  // Runs one call as its own program. `observed`: what ShapeHistory found
  // for it already (its plan in bucket_scratch()); else a shape-generic
  // call is observed when its exact program is not cached.
  CallResult run_strict(const OpCall& call, const Shapes* observed = nullptr);
  // Runs `call` bucketed by `plan` (whose results it fills) into `result`;
  // false when it runs exact instead (bucketing refused, or a transient
  // compile failure). `exact_key`: the call's exact key. Argument errors
  // raise.
  bool run_bucketed(const OpCall& call, BucketPlan& plan, const ProgramKey& exact_key, CallResult& result);

  // Declared in the order they are made: each part takes the ones above it.
  std::unique_ptr<runtime::Client> client_;
  Settings settings_;
  MetricsRecorder metrics_;
  Executor executor_{metrics_};
  Compiler compiler_;
  Launcher launcher_;
  Transfers transfers_;
  ShapeHistory shapes_;
  UploadHistory uploads_;
  FusedScheduler fused_;
};

}  // namespace torch_pjrt::engine
