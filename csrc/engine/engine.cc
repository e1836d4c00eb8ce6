#include "engine/engine.h"

#include <chrono>
#include <cstring>

namespace torch_pjrt::engine {

namespace {

// The runtime's element type for a dtype (hlo/dtype.cc holds the PJRT codes).
runtime::ElementType element_type(DType t) { return static_cast<runtime::ElementType>(hlo::pjrt_code(t)); }

// Prefixes a runtime error with the op (or ops) it came from.
runtime::Error named(const runtime::Error& e, const std::string& op) {
  return runtime::Error(e.code(), op + ": " + e.what());
}

std::mutex g_init_mu;
std::string g_plugin_path;
std::string g_load_error;
std::atomic<Engine*> g_engine{nullptr};

}  // namespace

// ---------------------------------------------------------------- startup

Engine::Engine(std::unique_ptr<runtime::Client> client)
    : client_(std::move(client)), identity_(plugin_identity(*client_)) {}

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
    auto client = std::make_unique<runtime::Client>(runtime::Plugin::load(g_plugin_path));
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
  make_key(identity_, calls, 1, key, slots);
  return key;
}

std::unique_ptr<CachedProgram> Engine::compile(const std::vector<const OpCall*>& calls) {
  ProgramBuilder builder;
  for (const OpCall* call : calls) builder.add(*call);
  Program program = builder.finish();
  auto entry = std::make_unique<CachedProgram>();
  entry->signature = std::move(program.signature);
  auto t0 = std::chrono::steady_clock::now();
  try {
    entry->exe = client_->compile(program.module_text, calls.front()->device);
  } catch (const runtime::Error& e) {
    throw named(e, calls.front()->op->name);
  }
  metrics_.compiled(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return entry;
}

runtime::BufferPtr Engine::scalar_buffer(const uint8_t* bytes, DType dtype, int device) {
  ScalarKey key{0, static_cast<uint32_t>(dtype) << 16 | static_cast<uint32_t>(device)};
  std::memcpy(&key.bits, bytes, sizeof key.bits);
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

namespace {

// What one run needs besides its result, kept per thread so that a small op
// allocates nothing here once warm. Engine::run is not re-entered on a
// thread (nothing it calls runs another op), and every buffer reference is
// dropped before it returns, so no buffer outlives its call here.
struct RunScratch {
  ProgramKey key;
  SlotNumbering numbering;
  std::vector<const TensorRef*> refs;
  std::vector<runtime::BufferPtr> keep, outs;
  std::vector<PJRT_Buffer*> raw;
  std::vector<int64_t> kept;
  std::vector<runtime::Buffer*> donated;
  std::vector<std::pair<Slot*, runtime::BufferPtr>> taken;

  void release() {
    keep.clear();
    outs.clear();
    taken.clear();
  }
};

struct ReleaseOnExit {
  RunScratch& s;
  ~ReleaseOnExit() { s.release(); }
};

RunScratch& run_scratch() {
  static thread_local RunScratch s;
  return s;
}

}  // namespace

CallResult Engine::run(const OpCall& call) {
  RunScratch& s = run_scratch();
  ReleaseOnExit release{s};
  const OpCall* calls[] = {&call};
  make_key(identity_, calls, 1, s.key, s.numbering);
  bool hit;
  const CachedProgram* program = cache_.get(s.key, [&] { return compile({&call}); }, &hit);
  if (hit) metrics_.cache_hit();
  const Signature& sig = program->signature;
  for (const auto& c : sig.scalar_checks) {
    const CallArg& a = call.args[c.arg];
    if (a.kind == CallArg::Kind::Scalar && !a.host_tensor &&
        lowering::scalar_overflows(a.scalar_bytes, a.scalar_dtype, c.fits))
      throw lowering::LoweringError(call.op->name + ": " + c.message);
  }

  // Bind the parameters in the signature's terms: distinct slots (numbered
  // by make_key as the builder numbered them) and tensor references.
  const std::vector<Slot*>& slots = s.numbering.slots();
  s.refs.clear();
  for_each_ref(call, [&](const TensorRef& r, bool) { s.refs.push_back(&r); });
  s.keep.resize(sig.params.size());
  s.raw.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    switch (p.kind) {
      case Signature::Param::Slot:
        s.keep[i] = ensure_buffer(*slots[p.index], sig.slot_dtypes[p.index]);
        break;
      case Signature::Param::Scalar: {
        const CallArg& a = call.args[p.index];
        s.keep[i] = scalar_buffer(a.scalar_bytes, a.scalar_dtype, call.device);
        break;
      }
      case Signature::Param::Rng:
        s.keep[i] = client_->from_host(call.args[p.index].rng, runtime::ElementType::U64, {2}, call.device, false);
        break;
      case Signature::Param::Offset: {
        int64_t offset = s.refs[p.index]->view.offset;
        s.keep[i] = scalar_buffer(reinterpret_cast<const uint8_t*>(&offset), DType::I64, call.device);
        break;
      }
    }
    s.raw[i] = s.keep[i]->get();
  }

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

  try {
    program->exe->execute(s.raw, s.kept, s.donated, s.outs);
  } catch (const runtime::Error& e) {
    for (auto& [slot, buffer] : s.taken) slot->restore(std::move(buffer));
    throw named(e, call.op->name);
  }
  s.keep.clear();
  metrics_.executed(static_cast<int64_t>(s.donated.size()));
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);
  if (!s.outs.empty()) {
    // Tracked by an output that stays alive when there is one: a written tensor.
    size_t tracked = 0;
    for (size_t i = 0; i < s.outs.size(); ++i)
      if (sig.outputs[i].kind == Signature::Output::SlotWrite) {
        tracked = i;
        break;
      }
    executor_.enqueued(s.outs[tracked], call.op->name.c_str());
  }

  CallResult result;
  result.types = &sig.fresh_types;
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < s.outs.size(); ++i) {
    const auto& sink = sig.outputs[i];
    if (sink.kind == Signature::Output::Fresh) {
      result.buffers.push_back(s.outs[i]);
    } else if (sink.kind == Signature::Output::SlotWrite) {
      slots[sink.index]->set({s.outs[i], sig.slot_dtypes[sink.index], call.op->name.c_str()});
    } else {
      const auto& c = sig.checks[sink.index];
      checks.push_back({s.outs[i], c.message, c.kind});
    }
  }
  s.taken.clear();  // the donated buffers' last references

  if (mode() == Mode::Debug) {
    auto wait = [&](const runtime::BufferPtr& b) {
      try {
        b->wait_ready();
      } catch (const runtime::Error& e) {
        throw named(e, call.op->name);
      }
    };
    for (const auto& b : s.outs) wait(b);
    for (const PendingCheck& c : checks) raise_if_failed(c, call.op->name);
  } else if (call.defer_checks) {
    result.checks = std::move(checks);
  } else {
    executor_.add_checks(std::move(checks));
  }
  return result;
}

void Engine::add_checks(std::vector<CallResult::Check> checks) { executor_.add_checks(std::move(checks)); }

// ---------------------------------------------------------------- sync and transfers

void Engine::sync() {
  metrics_.synced();
  executor_.sync();
}

void Engine::download(Slot& slot, void* dst) {
  sync();
  Slot::State st = slot.state();
  if (!st.buffer) {
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
  sync();
  try {
    buffer->to_host(dst, nbytes);
  } catch (const runtime::Error& e) {
    throw runtime::Error(e.code(), op + " failed (reported at this sync point): " + e.what());
  }
}

void Engine::upload(Slot& slot, const void* src, DType dtype) {
  int64_t n = slot.nbytes / hlo::byte_size(dtype);
  slot.set({client_->from_host(src, element_type(dtype), {n}, slot.device), dtype, nullptr});
}

void Engine::adopt(Slot& slot, runtime::BufferPtr buffer, DType dtype) {
  slot.set({std::move(buffer), dtype, nullptr});
}

runtime::BufferPtr Engine::ensure_buffer(Slot& slot, DType dtype) {
  {
    Slot::State st = slot.state();
    if (st.buffer && st.dtype == dtype) return std::move(st.buffer);
  }
  // One spare byte so an empty storage still has a valid host pointer.
  std::vector<uint8_t> host(slot.nbytes + 1, 0);
  if (slot.has_buffer() && slot.nbytes > 0) download(slot, host.data());
  upload(slot, host.data(), dtype);
  return slot.state().buffer;
}

}  // namespace torch_pjrt::engine
