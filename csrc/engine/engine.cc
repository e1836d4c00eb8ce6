#include "engine/engine.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "engine/trace.h"

namespace torch_pjrt::engine {

namespace {

// The runtime's element type for a dtype (hlo/dtype.cc holds the PJRT codes).
runtime::ElementType element_type(DType t) { return static_cast<runtime::ElementType>(hlo::pjrt_code(t)); }

// Devices to ask of a CPU plugin: TORCH_PJRT_CPU_DEVICES, or the cores this
// process may run on, within [2, 4]. XLA's CPU client runs every device's
// programs on one pool of max(cores, devices) threads, so a device beyond
// the cores adds a thread that competes for them (a GPT training step on 2
// cores ran 10-35% slower with the plugin's 4 devices). Two devices keep
// multi-device code exercised on any machine. Under torchrun (or any launcher
// that sets LOCAL_WORLD_SIZE), at least LOCAL_WORLD_SIZE: scripts written for
// one GPU per process use `tpu:LOCAL_RANK`.
int cpu_devices() {
  if (const char* v = std::getenv("TORCH_PJRT_CPU_DEVICES"); v && std::atoi(v) > 0) return std::atoi(v);
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 4;
  int local_ranks = 0;
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE")) local_ranks = std::atoi(v);
  return std::max(std::clamp(cores, 2, 4), local_ranks);
}

std::mutex g_init_mu;
std::string g_plugin_path;
std::string g_load_error;
std::atomic<Engine*> g_engine{nullptr};

}  // namespace

// ---------------------------------------------------------------- startup

Engine::Engine(std::unique_ptr<runtime::Client> client)
    : client_(std::move(client)),
      compiler_(*client_, metrics_),
      launcher_(*client_, metrics_, executor_, [this](Slot& slot, DType dtype) { return ensure_buffer(slot, dtype); }),
      transfers_(*client_, executor_),
      fused_(settings_, compiler_, launcher_, metrics_, shapes_,
             [this](const OpCall& call, const Shapes* observed) { return run_strict(call, observed); }) {
  settings_.identity = plugin_identity(*client_);
  if (const char* e = std::getenv("TORCH_PJRT_SHAPE_BUCKETS")) settings_.buckets = std::string(e) != "0";
  // The engine lives for the process; its pending cache writes are finished
  // at exit.
  std::atexit([] {
    if (Engine* e = g_engine.load()) e->finish_background_work();
  });
}

void Engine::configure(const std::string& plugin_path) {
  std::lock_guard<std::mutex> g(g_init_mu);
  if (!g_engine) g_plugin_path = plugin_path;
}

const std::string& Engine::plugin_path() { return g_plugin_path; }

Engine& Engine::get() {
  if (Engine* e = g_engine.load(std::memory_order_acquire)) return *e;
  std::lock_guard<std::mutex> g(g_init_mu);
  if (Engine* e = g_engine.load()) return *e;
  if (!g_load_error.empty()) throw runtime::Error(-1, g_load_error);
  if (g_plugin_path.empty()) {
    g_load_error = "no PJRT plugin was configured (import torch_pjrt to choose one)";
    throw runtime::Error(-1, g_load_error);
  }
  try {
    auto client = std::make_unique<runtime::Client>(runtime::Plugin::load(g_plugin_path), cpu_devices());
    g_engine.store(new Engine(std::move(client)));  // lives for the process: storages may outlive any scope
  } catch (const std::exception& e) {
    g_load_error = e.what();
    throw;
  }
  return *g_engine.load();
}

bool Engine::available() {
  try {
    get();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool Engine::started() { return g_engine != nullptr; }

std::string Engine::load_error() {
  available();
  std::lock_guard<std::mutex> g(g_init_mu);
  return g_load_error;
}

// ---------------------------------------------------------------- running calls

ProgramKey Engine::key_of(const OpCall& call) const {
  ProgramKey key;
  SlotNumbering slots;
  const OpCall* calls[] = {&call};
  make_key(settings_.key_identity(), calls, 1, key, slots);
  return key;
}

CallResult Engine::run(const OpCall& call) {
  if (mode() != Mode::Fused) return run_strict(call);
  CallResult deferred;
  std::optional<Shapes> observed;
  if (fused_.plan(call, deferred, observed)) return deferred;
  return run_strict(call, observed ? &*observed : nullptr);
}

void Engine::join(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned) {
  fused_.join(call, fresh, n_fresh, planned);
}

CallResult Engine::run_strict(const OpCall& call, const Shapes* observed) {
  static thread_local Binding scratch;
  Binding& b = scratch;
  struct Release {
    Binding& b;
    ~Release() { b.release(); }
  } release{b};
  const OpCall* calls[] = {&call};
  make_key(settings_.key_identity(), calls, 1, b.key, b.numbering);
  std::shared_ptr<const CachedProgram> program = compiler_.find(b.key);
  bool hit = program != nullptr;
  // A call with a dynamic shape runs bucketed unless its exact program is
  // compiled already (layers of several fixed widths look dynamic to one op,
  // and each of them has its program after the first step). The shapes are
  // observed on a miss only, where a compile would cost far more.
  if (!program && settings_.buckets && (observed || call.op->shape_generic)) {
    BucketPlan& plan = bucket_scratch();
    const Shapes found = observed ? *observed : shapes_.observe(call, plan);
    CallResult result;
    if (found == Shapes::Bucketed && run_bucketed(call, plan, b.key, result)) return result;
  }
  if (!program) program = compiler_.get(b.key, Sequence{{&call}, settings_.precision.load()}, &hit);
  if (hit) metrics_.cache_hit();
  const Signature& sig = program->signature;
  Launcher::check_scalars(sig, call, 0);
  launcher_.execute(*program, calls, 1, b.numbering.slots(), b, call.op->name);
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);
  CallResult result = launcher_.store_outputs(*program, call, b, mode() == Mode::Debug);
  result.types = std::shared_ptr<const std::vector<hlo::TensorType>>(program, &sig.fresh_types);
  return result;
}

bool Engine::run_bucketed(const OpCall& call, BucketPlan& plan, const ProgramKey& exact_key, CallResult& result) {
  std::shared_ptr<const Signature> exact = fused_.signatures().exact(call, exact_key, shapes_.generation());
  auto refuse = [&] {
    shapes_.refuse(plan);
    metrics_.bucket_refused();
    return false;
  };
  Launcher::check_scalars(*exact, call, 0);
  bucket_results(plan, *exact, 0);
  static thread_local Binding scratch;
  Binding& b = scratch;
  struct Release {
    Binding& b;
    ~Release() { b.release(); }
  } release{b};
  const OpCall* calls[] = {&call};
  make_bucket_key(settings_.key_identity(), call, plan, b.key, b.numbering);
  std::shared_ptr<const CachedProgram> program;
  bool hit = false;
  try {
    program = compiler_.get(b.key, Sequence{{&call}, settings_.precision.load(), nullptr, {&plan}}, &hit);
  } catch (const std::exception& e) {
    if (!refuses_dynamic(e)) return false;  // runs exact this time, and may bucket again
    return refuse();                        // XLA or a lowering does not take these dynamic dims
  }
  const Signature& sig = program->signature;
  if (!bucketed_signature_fits(sig, *exact)) return refuse();
  if (hit) metrics_.cache_hit();
  b.exact_fresh = &exact->fresh_types;
  launcher_.execute(*program, calls, 1, b.numbering.slots(), b, call.op->name);
  b.exact_fresh = nullptr;
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);
  result = launcher_.store_outputs(*program, call, b, mode() == Mode::Debug, exact.get());
  result.types = std::shared_ptr<const std::vector<hlo::TensorType>>(exact, &exact->fresh_types);
  return true;
}

void Engine::add_checks(std::vector<CallResult::Check> checks) { executor_.add_checks(std::move(checks)); }

// ---------------------------------------------------------------- fused mode and shapes

void Engine::flush(FlushReason why) { fused_.flush(why); }

bool Engine::begin_capture(bool dynamic, int64_t bucket_size) { return fused_.begin_capture(dynamic, bucket_size); }

std::shared_ptr<const RegionCapture> Engine::end_capture(bool* compiling) { return fused_.end_capture(compiling); }

void Engine::replay(const RegionCapture& capture, const std::vector<Slot*>& slots) { fused_.replay(capture, slots); }

std::string Engine::region_text(const Slot& slot) { return fused_.region_text(slot); }

void Engine::release_slot(void* slot) { g_engine.load()->fused_.release(static_cast<Slot*>(slot)); }

int64_t Engine::graph_capacity(DType dtype, const hlo::Dims& sizes) {
  if (!settings_.buckets || !fused_.dynamic_capture() || !fused_.capturing_here()) return 0;
  return uploads_.capacity(dtype, sizes, true, fused_.capture_bucket_size());
}

void Engine::forget_shapes() {
  shapes_.clear();
  uploads_.clear();
  fused_.forget_placements();
}

// ---------------------------------------------------------------- sync and transfers

void Engine::sync(FlushReason why) {
  flush(why);
  Span span("sync");
  metrics_.synced();
  executor_.sync();
}

CompletionPtr Engine::record() {
  flush(FlushReason::Sync);
  return executor_.marker();
}

bool Engine::idle() { return record()->done(); }

bool Engine::has_data(Slot& slot) {
  if (slot.region_index() >= 0) flush(FlushReason::Read);
  return slot.has_buffer();
}

void Engine::download(Slot& slot, void* dst) {
  sync(FlushReason::Read);
  Span span("copy_to_host");
  Slot::State st = slot.state();
  if (!st.buffer) {
    if (std::exception_ptr failed = slot.failure()) std::rethrow_exception(failed);
    std::memset(dst, 0, slot.nbytes);
    return;
  }
  try {
    st.buffer->to_host(dst, slot.nbytes);
  } catch (const runtime::Error& e) {
    std::string op = st.producer ? st.producer : "a device program";
    throw runtime::Error(e.code(), op + " failed (reported at this sync point): " + e.what());
  }
}

void Engine::read_result(const runtime::BufferPtr& buffer, void* dst, size_t nbytes, const std::string& op) {
  sync(FlushReason::Read);
  try {
    buffer->to_host(dst, nbytes);
  } catch (const runtime::Error& e) {
    throw runtime::Error(e.code(), op + " failed (reported at this sync point): " + e.what());
  }
}

void Engine::upload(Slot& slot, const void* src, DType dtype) {
  if (slot.region_index() >= 0) flush(FlushReason::Upload);
  Span span("copy_from_host");
  int64_t n = slot.nbytes / hlo::byte_size(dtype);
  slot.set({client_->from_host(src, element_type(dtype), {n}, slot.device), dtype, nullptr});
}

void* Engine::lend_host_memory(Slot& slot, DType dtype, runtime::BufferPtr* keep) {
  if (client_->platform_name() != "cpu") return nullptr;
  sync(FlushReason::Read);
  runtime::BufferPtr buffer = ensure_buffer(slot, dtype);
  if (buffer.use_count() != 2) return nullptr;  // the slot's and ours: no one else reads it
  buffer->wait_ready();
  void* memory = buffer->host_pointer();
  *keep = std::move(buffer);
  return memory;
}

CompletionPtr Engine::download_async(Slot& slot, void* dst, std::shared_ptr<void> keep) {
  if (slot.region_index() >= 0) flush(FlushReason::Read);
  return transfers_.download(slot, dst, std::move(keep));
}

CompletionPtr Engine::upload_async(Slot& slot, const void* src, DType dtype, std::shared_ptr<void> keep) {
  if (slot.region_index() >= 0) flush(FlushReason::Upload);
  return transfers_.upload(slot, src, dtype, std::move(keep));
}

void Engine::adopt(Slot& slot, runtime::BufferPtr buffer, DType dtype) {
  slot.set({std::move(buffer), dtype, nullptr});
}

runtime::BufferPtr Engine::ensure_buffer(Slot& slot, DType dtype) {
  if (slot.region_index() >= 0) flush(FlushReason::Read);  // a no-op inside the flush that binds it
  {
    Slot::State st = slot.state();
    if (st.buffer && st.dtype == dtype) return std::move(st.buffer);
    if (!st.buffer)
      if (std::exception_ptr failed = slot.failure()) std::rethrow_exception(failed);
  }
  // One spare byte so an empty storage still has a valid host pointer.
  std::vector<uint8_t> host(slot.nbytes + 1, 0);
  if (slot.has_buffer() && slot.nbytes > 0) download(slot, host.data());
  upload(slot, host.data(), dtype);
  return slot.state().buffer;
}

}  // namespace torch_pjrt::engine
