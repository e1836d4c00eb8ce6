#include "engine/engine.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "engine/trace.h"

namespace torch_pjrt::engine {

namespace {

// The runtime's element type for a dtype (hlo/dtype.cc holds the PJRT codes).
runtime::ElementType element_type(DType t) { return static_cast<runtime::ElementType>(hlo::pjrt_code(t)); }

// Prefixes a runtime error with the op (or ops) it came from.
runtime::Error named(const runtime::Error& e, const std::string& op) {
  return runtime::Error(e.code(), op + ": " + e.what());
}

// Devices to ask of a CPU plugin: TORCH_PJRT_CPU_DEVICES, or the cores this
// process may run on, within [2, 4]. XLA's CPU client runs every device's
// programs on one pool of max(cores, devices) threads, so a device beyond
// the cores adds a thread that competes for them (a GPT training step on 2
// cores ran 10-35% slower with the plugin's 4 devices). Two devices keep
// multi-device code exercised on any machine.
int cpu_devices() {
  if (const char* v = std::getenv("TORCH_PJRT_CPU_DEVICES"); v && std::atoi(v) > 0) return std::atoi(v);
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 4;
  return std::clamp(cores, 2, 4);
}

// "name bytes=N hash=H" for a file: the whole file hashed, or (for a large
// plugin) its size and 16 samples of 64 KiB, which any rebuild changes.
std::string file_identity(const std::string& path, bool whole) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return name + " unreadable";
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  uint64_t h = fnv_bytes(&size, sizeof size);
  std::vector<char> buf(1 << 16);
  int samples = whole ? static_cast<int>(size / static_cast<long>(buf.size())) + 1 : 16;
  for (int i = 0; i < samples; ++i) {
    long at = whole ? i * static_cast<long>(buf.size()) : size / samples * i;
    std::fseek(f, at, SEEK_SET);
    size_t n = std::fread(buf.data(), 1, buf.size(), f);
    h = fnv_bytes(buf.data(), n, h);
  }
  std::fclose(f);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return name + " bytes=" + std::to_string(size) + " hash=" + hex;
}

// The shared object (or executable) this engine was linked into: its build
// decides what every lowering emits.
std::string own_binary() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&file_identity), &info) && info.dli_fname) return info.dli_fname;
  return "/proc/self/exe";
}

// "aten::add.Tensor" for one call; "37 calls: aten::mm x4, ..." for more.
std::string summarize(const std::vector<const OpCall*>& calls) {
  if (calls.size() == 1) return calls.front()->op->name;
  std::vector<std::pair<std::string, int>> counts;
  for (const OpCall* c : calls) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == c->op->name; });
    if (it == counts.end())
      counts.emplace_back(c->op->name, 1);
    else
      ++it->second;
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = std::to_string(calls.size()) + " calls:";
  for (size_t i = 0; i < counts.size() && i < 6; ++i)
    s += (i ? ", " : " ") + counts[i].first + " x" + std::to_string(counts[i].second);
  if (counts.size() > 6) s += ", ...";
  return s;
}

// TORCH_PJRT_DEBUG_COMPILES=1: one stderr line per compile, with the views
// of a one-call program (which size or stride made it new).
void log_compile(const std::vector<const OpCall*>& calls, const Plans& plans) {
  static const bool on = std::getenv("TORCH_PJRT_DEBUG_COMPILES") != nullptr;
  if (!on) return;
  const bool bucketed = std::any_of(plans.begin(), plans.end(), [](const BucketPlan* p) { return p != nullptr; });
  std::string s = summarize(calls) + (bucketed ? " (bucketed)" : "");
  if (calls.size() == 1)
    for_each_ref(*calls.front(), [&](const TensorRef& r, bool target) {
      s += target ? " ->" : " ";
      s += std::string(hlo::scalar_type_name(r.view.dtype)) + hlo::dims_str(r.view.sizes) + "/" +
           hlo::dims_str(r.view.strides) + "@" + std::to_string(r.view.offset) + "#" + std::to_string(storage_numel(r));
    });
  std::fprintf(stderr, "torch_pjrt: compile %s\n", s.c_str());
}

thread_local int64_t t_last_request_bytes = 0;
// The user's line of the region call this thread runs alone (run_calls_alone),
// for its runtime checks' messages; null otherwise.
thread_local const std::string* t_call_location = nullptr;

std::mutex g_init_mu;
std::string g_plugin_path;
std::string g_load_error;
std::atomic<Engine*> g_engine{nullptr};

}  // namespace

// ---------------------------------------------------------------- startup

Engine::Engine(std::unique_ptr<runtime::Client> client)
    : client_(std::move(client)), identity_(plugin_identity(*client_)) {
  fingerprint_ = "format=1\nplatform=" + client_->platform_name() +
                 "\nplatform_version=" + client_->platform_version() + "\npjrt_api=" + client_->plugin().api_version() +
                 "\nplugin=" + file_identity(client_->plugin().path(), /*whole=*/false) +
                 "\nbuild=" + file_identity(own_binary(), /*whole=*/true) + "\n";
  DiskCacheOptions options = DiskCacheOptions::from_environment();
  options.fingerprint = fingerprint_;
  options.platform = client_->platform_name();
  disk_ = std::make_unique<DiskCache>(std::move(options));
  compile_slots_ = std::max(1u, std::thread::hardware_concurrency());
  for (int d = 0; d < client_->device_count(); ++d) bytes_limit_.push_back(client_->device_bytes_limit(d));
  if (const char* e = std::getenv("TORCH_PJRT_SHAPE_BUCKETS")) buckets_ = std::string(e) != "0";
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
  make_key(key_identity(), calls, 1, key, slots);
  return key;
}

namespace {

// What metrics()["compiles_by_name"] counts a program under: its op, or
// "fused_region" for a program of several calls (a region or a graph).
const std::string& program_name(const std::vector<const OpCall*>& calls) {
  static const std::string region = "fused_region";
  return calls.size() == 1 ? calls.front()->op->name : region;
}

}  // namespace

std::shared_ptr<const CachedProgram> Engine::compile(const ProgramKey& key, const std::vector<const OpCall*>& calls,
                                                     const std::vector<uint8_t>* dead, const Plans& plans,
                                                     bool zero_unwritten) {
  log_compile(calls, plans);
  return compile(
      key, [&] { return lower(calls, dead, plans, zero_unwritten); }, calls.front()->device, program_name(calls),
      summarize(calls));
}

std::shared_ptr<const CachedProgram> Engine::compile(const ProgramKey& key, const std::function<Program()>& lower,
                                                     int device, const std::string& name, const std::string& summary) {
  if (!disk_->enabled()) return compile_module(lower(), device, name);
  std::string hex = key.hex();
  if (auto p = loaded(disk_->load_host(key.words, hex), DiskCache::Tier::Host, hex, device)) return p;
  bool waited = false;
  DiskCache::KeyLock lock = disk_->lock(hex, &waited);
  // Another process may have written it between the lookup and the lock
  // (it held the lock, or released it just before).
  if (lock.held())
    if (auto p = loaded(disk_->load_host(key.words, hex), DiskCache::Tier::Host, hex, device)) return p;
  std::shared_ptr<const CachedProgram> entry;
  // The shared tier gets a head start; a read still running after it races
  // a local compile, and the first to finish wins.
  bool read_finished = true;
  std::shared_ptr<DiskCache::SharedRead> read = disk_->start_shared_read(hex);
  if (read) {
    std::optional<DiskEntry> e = disk_->wait_shared(*read, key.words, hex, disk_->shared_head_start(), &read_finished);
    if (auto p = loaded(std::move(e), DiskCache::Tier::Shared, hex, device)) return p;
  }
  Program program = lower();
  if (!read_finished) {
    bool from_shared = false;
    entry = race(*read, key, hex, std::move(program), device, name, &from_shared);
    if (from_shared) return entry;
  } else {
    entry = compile_module(std::move(program), device, name);
  }
  disk_->count_miss();
  disk_->store(
      hex,
      [entry, words = key.words, summary]() -> std::optional<DiskEntry> {
        return DiskEntry{words, summary, entry->signature.serialize(), entry->exe->serialize()};
      },
      std::move(lock));
  return entry;
}

std::shared_ptr<const CachedProgram> Engine::race(DiskCache::SharedRead& read, const ProgramKey& key,
                                                  const std::string& hex, Program program, int device,
                                                  const std::string& name, bool* from_shared) {
  struct Compiling {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::shared_ptr<const CachedProgram> entry;
    std::exception_ptr error;
  };
  auto c = std::make_shared<Compiling>();
  background_compiles_.fetch_add(1);
  // The engine lives for the process; at exit it waits for this thread.
  std::thread([this, c, program = std::move(program), device, name]() mutable {
    std::shared_ptr<const CachedProgram> entry;
    std::exception_ptr error;
    try {
      entry = compile_module(std::move(program), device, name);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> g(c->mu);
      c->entry = std::move(entry);
      c->error = error;
      c->done = true;
    }
    c->cv.notify_all();
    background_compiles_.fetch_sub(1);
  }).detach();
  bool read_finished = false;
  for (;;) {
    if (!read_finished) {
      std::optional<DiskEntry> e = disk_->wait_shared(read, key.words, hex, 0.001, &read_finished);
      if (auto p = loaded(std::move(e), DiskCache::Tier::Shared, hex, device)) {
        *from_shared = true;  // the compile goes on unused
        return p;
      }
    }
    std::unique_lock<std::mutex> g(c->mu);
    if (c->cv.wait_for(g, std::chrono::milliseconds(read_finished ? 1000 : 1), [&] { return c->done; })) {
      if (c->error) std::rethrow_exception(c->error);
      return c->entry;
    }
  }
}

std::shared_ptr<const CachedProgram> Engine::loaded(std::optional<DiskEntry> e, DiskCache::Tier tier,
                                                    const std::string& hex, int device) {
  if (!e) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  auto entry = std::make_shared<CachedProgram>();
  try {
    entry->signature = Signature::deserialize(e->signature);
    entry->exe = client_->deserialize(e->executable, device);
  } catch (const std::exception& ex) {
    disk_->drop(tier, hex, ex.what());
    return nullptr;
  }
  metrics_.loaded(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return entry;
}

int64_t Engine::last_request_bytes() { return t_last_request_bytes; }

void Engine::finish_background_work() {
  // Background compiles are local compiles, which finish; the bound only
  // keeps a compiler that hangs from hanging the process's exit forever.
  for (int i = 0; i < 600000 && background_compiles_.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  disk_->flush();
}

Program Engine::lower(const std::vector<const OpCall*>& calls, const std::vector<uint8_t>* dead, const Plans& plans,
                      bool zero_unwritten) {
  Span span("lower");
  ProgramBuilder builder(precision_.load(), zero_unwritten);
  for (size_t i = 0; i < calls.size(); ++i) builder.add(*calls[i], i < plans.size() ? plans[i] : nullptr);
  return builder.finish(dead);
}

std::shared_ptr<const CachedProgram> Engine::compile_module(Program program, int device, const std::string& name) {
  auto entry = std::make_shared<CachedProgram>();
  entry->signature = std::move(program.signature);
  {
    std::unique_lock<std::mutex> g(compile_mu_);
    compile_cv_.wait(g, [&] { return compile_slots_ > 0; });
    --compile_slots_;
  }
  struct CompileSlot {
    Engine* e;
    ~CompileSlot() {
      {
        std::lock_guard<std::mutex> g(e->compile_mu_);
        ++e->compile_slots_;
      }
      e->compile_cv_.notify_one();
    }
  } compile_slot{this};
  auto t0 = std::chrono::steady_clock::now();
  Span span("compile", &name);
  try {
    entry->exe = client_->compile(program.module_text, device);
  } catch (const runtime::Error& e) {
    throw named(e, name);
  }
  metrics_.compiled(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), name);
  return entry;
}

runtime::BufferPtr Engine::scalar_buffer(const uint8_t* bytes, DType dtype, int device) {
  ScalarKey key{{0, 0}, static_cast<uint32_t>(dtype) << 16 | static_cast<uint32_t>(device)};
  std::memcpy(key.bits, bytes, std::min<size_t>(sizeof key.bits, hlo::byte_size(dtype)));
  {
    std::lock_guard<std::mutex> g(scalars_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  auto buf = client_->from_host(bytes, element_type(dtype), {}, device, /*counted=*/false);
  std::lock_guard<std::mutex> g(scalars_mu_);
  // Small: a value that changes every step (AdamW's bias corrections) makes a
  // new entry each time, and each cached buffer keeps per-use records in
  // PJRT, so a large cache grows host memory by megabytes before it clears.
  if (scalars_.size() > 256) scalars_.clear();
  scalars_[key] = buf;
  return buf;
}

runtime::BufferPtr Engine::shape_buffer(const std::vector<int64_t>& values, int device) {
  thread_local std::vector<int64_t> key;  // no allocation once warm
  key.assign(values.begin(), values.end());
  key.push_back(device);
  {
    std::lock_guard<std::mutex> g(scalars_mu_);
    auto it = shapes_buffers_.find(key);
    if (it != shapes_buffers_.end()) return it->second;
  }
  auto buf = client_->from_host(values.data(), runtime::ElementType::S64, {static_cast<int64_t>(values.size())}, device,
                                /*counted=*/false);
  std::lock_guard<std::mutex> g(scalars_mu_);
  if (shapes_buffers_.size() > 1024) shapes_buffers_.clear();
  shapes_buffers_[key] = buf;
  return buf;
}

// What one execution needs besides its result. Strict runs keep one per
// thread, so that a small op allocates nothing here once warm (Engine::run
// is not re-entered on a thread: nothing it calls runs another op); a region
// uses its own. Every buffer reference is dropped before the run returns.
struct Engine::Binding {
  ProgramKey key;
  SlotNumbering numbering;
  std::vector<const TensorRef*> refs;
  std::vector<const OpCall*> ref_calls;
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

namespace {

template <typename B>
struct ReleaseOnExit {
  B& s;
  ~ReleaseOnExit() { s.release(); }
};

}  // namespace

void Engine::check_scalars(const Signature& sig, const OpCall& call, int32_t index) const {
  for (const auto& c : sig.scalar_checks) {
    if (c.call != index) continue;
    const CallArg& a = call.args[c.arg];
    if (a.kind == CallArg::Kind::Scalar && !a.host_tensor &&
        lowering::scalar_overflows(a.scalar_bytes, a.scalar_dtype, c.fits))
      throw lowering::LoweringError(call.op->name + ": " + c.message);
  }
}

int64_t Engine::execute(const CachedProgram& program, const OpCall* const* calls, size_t n,
                        const std::vector<Slot*>& slots, Binding& s, const std::string& name) {
  Span span("execute", &name);
  const Signature& sig = program.signature;
  int64_t result_bytes = 0;  // what the program allocates, for an out-of-memory message
  for (const auto& out : sig.outputs) {
    if (out.kind == Signature::Output::Fresh) {
      const hlo::TensorType& t = sig.fresh_types[out.index];
      result_bytes += t.numel() * hlo::byte_size(t.dtype);
    } else if (out.kind == Signature::Output::SlotWrite) {
      result_bytes += slots[out.index]->nbytes;
    }
  }
  t_last_request_bytes = result_bytes;
  const int device = calls[0]->device;
  // Refused before it runs, where nothing is donated yet: a plugin may
  // otherwise fail it only once it runs, and lose what it overwrites.
  if (const int64_t limit = bytes_limit_.at(device); limit > 0 && result_bytes > limit)
    throw runtime::Error(8, name + ": out of memory: its results need " + std::to_string(result_bytes) +
                                " bytes, more than the device's " + std::to_string(limit));
  // Bind the parameters in the signature's terms: distinct slots (numbered
  // as the builder numbered them) and tensor references.
  s.refs.clear();
  for (size_t c = 0; c < n; ++c) for_each_ref(*calls[c], [&](const TensorRef& r, bool) { s.refs.push_back(&r); });
  s.keep.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    s.keep[i] = p.kind == Signature::Param::Slot ? ensure_buffer(*slots[p.index], sig.slot_dtypes[p.index])
                                                 : constant_param(p, calls, s.refs, device, s.exact_fresh);
  }
  return launch(program, slots, s, name, calls[n - 1]->op->name.c_str());
}

runtime::BufferPtr Engine::constant_param(const Signature::ParamSource& p, const OpCall* const* calls,
                                          const std::vector<const TensorRef*>& refs, int device,
                                          const std::vector<hlo::TensorType>* exact_fresh) {
  switch (p.kind) {
    case Signature::Param::Scalar: {
      const CallArg& a = calls[p.call]->args[p.index];
      return scalar_buffer(a.scalar_bytes, a.scalar_dtype, device);
    }
    case Signature::Param::Rng:
      return client_->from_host(calls[p.call]->args[p.index].rng, runtime::ElementType::U64, {2}, device, false);
    case Signature::Param::Offset: {
      int64_t offset = refs[p.index]->view.offset;
      return scalar_buffer(reinterpret_cast<const uint8_t*>(&offset), DType::I64, device);
    }
    case Signature::Param::ViewShape: {
      const ViewSpec& v = refs[p.index]->view;
      thread_local std::vector<int64_t> shape;
      shape.assign(v.sizes.begin(), v.sizes.end());
      shape.insert(shape.end(), v.strides.begin(), v.strides.end());
      return shape_buffer(shape, device);
    }
    case Signature::Param::ResultShape:
      return shape_buffer(exact_fresh->at(p.index).dims, device);
    case Signature::Param::Slot:
      break;
  }
  return nullptr;
}

int64_t Engine::launch(const CachedProgram& program, const std::vector<Slot*>& slots, Binding& s,
                       const std::string& name, const char* last_op) {
  const Signature& sig = program.signature;
  s.raw.resize(s.keep.size());
  for (size_t i = 0; i < s.keep.size(); ++i) s.raw[i] = s.keep[i]->get();

  // Donate the old buffer of each storage the program overwrites when only
  // its slot and we hold it; the others stay (PJRT copies instead). Taken
  // last, after every read above, so this thread waits for no slot while
  // one of its own is pending.
  s.kept.clear();
  s.donated.clear();
  for (const auto& [param, out] : sig.donations) {
    Slot* slot = slots[sig.params[param].index];
    if (slot->take_if_unshared(s.keep[param])) {
      s.donated.push_back(s.keep[param].get());
      s.taken.emplace_back(slot, s.keep[param]);
    } else {
      s.kept.push_back(param);
    }
  }

  const bool timed = device_timing_.load(std::memory_order_relaxed);
  const auto enqueued = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    program.exe->execute(s.raw, s.kept, s.donated, s.outs);
  } catch (const runtime::Error& e) {
    for (auto& [slot, buffer] : s.taken) slot->restore(std::move(buffer));
    throw named(e, name);
  }
  s.keep.clear();
  metrics_.executed(static_cast<int64_t>(s.donated.size()));
  if (timed && !s.outs.empty())
    s.outs[0]->on_ready(
        [this, enqueued](const std::string&) { metrics_.device_ran(enqueued, std::chrono::steady_clock::now()); });
  if (!s.outs.empty()) {
    // Tracked by an output that stays alive when there is one: a written tensor.
    size_t tracked = 0;
    for (size_t i = 0; i < s.outs.size(); ++i)
      if (sig.outputs[i].kind == Signature::Output::SlotWrite) {
        tracked = i;
        break;
      }
    executor_.enqueued(s.outs[tracked], last_op);
    if (!s.taken.empty()) {
      // The slots take their new buffers from the outputs; the donated ones
      // are destroyed once the program ran.
      std::vector<runtime::BufferPtr> donated;
      for (auto& [slot, buffer] : s.taken) donated.push_back(std::move(buffer));
      executor_.retire(s.outs[tracked], std::move(donated));
    }
  }
  return static_cast<int64_t>(s.donated.size());
}

CallResult Engine::run(const OpCall& call) {
  if (mode() == Mode::Fused) {
    if (!call.fusable) {
      flush(FlushReason::Unfusable);
      return run_strict(call);
    }
    // A call whose shape changes from step to step (a decode loop's
    // attention over a growing KV cache) leaves the region and runs alone,
    // bucketed when it can: inside a region its new sizes would make every
    // step's region a new program. The regions around it keep one structure
    // per step. A pure function of the op stream, like every cut.
    // Decided per exact call at its first sight, so that a later run over
    // the same sizes cuts the same regions, and again once its structure's
    // sizes settle (ShapeHistory): a call that runs alone is observed each
    // time, so that its structure can settle.
    // Inside a compiled graph (a capture) the graph stays one program: a
    // bucketed call joins it with its buckets in the key words, and every
    // other call joins exactly. Eager regions do not take bucketed calls: a
    // region of hundreds of calls with bucketed dims compiles about ten
    // times slower than the same calls in small programs (bench/decode.py:
    // 25 s against 1.9 s for fused mode's first run).
    thread_local ProgramKey key;
    Placement placement = Placement::Undecided;
    CallResult r = plan(call, key, &placement);
    // A call its caller still validates (out=) joins only when it makes no
    // runtime checks: a refused call then leaves a dead value, never a check.
    if (call.defer_checks && r.has_checks) {
      flush(FlushReason::Unfusable);
      return run_strict(call);
    }
    if (!buckets_ || placement == Placement::Joins) return r;
    const bool graph = capturing_here();
    const Shapes found =
        shapes_.observe(call, bucket_scratch(), graph && capture_dynamic_, graph ? capture_bucket_size_ : 0);
    const uint64_t generation = shapes_.generation();
    const Placement now = found == Shapes::Static ? Placement::Joins : Placement::Alone;
    if (now != placement) {
      std::lock_guard<std::mutex> g(signatures_mu_);
      auto it = signatures_.find(key);
      if (it != signatures_.end()) it->second = {it->second.signature, now, generation};
    }
    if (now == Placement::Joins) return r;
    if (graph) {
      if (found == Shapes::Bucketed) plan_bucketed(call, key, r);
      return r;
    }
    flush(FlushReason::Dynamic);
    return run_strict(call, &found);
  }
  return run_strict(call);
}

int64_t Engine::graph_capacity(DType dtype, const hlo::Dims& sizes) {
  if (!buckets_ || !dynamic_capture_.load(std::memory_order_acquire) || !capturing_here()) return 0;
  return uploads_.capacity(dtype, sizes, true, capture_bucket_size_);
}

void Engine::forget_shapes() {
  shapes_.clear();
  uploads_.clear();
  std::lock_guard<std::mutex> g(signatures_mu_);
  for (auto& [key, exact] : signatures_) exact.placement = Placement::Undecided;
}

bool Engine::capturing_here() {
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  return capturing_ && capture_ok_ && std::this_thread::get_id() == capture_thread_;
}

BucketPlan& Engine::bucket_scratch() {
  thread_local BucketPlan plan;
  return plan;
}

namespace {

// Whether a bucketed program's fresh result types hold the exact call's:
// equal, except that a dynamic dim is at least the exact extent.
bool holds(const std::vector<hlo::TensorType>& bucketed, const std::vector<hlo::TensorType>& exact) {
  if (bucketed.size() != exact.size()) return false;
  for (size_t k = 0; k < exact.size(); ++k) {
    const auto &b = bucketed[k], &e = exact[k];
    if (b.dtype != e.dtype || b.rank() != e.rank()) return false;
    for (int64_t d = 0; d < e.rank(); ++d)
      if (b.is_dynamic(d) ? e.dims[d] > b.dims[d] : e.dims[d] != b.dims[d]) return false;
  }
  return true;
}

// Whether a bucketed program makes the exact program's checks (so the exact
// messages name what it finds): the same kinds, from the same calls.
bool same_checks(const std::vector<Signature::CheckInfo>& bucketed, const std::vector<Signature::CheckInfo>& exact) {
  if (bucketed.size() != exact.size()) return false;
  for (size_t k = 0; k < exact.size(); ++k)
    if (bucketed[k].kind != exact[k].kind || bucketed[k].call != exact[k].call) return false;
  return true;
}

// Whether a failed bucketed lowering or compile means the dynamic dims are
// refused for good (not a transient failure such as out-of-memory).
bool refuses_dynamic(const std::exception& e) {
  const auto* r = dynamic_cast<const runtime::Error*>(&e);
  return !r || !r->out_of_memory();
}

}  // namespace

CallResult Engine::store_outputs(const CachedProgram& program, const OpCall& call, Binding& s, const Signature* exact) {
  const Signature& sig = program.signature;
  const std::vector<hlo::TensorType>* exact_fresh = exact ? &exact->fresh_types : nullptr;
  const std::vector<Signature::CheckInfo>& messages = exact ? exact->checks : sig.checks;
  const std::vector<Slot*>& slots = s.numbering.slots();
  CallResult result;
  int64_t padded = 0;
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < s.outs.size(); ++i) {
    const auto& sink = sig.outputs[i];
    if (sink.kind == Signature::Output::Fresh) {
      result.buffers.push_back(s.outs[i]);
      if (exact_fresh) {
        const hlo::TensorType& t = sig.fresh_types[sink.index];
        const int64_t capacity = t.dynamic ? t.numel() : 0;
        if (capacity) padded += capacity - (*exact_fresh)[sink.index].numel();
        result.capacities.push_back(capacity);
      }
    } else if (sink.kind == Signature::Output::SlotWrite) {
      slots[sink.index]->set({s.outs[i], sig.slot_dtypes[sink.index], call.op->name.c_str()});
    } else {
      checks = pending_checks(s.outs[i], messages, [&](size_t k) {
        const std::string* at = t_call_location;
        std::string message = check_message(call.op->name, messages[k].message);
        return at && !at->empty() ? message + " (at " + *at + ")" : message;
      });
    }
  }
  s.taken.clear();  // the donated buffers' last references
  if (exact_fresh) metrics_.bucketed(padded);

  if (mode() == Mode::Debug) {
    WaitTimer timer(metrics_);
    for (const auto& b : s.outs) {
      try {
        b->wait_ready();
      } catch (const runtime::Error& e) {
        throw named(e, call.op->name);
      }
    }
    for (const PendingCheck& c : checks) raise_if_failed(c);
  } else if (call.defer_checks) {
    result.checks = std::move(checks);
  } else {
    executor_.add_checks(std::move(checks));
  }
  return result;
}

bool Engine::refuse_buckets(const BucketPlan& plan) {
  shapes_.refuse(plan);
  metrics_.bucket_refused();
  return false;
}

void Engine::bucket_results(BucketPlan& plan, const Signature& exact, int64_t multiple) {
  plan.results.clear();
  for (const auto& t : exact.fresh_types) {
    plan.results.push_back(t.dims);
    for (int64_t& d : plan.results.back()) d = bucket_of(d, multiple);
  }
}

bool Engine::run_bucketed(const OpCall& call, BucketPlan& plan, const ProgramKey& exact_key, CallResult& result) {
  std::shared_ptr<const Signature> exact = exact_signature(call, exact_key);
  auto refuse = [&] { return refuse_buckets(plan); };
  check_scalars(*exact, call, 0);
  bucket_results(plan, *exact, 0);
  static thread_local Binding scratch;
  Binding& s = scratch;
  ReleaseOnExit<Binding> release{s};
  const OpCall* calls[] = {&call};
  make_bucket_key(key_identity(), call, plan, s.key, s.numbering);
  std::shared_ptr<const CachedProgram> program;
  bool hit = false;
  try {
    program = cache_.get(s.key, [&] { return compile(s.key, {&call}, nullptr, {&plan}); }, &hit);
  } catch (const std::exception& e) {
    if (!refuses_dynamic(e)) return false;  // runs exact this time, and may bucket again
    return refuse();                        // XLA or a lowering does not take these dynamic dims
  }
  const Signature& sig = program->signature;
  if (!same_checks(sig.checks, exact->checks) || !holds(sig.fresh_types, exact->fresh_types)) return refuse();
  if (hit) metrics_.cache_hit();
  s.exact_fresh = &exact->fresh_types;
  execute(*program, calls, 1, s.numbering.slots(), s, call.op->name);
  s.exact_fresh = nullptr;
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);
  result = store_outputs(*program, call, s, exact.get());
  result.types = std::shared_ptr<const std::vector<hlo::TensorType>>(exact, &exact->fresh_types);
  return true;
}

CallResult Engine::run_strict(const OpCall& call, const Shapes* observed) {
  static thread_local Binding scratch;
  Binding& s = scratch;
  ReleaseOnExit<Binding> release{s};
  const OpCall* calls[] = {&call};
  make_key(key_identity(), calls, 1, s.key, s.numbering);
  std::shared_ptr<const CachedProgram> program = cache_.find(s.key);
  bool hit = program != nullptr;
  // A call with a dynamic shape runs bucketed unless its exact program is
  // compiled already (layers of several fixed widths look dynamic to one op,
  // and each of them has its program after the first step). The shapes are
  // observed on a miss only, where a compile would cost far more.
  if (!program && buckets_ && (observed || call.op->shape_generic)) {
    BucketPlan& plan = bucket_scratch();
    const Shapes found = observed ? *observed : shapes_.observe(call, plan);
    CallResult result;
    if (found == Shapes::Bucketed && run_bucketed(call, plan, s.key, result)) return result;
  }
  if (!program) program = cache_.get(s.key, [&] { return compile(s.key, {&call}); }, &hit);
  if (hit) metrics_.cache_hit();
  const Signature& sig = program->signature;
  check_scalars(sig, call, 0);
  execute(*program, calls, 1, s.numbering.slots(), s, call.op->name);
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);
  CallResult result = store_outputs(*program, call, s);
  result.types = std::shared_ptr<const std::vector<hlo::TensorType>>(program, &sig.fresh_types);
  return result;
}

// ---------------------------------------------------------------- fused regions

const char* flush_reason_name(FlushReason r) {
  static const char* names[kNumFlushReasons] = {"sync",      "read",   "upload",     "unfusable",
                                                "mode",      "device", "dtype_view", "cap_calls",
                                                "cap_bytes", "period", "graph",      "dynamic_shape"};
  return names[static_cast<int>(r)];
}

std::shared_ptr<const Signature> Engine::exact_signature(const OpCall& call, const ProgramKey& key,
                                                         Placement* placement) {
  {
    std::lock_guard<std::mutex> g(signatures_mu_);
    auto it = signatures_.find(key);
    if (it != signatures_.end()) {
      // A placement from before the shapes last settled is decided anew.
      if (placement)
        *placement = it->second.generation == shapes_.generation() ? it->second.placement : Placement::Undecided;
      return it->second.signature;
    }
  }
  ProgramBuilder builder(precision_.load());
  builder.add(call);  // raises the call's argument errors here, at the op
  auto made = std::make_shared<Signature>(builder.finish().signature);
  std::lock_guard<std::mutex> g(signatures_mu_);
  if (signatures_.size() > 65536) signatures_.clear();
  auto it = signatures_.try_emplace(key, ExactCall{std::move(made), Placement::Undecided, 0}).first;
  if (placement)
    *placement = it->second.generation == shapes_.generation() ? it->second.placement : Placement::Undecided;
  return it->second.signature;
}

CallResult Engine::plan(const OpCall& call, ProgramKey& key, Placement* placement) {
  thread_local SlotNumbering numbering;
  const OpCall* calls[] = {&call};
  make_key(key_identity(), calls, 1, key, numbering);
  std::shared_ptr<const Signature> sig = exact_signature(call, key, placement);
  check_scalars(*sig, call, 0);
  CallResult r;
  r.deferred = true;
  r.types = std::shared_ptr<const std::vector<hlo::TensorType>>(sig, &sig->fresh_types);
  r.has_checks = !sig->checks.empty();
  r.structure = key.hash;
  return r;
}

bool Engine::plan_bucketed(const OpCall& call, const ProgramKey& exact_key, CallResult& deferred) {
  BucketPlan& plan = bucket_scratch();
  std::shared_ptr<const Signature> exact = exact_signature(call, exact_key);
  bucket_results(plan, *exact, capture_bucket_size_);
  thread_local ProgramKey key;
  thread_local SlotNumbering numbering;
  make_bucket_key(key_identity(), call, plan, key, numbering);
  // The call lowered alone and bucketed (never compiled), cached by its key.
  std::shared_ptr<const Signature> sig;
  {
    std::lock_guard<std::mutex> g(signatures_mu_);
    auto it = signatures_.find(key);
    if (it != signatures_.end()) sig = it->second.signature;
  }
  auto refuse = [&] { return refuse_buckets(plan); };
  if (!sig) {
    try {
      ProgramBuilder builder(precision_.load());
      builder.add(call, &plan);
      sig = std::make_shared<Signature>(builder.finish().signature);
    } catch (const std::exception& e) {
      return refuses_dynamic(e) ? refuse() : false;
    }
    std::lock_guard<std::mutex> g(signatures_mu_);
    if (signatures_.size() > 65536) signatures_.clear();
    signatures_.try_emplace(key, ExactCall{sig, Placement::Alone, 0});
  }
  if (!same_checks(sig->checks, exact->checks) || !holds(sig->fresh_types, exact->fresh_types)) return refuse();

  // The plan of the joined call: its fresh results become whole writes of
  // storages of their capacity (join), referenced where for_each_ref meets
  // them: at their target positions, then after the targets.
  auto joined = std::make_shared<BucketPlan>();
  joined->structure = plan.structure;
  joined->pattern = plan.pattern;
  size_t target_refs = 0;
  for (const auto& t : call.targets) target_refs += t.slot != nullptr;
  const size_t arg_refs = plan.refs.size() - target_refs;
  joined->refs.assign(plan.refs.begin(), plan.refs.begin() + static_cast<std::ptrdiff_t>(arg_refs));
  size_t next_target = arg_refs, k = 0;
  int64_t padded = 0;
  auto fresh_ref = [&] {
    const hlo::TensorType& t = sig->fresh_types[k];
    BucketedRef b;
    b.dynamic = t.dynamic != 0;
    b.dynamic_sizes = t.dynamic;
    b.padded = t.dims;
    b.fresh = true;
    const int64_t capacity = t.dynamic ? t.numel() : 0;
    if (capacity) padded += capacity - exact->fresh_types[k].numel();
    deferred.capacities.push_back(capacity);
    ++k;
    return b;
  };
  for (const auto& t : call.targets) joined->refs.push_back(t.slot ? plan.refs[next_target++] : fresh_ref());
  while (k < sig->fresh_types.size()) joined->refs.push_back(fresh_ref());
  for (const auto& c : exact->checks) joined->check_messages.push_back(c.message);
  if (std::all_of(deferred.capacities.begin(), deferred.capacities.end(), [](int64_t c) { return c == 0; }))
    deferred.capacities.clear();
  deferred.plan = std::move(joined);
  deferred.structure = key.hash;
  metrics_.bucketed(padded);
  return true;
}

namespace {

// Moves `from`'s contents into `to` argument by argument, so that both keep
// their vectors' storage: `to` is a spare call of the last region (in a
// periodic stream, the same op at the same position: nothing grows), and
// `from` receives the spare's arguments for its caller's next call.
void trade_contents(OpCall& to, OpCall& from) {
  to.op = from.op;
  to.device = from.device;
  to.defer_checks = from.defer_checks;
  to.fusable = from.fusable;
  to.static_values = from.static_values;
  to.args.resize(from.args.size());
  for (size_t i = 0; i < from.args.size(); ++i) std::swap(to.args[i], from.args[i]);
  // The spare's further targets stay after `from`'s, for fresh results (join).
  if (to.targets.size() < from.targets.size()) to.targets.resize(from.targets.size());
  for (size_t i = 0; i < from.targets.size(); ++i) std::swap(to.targets[i], from.targets[i]);
}

}  // namespace

void Engine::join(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned) {
  // The user's line, asked before the lock (it takes the GIL).
  std::string location = planned.has_checks && location_hook_ ? location_hook_() : std::string();
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  const size_t n_targets = call.targets.size();
  OpCall joined = region_.recycled();
  trade_contents(joined, call);
  const OpDef* op = joined.op;
  const int device = joined.device;
  // Fresh results become whole writes of their new storages.
  size_t j = 0;
  auto set_fresh = [&](TensorRef& r, size_t k) {
    const hlo::TensorType& t = (*planned.types)[k];
    r.slot = fresh[k];
    r.view.dtype = t.dtype;
    r.view.sizes = t.dims;
    r.view.offset = 0;
    r.view.strides.assign(t.dims.size(), 1);
    for (size_t d = t.dims.size(); d-- > 1;)
      r.view.strides[d - 1] = r.view.strides[d] * std::max<int64_t>(t.dims[d], 1);
  };
  for (size_t i = 0; i < n_targets; ++i)
    if (!joined.targets[i].slot && j < n_fresh) set_fresh(joined.targets[i], j++);
  size_t end = n_targets;
  for (; j < n_fresh; ++j, ++end)
    set_fresh(end < joined.targets.size() ? joined.targets[end] : joined.targets.emplace_back(), j);
  joined.targets.resize(end);

  if (capturing_ && std::this_thread::get_id() != capture_thread_) capture_ok_ = false;
  // A graph with no symbolic sizes fixes the offsets of its own storages (call.h).
  joined.static_values = capturing_ && capture_ok_ && !capture_dynamic_;
  if (!region_.empty() && region_.device != device) flush(FlushReason::Device);
  bool other_dtype = false;
  for_each_ref(joined, [&](const TensorRef& r, bool) {
    const DType* d = region_.dtype_of(r.slot);
    if (d && *d != r.view.dtype) other_dtype = true;
  });
  if (other_dtype) flush(FlushReason::DtypeView);
  region_.device = device;
  // A captured graph runs again with other storages: it reads each one.
  if (region_.empty()) region_.zero_unwritten = !capturing_;
  region_.add(std::move(joined), std::move(location),
              planned.plan ? std::make_shared<BucketPlan>(*planned.plan) : nullptr);
  for (size_t k = 0; k < n_fresh; ++k) region_.fresh_bytes += fresh[k]->nbytes;
  const_cast<OpDef*>(op)->calls.fetch_add(1, std::memory_order_relaxed);

  // Another thread left fused mode while this call was planned: no region
  // stays open outside fused mode, where strict calls would not look for it.
  if (!capturing_ && mode() != Mode::Fused) return flush(FlushReason::Mode);
  if (capturing_ && capture_ok_) return;  // a captured graph is one region: no cuts
  if (period_.length() >= (int64_t{1} << 16)) period_.reset();
  // Cut at the period of the stream since the last sync point; or, once
  // the call cap cut that stream, at the period of its recent calls: a loop
  // entered after other work with no sync point between (a decode loop
  // after its prompt) is periodic only from some call on, and the cap would
  // cut it at a new phase each time. There, regions hold as many cut units
  // as fit under the cap, counted from where the period was found.
  // The recent calls are followed only while they are used, from the cap on.
  const int64_t p = period_.push(planned.structure);
  int64_t q = 0;
  if (p == 0 && capped_)
    q = recent_.push(planned.structure);
  else if (recent_.length() > 0)
    recent_.reset();
  auto unit_of = [](int64_t period) { return period * std::max<int64_t>(1, (kMinPeriodCut + period - 1) / period); };
  if (p > 0) {
    if ((period_.length() % unit_of(p)) % static_cast<int64_t>(kMaxRegionCalls) == 0) return flush(FlushReason::Period);
  } else if (q > 0) {
    const int64_t unit = unit_of(q);
    const int64_t units = std::max<int64_t>(1, static_cast<int64_t>(kMaxRegionCalls) / unit) * unit;
    if (recent_.since_found() % units == 0) return flush(FlushReason::Period);
  }
  if (region_.calls.size() >= kMaxRegionCalls) return flush(FlushReason::CapCalls);
  if (region_.fresh_bytes >= kMaxRegionBytes) return flush(FlushReason::CapBytes);
}

void Engine::flush(FlushReason why) {
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  if (flushing_) return;
  if (why == FlushReason::Sync || why == FlushReason::Read) period_.reset(), recent_.reset(), capped_ = false;
  if (why == FlushReason::CapCalls || why == FlushReason::CapBytes) capped_ = true;
  if (region_.empty()) return;
  if (capturing_ && !recording_) capture_ok_ = false;
  flushing_ = true;
  struct End {
    Engine& e;
    ~End() {
      for (Slot* dead : e.region_.clear()) delete dead;
      e.flushing_ = false;
    }
  } end{*this};
  metrics_.flushed(flush_reason_name(why), static_cast<int64_t>(region_.calls.size()));
  run_region();
}

void Engine::run_region() {
  Region& r = region_;
  std::vector<const OpCall*> calls;
  for (const OpCall& c : r.calls) calls.push_back(&c);
  const std::string name = "a fused region ending in " + r.calls.back().op->name;
  Span span("fused_region", &name);
  bool hit;
  std::shared_ptr<const CachedProgram> program;
  const ProgramKey key = r.key();
  try {
    if (async_compile_.load()) {
      program = cache_.find(key);
      hit = program != nullptr;
      if (!program && compile_in_background(key, calls, r.dead, r.plan_pointers(), r.zero_unwritten)) {
        // Its program compiles meanwhile: the calls run as strict mode runs them.
        if (capturing_) capture_ok_ = false, capture_compiling_ = true;
        metrics_.ran_while_compiling();
        run_calls_alone(calls);
        return;
      }
    }
    if (!program)
      program =
          cache_.get(key, [&] { return compile(key, calls, &r.dead, r.plan_pointers(), r.zero_unwritten); }, &hit);
  } catch (const std::exception& e) {
    // A region that does not compile runs call by call, as strict mode would.
    metrics_.replayed();
    if (std::getenv("TORCH_PJRT_DEBUG_REGIONS")) std::fprintf(stderr, "torch_pjrt: region replayed: %s\n", e.what());
    run_calls_alone(calls);
    return;
  }
  if (hit) metrics_.cache_hit();
  Binding s;
  try {
    execute(*program, calls.data(), calls.size(), r.slots, s, name);
  } catch (const std::exception&) {
    // The program did not start (out of memory, a failed input): nothing was
    // donated, and the calls before the one at fault can still run.
    s.release();
    metrics_.replayed();
    run_calls_alone(calls);
    return;
  }
  const Signature& sig = program->signature;
  std::vector<const char*> writers(r.slots.size(), nullptr);
  for (const OpCall& c : r.calls)
    for (const auto& t : c.targets)
      if (t.slot) writers[t.slot->region_index()] = c.op->name.c_str();
  std::vector<std::string> messages;
  std::vector<size_t> checks_of(r.calls.size(), 0);  // per call: its checks met so far
  for (const auto& c : sig.checks) {
    const std::string& at = r.locations[c.call];
    const BucketPlan* plan = r.plans.size() > static_cast<size_t>(c.call) ? r.plans[c.call].get() : nullptr;
    const size_t k = checks_of[c.call]++;
    const std::string& message = plan && k < plan->check_messages.size() ? plan->check_messages[k] : c.message;
    messages.push_back(check_message(r.calls[c.call].op->name, message) + (at.empty() ? "" : " (at " + at + ")"));
  }
  store_region_outputs(sig, r.slots, s, writers, messages);
  if (recording_ && capture_ok_) {
    auto cap = std::make_shared<RegionCapture>();
    cap->program = program;
    cap->device = r.device;
    cap->precision = precision_.load();
    cap->name = "a compiled graph ending in " + r.calls.back().op->name;
    for (Slot* slot : r.slots) {
      cap->slot_ids.push_back(reinterpret_cast<uintptr_t>(slot));
      cap->slot_nbytes.push_back(slot->nbytes);
    }
    cap->dead = r.dead;
    cap->writers = std::move(writers);
    cap->check_messages = std::move(messages);
    std::vector<const TensorRef*> refs;
    for (const OpCall* c : calls) for_each_ref(*c, [&](const TensorRef& t, bool) { refs.push_back(&t); });
    bool constant = true;
    for (const auto& p : sig.params) {
      if (p.kind == Signature::Param::Rng ||
          (p.kind == Signature::Param::Scalar && calls[p.call]->args[p.index].host_tensor))
        constant = false;
      cap->constants.push_back(
          p.kind == Signature::Param::Slot || !constant ? nullptr : constant_param(p, calls.data(), refs, r.device));
    }
    if (constant) captured_ = std::move(cap);
  }
}

void Engine::run_calls_alone(const std::vector<const OpCall*>& calls) {
  std::exception_ptr first;
  int64_t first_request_bytes = 0;  // for an out-of-memory message
  std::unordered_map<const Slot*, std::exception_ptr> failed;
  struct Reset {
    ~Reset() { t_call_location = nullptr; }
  } reset;
  for (size_t i = 0; i < calls.size(); ++i) {
    const OpCall& c = *calls[i];
    std::exception_ptr failure;
    for_each_ref(c, [&](const TensorRef& r, bool) {
      auto it = failed.find(r.slot);
      if (!failure && it != failed.end()) failure = it->second;
    });
    if (!failure) {
      t_call_location = i < region_.locations.size() ? &region_.locations[i] : nullptr;
      try {
        run_strict(c);
        continue;
      } catch (...) {
        failure = std::current_exception();
        if (!first) first = failure, first_request_bytes = t_last_request_bytes;
      }
    }
    for (const TensorRef& t : c.targets)
      if (t.slot) {
        t.slot->fail(failure);
        failed[t.slot] = failure;
      }
  }
  if (first) {
    t_last_request_bytes = first_request_bytes;
    std::rethrow_exception(first);
  }
}

void Engine::store_region_outputs(const Signature& sig, const std::vector<Slot*>& slots, Binding& s,
                                  const std::vector<const char*>& writers,
                                  const std::vector<std::string>& check_messages) {
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < s.outs.size(); ++i) {
    const auto& sink = sig.outputs[i];
    if (sink.kind == Signature::Output::SlotWrite) {
      slots[sink.index]->set({s.outs[i], sig.slot_dtypes[sink.index], writers[sink.index]});
    } else if (sink.kind == Signature::Output::Check) {
      checks = pending_checks(s.outs[i], sig.checks, [&](size_t k) { return check_messages[k]; });
    }
  }
  s.release();
  executor_.add_checks(std::move(checks));
}

bool Engine::compile_in_background(const ProgramKey& key, const std::vector<const OpCall*>& calls,
                                   const std::vector<uint8_t>& dead, const Plans& plans, bool zero_unwritten) {
  {
    std::lock_guard<std::mutex> g(async_mu_);
    if (async_failed_.count(key)) {
      async_failed_.erase(key);
      return false;
    }
    if (!async_compiling_.insert(key).second) return true;
  }
  log_compile(calls, plans);
  auto program = std::make_shared<Program>();
  try {
    *program = lower(calls, &dead, plans, zero_unwritten);
  } catch (...) {
    std::lock_guard<std::mutex> g(async_mu_);
    async_compiling_.erase(key);
    return false;  // its lowering error surfaces in the foreground
  }
  background_compiles_.fetch_add(1);
  // The engine lives for the process; at exit it waits for this thread.
  std::thread([this, key, program, device = calls.front()->device, name = program_name(calls),
               summary = summarize(calls)] {
    bool failed = false;
    try {
      bool hit;
      cache_.get(key, [&] { return compile(key, [&] { return std::move(*program); }, device, name, summary); }, &hit);
    } catch (...) {
      failed = true;
    }
    {
      std::lock_guard<std::mutex> g(async_mu_);
      async_compiling_.erase(key);
      if (failed) async_failed_.insert(key);
    }
    background_compiles_.fetch_sub(1);
  }).detach();
  return true;
}

bool Engine::begin_capture(bool dynamic, int64_t bucket_size) {
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  if (capturing_) return false;
  flush(FlushReason::Graph);
  capture_thread_ = std::this_thread::get_id();
  capturing_ = true;
  capture_dynamic_ = dynamic;
  capture_bucket_size_ = bucket_size;
  dynamic_capture_.store(dynamic, std::memory_order_release);
  capture_ok_ = true;
  capture_compiling_ = false;
  captured_.reset();
  return true;
}

std::shared_ptr<const RegionCapture> Engine::end_capture(bool* compiling) {
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  recording_ = true;
  struct End {
    Engine& e;
    ~End() {
      e.recording_ = e.capturing_ = false;
      e.dynamic_capture_.store(false, std::memory_order_release);
    }
  } end{*this};
  flush(FlushReason::Graph);
  if (compiling) *compiling = capture_compiling_;
  return capture_ok_ ? std::move(captured_) : nullptr;
}

void Engine::replay(const RegionCapture& c, const std::vector<Slot*>& slots) {
  flush(FlushReason::Graph);  // its writes come before the graph's reads
  Span span("execute", &c.name);
  const Signature& sig = c.program->signature;
  Binding s;
  s.keep.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    s.keep[i] =
        p.kind == Signature::Param::Slot ? ensure_buffer(*slots[p.index], sig.slot_dtypes[p.index]) : c.constants[i];
  }
  const char* last_op = "a compiled graph";  // op names live for the process; the capture may not
  for (const char* w : c.writers)
    if (w) last_op = w;
  launch(*c.program, slots, s, c.name, last_op);
  store_region_outputs(sig, slots, s, c.writers, c.check_messages);
  metrics_.graph_replayed();
}

std::string Engine::region_text(const Slot& slot) {
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  if (flushing_ || !region_.dtype_of(&slot)) return "";
  ProgramBuilder builder(precision_.load(), region_.zero_unwritten);
  for (size_t i = 0; i < region_.calls.size(); ++i) builder.add(region_.calls[i], region_.plans[i].get());
  return builder.finish(&region_.dead).module_text;
}

void Engine::release_slot(void* ctx) {
  Slot* slot = static_cast<Slot*>(ctx);
  if (slot->region_index() >= 0) {
    Engine& e = *g_engine.load();
    std::lock_guard<std::recursive_mutex> g(e.region_mu_);
    if (e.region_.dtype_of(slot)) {
      e.region_.mark_dead(slot);
      return;
    }
  }
  slot->state();  // a non-blocking upload into it finishes first
  delete slot;
}

void Engine::set_mode(Mode m) {
  // Under the region lock, so that a call joins either before the flush or
  // after the new mode is seen (join flushes then).
  std::lock_guard<std::recursive_mutex> g(region_mu_);
  flush(FlushReason::Mode);
  mode_.store(m);
}

void Engine::add_checks(std::vector<CallResult::Check> checks) { executor_.add_checks(std::move(checks)); }

// ---------------------------------------------------------------- sync and transfers

void Engine::sync(FlushReason why) {
  flush(why);
  Span span("sync");
  metrics_.synced();
  executor_.sync();
}

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
