#include "engine/engine.h"

#include <chrono>
#include <cstring>
#include <tuple>

namespace torch_pjrt::engine {

using hlo::TensorType;
using hlo::Value;
using lowering::Arg;
using TensorRef = CallArg::TensorRef;

// ---------------------------------------------------------------- slots

Slot::Slot(int device, int64_t nbytes) : device(device), nbytes(nbytes) {
  if (nbytes) Engine::get().track_alloc(device, nbytes);
}

Slot::~Slot() {
  if (nbytes) Engine::get().track_alloc(device, -nbytes);
}

Slot::State Slot::state() const {
  std::lock_guard<std::mutex> g(mu_);
  return state_;
}

bool Slot::has_buffer() const {
  std::lock_guard<std::mutex> g(mu_);
  return state_.buffer != nullptr;
}

void Slot::set(State s) {
  runtime::BufferPtr old;  // released after the lock: destroying a buffer calls into PJRT
  std::lock_guard<std::mutex> g(mu_);
  old = std::move(state_.buffer);
  state_ = std::move(s);
}

// ---------------------------------------------------------------- cache entry

struct Engine::Entry {
  enum class Param { Slot, Scalar, Rng };
  struct ParamSource {
    Param kind;
    int index;  // distinct-slot index, or argument index
  };
  enum class Output { Fresh, SlotWrite, Check };
  struct OutputSink {
    Output kind;
    int index;  // fresh-result index, distinct-slot index, or check index
  };
  std::unique_ptr<runtime::Executable> exe;
  std::vector<ParamSource> params;
  std::vector<DType> slot_dtypes;  // element type each distinct slot is read/written as
  std::vector<OutputSink> outputs;
  std::vector<TensorType> fresh_types;
  std::vector<lowering::Check> checks;  // `failed` unused: the message and kind of each check output
};

namespace {

// The runtime's element type for a dtype (hlo/dtype.cc holds the PJRT codes).
runtime::ElementType element_type(DType t) { return static_cast<runtime::ElementType>(hlo::pjrt_code(t)); }

// Every tensor reference of a call in a fixed order (args, then targets);
// the same order defines alias groups in the key and slot params.
void collect_refs(const OpCall& call, std::vector<const TensorRef*>& refs) {
  refs.clear();
  for (const CallArg& a : call.args) {
    if (a.kind == CallArg::Kind::Tensor) refs.push_back(&a.tensor);
    if (a.kind == CallArg::Kind::TensorList)
      for (const auto& t : a.list) refs.push_back(&t);
  }
  for (const auto& t : call.targets)
    if (t.slot) refs.push_back(&t);
}

// For each ref, the index of the distinct slot it views; returns the count.
int distinct_slots(const std::vector<const TensorRef*>& refs, std::vector<int>& slot_of,
                   std::vector<Slot*>* slots = nullptr) {
  slot_of.assign(refs.size(), -1);
  std::vector<Slot*> seen;
  for (size_t i = 0; i < refs.size(); ++i) {
    Slot* s = refs[i]->slot;
    if (!s) continue;
    int found = -1;
    for (size_t j = 0; j < seen.size(); ++j)
      if (seen[j] == s) found = static_cast<int>(j);
    if (found < 0) {
      found = static_cast<int>(seen.size());
      seen.push_back(s);
    }
    slot_of[i] = found;
  }
  if (slots) *slots = seen;
  return static_cast<int>(seen.size());
}

int64_t storage_numel(const TensorRef& r) { return r.slot->nbytes / hlo::byte_size(r.view.dtype); }

void push_ref(std::vector<int64_t>& w, const TensorRef& r, int slot_index) {
  if (!r.slot) {
    w.push_back(-1);
    return;
  }
  const ViewSpec& v = r.view;
  w.push_back(slot_index);
  w.push_back(static_cast<int64_t>(v.dtype));
  w.push_back(static_cast<int64_t>(v.sizes.size()));
  w.insert(w.end(), v.sizes.begin(), v.sizes.end());
  w.insert(w.end(), v.strides.begin(), v.strides.end());
  w.push_back(v.offset);
  w.push_back(storage_numel(r));
}

std::string shape_str(const hlo::Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}


}  // namespace

// ---------------------------------------------------------------- engine

namespace {
std::mutex g_init_mu;
std::string g_plugin_path;
std::string g_load_error;
std::atomic<Engine*> g_engine{nullptr};
}  // namespace

Engine::Engine(std::unique_ptr<runtime::Client> client) : client_(std::move(client)) {}

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

void Engine::make_key(const OpCall& call, std::vector<int64_t>& w) const {
  static thread_local std::vector<const TensorRef*> refs;
  static thread_local std::vector<int> slot_of;
  collect_refs(call, refs);
  distinct_slots(refs, slot_of);
  w.clear();
  w.push_back(reinterpret_cast<int64_t>(call.op));
  w.push_back(call.device);
  size_t r = 0;
  for (const CallArg& a : call.args) {
    w.push_back(static_cast<int64_t>(a.kind));
    switch (a.kind) {
      case CallArg::Kind::Tensor:
        push_ref(w, a.tensor, slot_of[r]);
        ++r;
        break;
      case CallArg::Kind::TensorList:
        w.push_back(static_cast<int64_t>(a.list.size()));
        w.insert(w.end(), a.present.begin(), a.present.end());
        for (const auto& t : a.list) push_ref(w, t, slot_of[r++]);
        break;
      case CallArg::Kind::Scalar:
        w.push_back(static_cast<int64_t>(a.scalar_dtype) * 2 + a.host_tensor);
        break;
      case CallArg::Kind::Int:
      case CallArg::Kind::Bool:
      case CallArg::Kind::DType:
        w.push_back(a.i);
        break;
      case CallArg::Kind::Ints:
        w.push_back(static_cast<int64_t>(a.ints.size()));
        w.insert(w.end(), a.ints.begin(), a.ints.end());
        break;
      case CallArg::Kind::String: {
        w.push_back(static_cast<int64_t>(a.s.size()));
        for (size_t i = 0; i < a.s.size(); i += 8) {
          int64_t chunk = 0;
          std::memcpy(&chunk, a.s.data() + i, std::min<size_t>(8, a.s.size() - i));
          w.push_back(chunk);
        }
        break;
      }
      case CallArg::Kind::None:
      case CallArg::Kind::Rng:
        break;
    }
  }
  w.push_back(static_cast<int64_t>(call.targets.size()));
  for (const auto& t : call.targets) push_ref(w, t, t.slot ? slot_of[r] : -1), r += t.slot ? 1 : 0;
}

std::unique_ptr<Engine::Entry> Engine::build(const OpCall& call) {
  auto entry = std::make_unique<Entry>();
  std::vector<const TensorRef*> refs;
  std::vector<int> slot_of;
  collect_refs(call, refs);
  const int nslots = distinct_slots(refs, slot_of);

  // Which slots are read: any argument view, or a target that does not
  // overwrite its whole storage.
  const size_t first_target = refs.size() - std::count_if(call.targets.begin(), call.targets.end(),
                                                          [](const TensorRef& t) { return t.slot != nullptr; });
  std::vector<bool> read(nslots, false);
  entry->slot_dtypes.assign(nslots, DType::U8);
  std::vector<bool> typed(nslots, false);
  for (size_t i = 0; i < refs.size(); ++i) {
    int s = slot_of[i];
    if (s < 0) continue;
    if (i < first_target || !refs[i]->view.covers(storage_numel(*refs[i]))) read[s] = true;
    if (typed[s] && entry->slot_dtypes[s] != refs[i]->view.dtype)
      throw lowering::LoweringError(call.op->name + ": one storage is viewed with two dtypes in one call");
    entry->slot_dtypes[s] = refs[i]->view.dtype;
    typed[s] = true;
  }

  hlo::Builder b;
  std::vector<Value> flat(nslots);
  std::vector<bool> has_flat(nslots, false);
  auto slot_numel = [&](int s) {
    for (size_t i = 0; i < refs.size(); ++i)
      if (slot_of[i] == s) return storage_numel(*refs[i]);
    return int64_t{0};
  };
  for (int s = 0; s < nslots; ++s) {
    if (!read[s]) continue;
    flat[s] = b.parameter(TensorType{entry->slot_dtypes[s], {slot_numel(s)}});
    has_flat[s] = true;
    entry->params.push_back({Entry::Param::Slot, s});
  }

  std::vector<Arg> args;
  size_t r = 0;
  for (size_t i = 0; i < call.args.size(); ++i) {
    const CallArg& a = call.args[i];
    switch (a.kind) {
      case CallArg::Kind::None:
        args.push_back(Arg::none());
        break;
      case CallArg::Kind::Tensor:
        args.push_back(Arg::tensor(read_view(b, flat[slot_of[r]], a.tensor.view)));
        ++r;
        break;
      case CallArg::Kind::TensorList: {
        std::vector<Value> vs;
        for (const auto& t : a.list) vs.push_back(read_view(b, flat[slot_of[r++]], t.view));
        Arg arg = Arg::tensor_list(vs);
        arg.ints = a.present;
        args.push_back(arg);
        break;
      }
      case CallArg::Kind::Scalar: {
        Value p = b.parameter(TensorType{a.scalar_dtype, {}});
        entry->params.push_back({Entry::Param::Scalar, static_cast<int>(i)});
        args.push_back(a.host_tensor ? Arg::tensor(p) : Arg::scalar(p));
        break;
      }
      case CallArg::Kind::Rng: {
        Value p = b.parameter(TensorType{DType::U64, {2}});
        entry->params.push_back({Entry::Param::Rng, static_cast<int>(i)});
        args.push_back(Arg::rng(p));
        break;
      }
      case CallArg::Kind::Int:
        args.push_back(Arg::integer(a.i));
        break;
      case CallArg::Kind::Bool:
        args.push_back(Arg::boolean(a.i != 0));
        break;
      case CallArg::Kind::DType:
        args.push_back(Arg::dtype(static_cast<DType>(a.i)));
        break;
      case CallArg::Kind::Ints:
        args.push_back(Arg::integers(a.ints));
        break;
      case CallArg::Kind::String:
        args.push_back(Arg::string(a.s));
        break;
    }
  }

  lowering::Context cx(b, std::move(args), call.op->name);
  std::vector<Value> results = call.op->lower(cx);
  if (!call.targets.empty() && results.size() < call.targets.size())
    throw lowering::LoweringError(call.op->name + ": lowering returned fewer results than the op writes");

  std::vector<Value> outs;
  std::vector<int> written_slots;
  for (size_t k = 0; k < results.size(); ++k) {
    Value v = results[k];
    const TensorRef* target = k < call.targets.size() && call.targets[k].slot ? &call.targets[k] : nullptr;
    if (!target) {
      entry->fresh_types.push_back(v.type);
      entry->outputs.push_back({Entry::Output::Fresh, static_cast<int>(entry->fresh_types.size() - 1)});
      outs.push_back(b.reshape(v, {v.type.numel()}));
      continue;
    }
    const ViewSpec& view = target->view;
    if (!hlo::can_cast(v.dtype(), view.dtype))
      throw lowering::LoweringError(call.op->name + ": result type " + std::string(hlo::scalar_type_name(v.dtype())) +
                                    " can't be cast to the desired output type " + std::string(hlo::scalar_type_name(view.dtype)));
    if (v.dims() != view.sizes)
      throw lowering::LoweringError(call.op->name + ": output with shape " + shape_str(view.sizes) +
                                    " doesn't match the broadcast shape " + shape_str(v.dims()));
    int s = slot_of[first_target + std::count_if(call.targets.begin(), call.targets.begin() + k,
                                                 [](const TensorRef& t) { return t.slot != nullptr; })];
    Value base = has_flat[s] ? flat[s] : b.full(0, TensorType{view.dtype, {slot_numel(s)}});
    flat[s] = write_view(b, base, b.convert(v, view.dtype), view);
    has_flat[s] = true;
    if (std::find(written_slots.begin(), written_slots.end(), s) == written_slots.end()) written_slots.push_back(s);
  }
  for (int s : written_slots) {
    entry->outputs.push_back({Entry::Output::SlotWrite, s});
    outs.push_back(flat[s]);
  }
  for (const auto& c : cx.checks()) {
    entry->outputs.push_back({Entry::Output::Check, static_cast<int>(entry->checks.size())});
    entry->checks.push_back({Value{}, c.message, c.kind});
    outs.push_back(c.failed);
  }
  b.set_results(outs);

  auto t0 = std::chrono::steady_clock::now();
  try {
    entry->exe = client_->compile(b.module_text(), call.device);
  } catch (const runtime::Error& e) {
    throw runtime::Error(e.code(), call.op->name + ": " + e.what());
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> g(mu_);
  metrics_.compiles++;
  metrics_.compile_seconds += seconds;
  return entry;
}

runtime::BufferPtr Engine::scalar_buffer(const CallArg& a, int device) {
  ScalarKey key{0, static_cast<uint32_t>(a.scalar_dtype) << 16 | static_cast<uint32_t>(device)};
  std::memcpy(&key.bits, a.scalar_bytes, sizeof key.bits);
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  auto buf = client_->from_host(a.scalar_bytes, element_type(a.scalar_dtype), {}, device);
  std::lock_guard<std::mutex> g(mu_);
  // Small: a value that changes every step (AdamW's bias corrections) makes a
  // new entry each time, and each cached buffer keeps per-use records in
  // PJRT, so a large cache grows host memory by megabytes before it clears.
  if (scalars_.size() > 256) scalars_.clear();
  scalars_[key] = buf;
  return buf;
}

CallResult Engine::run(const OpCall& call) {
  static thread_local Key key;
  make_key(call, key.words);
  size_t h = 1469598103934665603ull;
  for (int64_t w : key.words) h = (h ^ static_cast<size_t>(w)) * 1099511628211ull;
  key.hash = h;

  Entry* entry = nullptr;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      entry = it->second.get();
      metrics_.cache_hits++;
    }
  }
  if (!entry) {
    auto built = build(call);
    std::lock_guard<std::mutex> g(mu_);
    entry = cache_.emplace(key, std::move(built)).first->second.get();
  }

  static thread_local std::vector<const TensorRef*> refs;
  static thread_local std::vector<int> slot_of;
  std::vector<Slot*> slots;
  collect_refs(call, refs);
  distinct_slots(refs, slot_of, &slots);

  std::vector<runtime::BufferPtr> keep;
  std::vector<PJRT_Buffer*> raw;
  keep.reserve(entry->params.size());
  for (const auto& p : entry->params) {
    if (p.kind == Entry::Param::Slot) {
      keep.push_back(ensure_buffer(*slots[p.index], entry->slot_dtypes[p.index]));
    } else if (p.kind == Entry::Param::Scalar) {
      keep.push_back(scalar_buffer(call.args[p.index], call.device));
    } else {
      keep.push_back(client_->from_host(call.args[p.index].rng, runtime::ElementType::U64, {2}, call.device));
    }
    raw.push_back(keep.back()->get());
  }

  std::vector<runtime::BufferPtr> outs;
  try {
    outs = entry->exe->execute(raw);
  } catch (const runtime::Error& e) {
    throw runtime::Error(e.code(), call.op->name + ": " + e.what());
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    metrics_.executions++;
  }
  const_cast<OpDef*>(call.op)->calls.fetch_add(1, std::memory_order_relaxed);

  if (!outs.empty()) {
    bool full;
    {
      std::lock_guard<std::mutex> g(mu_);
      in_flight_.emplace_back(outs[0]->ready_event(), call.op->name.c_str());
      full = in_flight_.size() > kMaxInFlight;
    }
    if (full) await_in_flight(kMaxInFlight / 2);
  }

  CallResult result;
  result.types = entry->fresh_types;
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& sink = entry->outputs[i];
    if (sink.kind == Entry::Output::Fresh) {
      result.buffers.push_back(outs[i]);
    } else if (sink.kind == Entry::Output::SlotWrite) {
      slots[sink.index]->set({outs[i], entry->slot_dtypes[sink.index], call.op->name.c_str()});
    } else {
      const lowering::Check& c = entry->checks[sink.index];
      checks.push_back({outs[i], c.message, c.kind});
    }
  }

  if (mode() == Mode::Debug) {
    for (const auto& b : outs) {
      try {
        b->wait_ready();
      } catch (const runtime::Error& e) {
        throw runtime::Error(e.code(), call.op->name + ": " + e.what());
      }
    }
    for (const PendingCheck& c : checks) {
      bool bad = false;
      c.failed->to_host(&bad, 1);
      if (bad) throw CheckError(call.op->name + ": " + c.message, c.kind);
    }
  } else if (call.defer_checks) {
    result.checks = std::move(checks);
  } else {
    add_checks(std::move(checks));
  }
  return result;
}

void Engine::add_checks(std::vector<CallResult::Check> checks) {
  if (checks.empty()) return;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& c : checks) pending_checks_.push_back(std::move(c));
}

void Engine::await_in_flight(size_t keep) {
  std::deque<std::pair<runtime::Event, const char*>> done;
  {
    std::lock_guard<std::mutex> g(mu_);
    while (in_flight_.size() > keep) {
      done.push_back(std::move(in_flight_.front()));
      in_flight_.pop_front();
    }
  }
  for (auto& [event, op] : done) {
    try {
      event.wait();
    } catch (const runtime::Error& e) {
      throw runtime::Error(e.code(), std::string(op) + " failed (reported at this sync point): " + e.what());
    }
  }
}

void Engine::sync() {
  await_in_flight(0);
  std::vector<PendingCheck> checks;
  {
    std::lock_guard<std::mutex> g(mu_);
    checks.swap(pending_checks_);
    metrics_.syncs++;
  }
  for (const PendingCheck& c : checks) {
    bool bad = false;
    c.failed->to_host(&bad, 1);
    if (bad) throw CheckError(c.message, c.kind);
  }
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

void Engine::adopt(Slot& slot, runtime::BufferPtr buffer, DType dtype) { slot.set({std::move(buffer), dtype, nullptr}); }

runtime::BufferPtr Engine::ensure_buffer(Slot& slot, DType dtype) {
  Slot::State st = slot.state();
  if (st.buffer && st.dtype == dtype) return st.buffer;
  // One spare byte so an empty storage still has a valid host pointer.
  std::vector<uint8_t> host(slot.nbytes + 1, 0);
  if (st.buffer && slot.nbytes > 0) download(slot, host.data());
  upload(slot, host.data(), dtype);
  return slot.state().buffer;
}

Metrics Engine::metrics() {
  std::lock_guard<std::mutex> g(mu_);
  Metrics m = metrics_;
  for (const OpDef* op : ops_)
    if (int64_t n = op->calls.load()) m.op_calls[op->name] += n;
  return m;
}

void Engine::reset_metrics() {
  std::lock_guard<std::mutex> g(mu_);
  metrics_ = Metrics{};
  for (OpDef* op : ops_) op->calls.store(0);
}

void Engine::register_op(OpDef* op) {
  std::lock_guard<std::mutex> g(mu_);
  ops_.push_back(op);
}

void Engine::count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> g(mu_);
  metrics_.fallback_ops[op]++;
}

size_t Engine::cache_size() {
  std::lock_guard<std::mutex> g(mu_);
  return cache_.size();
}

void Engine::track_alloc(int device, int64_t delta) {
  if (device < 0 || device >= kMaxDevices) return;
  int64_t now = allocated_[device].fetch_add(delta) + delta;
  int64_t peak = peak_[device].load();
  while (now > peak && !peak_[device].compare_exchange_weak(peak, now)) {
  }
}

int64_t Engine::allocated_bytes(int device) const { return allocated_[device].load(); }
int64_t Engine::peak_allocated_bytes(int device) const { return peak_[device].load(); }
void Engine::reset_peak(int device) { peak_[device].store(allocated_[device].load()); }

}  // namespace torch_pjrt::engine
