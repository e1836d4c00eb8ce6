#include "engine/fused.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "engine/trace.h"

namespace torch_pjrt::engine {

const char* flush_reason_name(FlushReason r) {
  static const char* names[kNumFlushReasons] = {"sync",      "read",   "upload",     "unfusable",
                                                "mode",      "device", "dtype_view", "cap_calls",
                                                "cap_bytes", "period", "graph",      "dynamic_shape"};
  return names[static_cast<int>(r)];
}

// ---------------------------------------------------------------- SignatureTable

std::shared_ptr<const Signature> SignatureTable::insert(const ProgramKey& key, std::shared_ptr<const Signature> sig,
                                                        Placement placement, Entry** entry) {
  std::lock_guard<std::mutex> g(mu_);
  if (entries_.size() > 65536) entries_.clear();
  auto it = entries_.try_emplace(key, Entry{std::move(sig), placement, 0}).first;
  if (entry) *entry = &it->second;
  return it->second.signature;
}

std::shared_ptr<const Signature> SignatureTable::exact(const OpCall& call, const ProgramKey& key, uint64_t generation,
                                                       Placement* placement) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      // A placement from before the shapes last settled is decided anew.
      if (placement) *placement = it->second.generation == generation ? it->second.placement : Placement::Undecided;
      return it->second.signature;
    }
  }
  ProgramBuilder builder(settings_.precision.load());
  builder.add(call);  // raises the call's argument errors here, at the op
  auto made = std::make_shared<Signature>(builder.finish().signature);
  if (placement) *placement = Placement::Undecided;
  return insert(key, std::move(made), Placement::Undecided, nullptr);
}

std::shared_ptr<const Signature> SignatureTable::bucketed(const OpCall& call, const BucketPlan& plan,
                                                          const ProgramKey& key) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second.signature;
  }
  ProgramBuilder builder(settings_.precision.load());
  builder.add(call, &plan);
  return insert(key, std::make_shared<Signature>(builder.finish().signature), Placement::Alone, nullptr);
}

void SignatureTable::place(const ProgramKey& key, Placement placement, uint64_t generation) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second.placement = placement, it->second.generation = generation;
}

void SignatureTable::forget_placements() {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [key, entry] : entries_) entry.placement = Placement::Undecided;
}

// ---------------------------------------------------------------- the region lock

namespace {
// How often this thread holds a scheduler's region lock: a flush may release
// it for a compile only when it holds it once (not inside a mode switch or a
// capture, which hold it around the flush).
thread_local int t_region_depth = 0;
}  // namespace

class FusedScheduler::Lock {
 public:
  explicit Lock(FusedScheduler& s) : lock_(s.mu_) { ++t_region_depth; }
  ~Lock() {
    if (lock_.owns_lock()) --t_region_depth;
  }
  Lock(const Lock&) = delete;
  void unlock() {
    lock_.unlock();
    --t_region_depth;
  }
  void lock() {
    lock_.lock();
    ++t_region_depth;
  }
  // Waits on `cv`, releasing the lock meanwhile (held once).
  void wait(std::condition_variable_any& cv) { cv.wait(lock_); }
  bool held_once() const { return t_region_depth == 1; }

 private:
  std::unique_lock<std::recursive_mutex> lock_;
};

FusedScheduler::FusedScheduler(const Settings& settings, Compiler& compiler, Launcher& launcher,
                               MetricsRecorder& metrics, ShapeHistory& shapes, RunAlone run_alone)
    : settings_(settings),
      compiler_(compiler),
      launcher_(launcher),
      metrics_(metrics),
      shapes_(shapes),
      run_alone_(std::move(run_alone)),
      signatures_(settings),
      region_(std::make_unique<Region>()) {}

// ---------------------------------------------------------------- planning

bool FusedScheduler::plan(const OpCall& call, CallResult& r, std::optional<Shapes>& observed) {
  if (!call.fusable) {
    flush(FlushReason::Unfusable);
    return false;
  }
  thread_local ProgramKey key;
  thread_local SlotNumbering numbering;
  const OpCall* calls[] = {&call};
  make_key(settings_.key_identity(), calls, 1, key, numbering);
  Placement placement = Placement::Undecided;
  std::shared_ptr<const Signature> sig = signatures_.exact(call, key, shapes_.generation(), &placement);
  Launcher::check_scalars(*sig, call, 0);
  r.deferred = true;
  r.types = std::shared_ptr<const std::vector<hlo::TensorType>>(sig, &sig->fresh_types);
  r.has_checks = !sig->checks.empty();
  r.structure = key.hash;
  // A call its caller still validates (out=) joins only when it makes no
  // runtime checks: a refused call then leaves a dead value, never a check.
  if (call.defer_checks && r.has_checks) {
    flush(FlushReason::Unfusable);
    return false;
  }
  if (!settings_.buckets || placement == Placement::Joins) return true;
  // A call whose shape changes from step to step (a decode loop's attention
  // over a growing KV cache) leaves the region and runs alone, bucketed when
  // it can: inside a region its new sizes would make every step's region a
  // new program. The regions around it keep one structure per step. A pure
  // function of the op stream, like every cut. Decided per exact call at its
  // first sight, so that a later run over the same sizes cuts the same
  // regions, and again once its structure's sizes settle (ShapeHistory): a
  // call that runs alone is observed each time, so that its structure can
  // settle. Inside a compiled graph (a capture) the graph stays one program:
  // a bucketed call joins it with its buckets in the key words, and every
  // other call joins exactly. Eager regions do not take bucketed calls: a
  // region of hundreds of calls with bucketed dims compiles about ten times
  // slower than the same calls in small programs (bench/decode.py: 25 s
  // against 1.9 s for fused mode's first run).
  const bool graph = capturing_here();
  const Shapes found =
      shapes_.observe(call, bucket_scratch(), graph && capture_dynamic_, graph ? capture_bucket_size_ : 0);
  const Placement now = found == Shapes::Static ? Placement::Joins : Placement::Alone;
  if (now != placement) signatures_.place(key, now, shapes_.generation());
  if (now == Placement::Joins) return true;
  if (graph) {
    if (found == Shapes::Bucketed) plan_bucketed(call, key, r);
    return true;
  }
  flush(FlushReason::Dynamic);
  observed = found;
  return false;
}

bool FusedScheduler::refuse_buckets(const BucketPlan& plan) {
  shapes_.refuse(plan);
  metrics_.bucket_refused();
  return false;
}

bool FusedScheduler::plan_bucketed(const OpCall& call, const ProgramKey& exact_key, CallResult& deferred) {
  BucketPlan& plan = bucket_scratch();
  std::shared_ptr<const Signature> exact = signatures_.exact(call, exact_key, shapes_.generation());
  bucket_results(plan, *exact, capture_bucket_size_);
  thread_local ProgramKey key;
  thread_local SlotNumbering numbering;
  make_bucket_key(settings_.key_identity(), call, plan, key, numbering);
  // The call lowered alone and bucketed (never compiled), cached by its key.
  std::shared_ptr<const Signature> sig;
  try {
    sig = signatures_.bucketed(call, plan, key);
  } catch (const std::exception& e) {
    return refuses_dynamic(e) ? refuse_buckets(plan) : false;
  }
  if (!bucketed_signature_fits(*sig, *exact)) return refuse_buckets(plan);

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

// ---------------------------------------------------------------- joining

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

// Makes `r` a whole write of the fresh storage `slot`, of type `t`.
void set_fresh(TensorRef& r, Slot* slot, const hlo::TensorType& t) {
  r.slot = slot;
  r.view.dtype = t.dtype;
  r.view.sizes = t.dims;
  r.view.offset = 0;
  r.view.strides.assign(t.dims.size(), 1);
  for (size_t d = t.dims.size(); d-- > 1;) r.view.strides[d - 1] = r.view.strides[d] * std::max<int64_t>(t.dims[d], 1);
}

}  // namespace

bool FusedScheduler::touches_sealed(const OpCall& call) const {
  bool sealed = false;
  for_each_ref(call, [&](const TensorRef& r, bool) { sealed = sealed || (r.slot && r.slot->sealed()); });
  return sealed;
}

void FusedScheduler::join(OpCall& call, Slot* const* fresh, size_t n_fresh, const CallResult& planned) {
  // The user's line, asked before the lock (it takes the GIL).
  std::string location = planned.has_checks && location_hook_ ? location_hook_() : std::string();
  std::optional<FlushReason> after;
  {
    Lock g(*this);
    for (;;) {
      // A storage of a sealed region: wait until that region has run.
      if (touches_sealed(call)) {
        g.wait(unsealed_);
        continue;
      }
      // A call that cannot join the region as it is flushes it first.
      std::optional<FlushReason> before;
      if (!region_->empty() && region_->device != call.device) before = FlushReason::Device;
      for_each_ref(call, [&](const TensorRef& r, bool) {
        const DType* d = region_->dtype_of(r.slot);
        if (d && *d != r.view.dtype) before = FlushReason::DtypeView;
      });
      if (!before) break;
      g.unlock();
      flush(*before);
      g.lock();
    }
    after = add(call, fresh, n_fresh, planned, std::move(location));
  }
  if (after) flush(*after);
}

std::optional<FlushReason> FusedScheduler::add(OpCall& call, Slot* const* fresh, size_t n_fresh,
                                               const CallResult& planned, std::string location) {
  Region& region = *region_;
  const size_t n_targets = call.targets.size();
  OpCall joined = region.recycled();
  trade_contents(joined, call);
  const OpDef* op = joined.op;
  // Fresh results become whole writes of their new storages.
  size_t j = 0;
  for (size_t i = 0; i < n_targets; ++i)
    if (!joined.targets[i].slot && j < n_fresh) set_fresh(joined.targets[i], fresh[j], (*planned.types)[j]), ++j;
  size_t end = n_targets;
  for (; j < n_fresh; ++j, ++end)
    set_fresh(end < joined.targets.size() ? joined.targets[end] : joined.targets.emplace_back(), fresh[j],
              (*planned.types)[j]);
  joined.targets.resize(end);

  if (capturing_ && std::this_thread::get_id() != capture_thread_) capture_ok_ = false;
  // A graph with no symbolic sizes fixes the offsets of its own storages (call.h).
  joined.static_values = capturing_ && capture_ok_ && !capture_dynamic_;
  region.device = joined.device;
  // A captured graph runs again with other storages: it reads each one.
  if (region.empty()) region.zero_unwritten = !capturing_;
  region.add(std::move(joined), std::move(location),
             planned.plan ? std::make_shared<BucketPlan>(*planned.plan) : nullptr);
  for (size_t k = 0; k < n_fresh; ++k) region.fresh_bytes += fresh[k]->nbytes;
  const_cast<OpDef*>(op)->calls.fetch_add(1, std::memory_order_relaxed);

  // Another thread left fused mode while this call was planned: no region
  // stays open outside fused mode, where strict calls would not look for it.
  if (!capturing_ && settings_.mode.load() != Mode::Fused) return FlushReason::Mode;
  if (capturing_ && capture_ok_) return std::nullopt;  // a captured graph is one region: no cuts
  return cut_after(planned.structure);
}

std::optional<FlushReason> FusedScheduler::cut_after(uint64_t structure) {
  if (period_.length() >= (int64_t{1} << 16)) period_.reset();
  // Cut at the period of the stream since the last sync point; or, once
  // the call cap cut that stream, at the period of its recent calls: a loop
  // entered after other work with no sync point between (a decode loop
  // after its prompt) is periodic only from some call on, and the cap would
  // cut it at a new phase each time. There, regions hold as many cut units
  // as fit under the cap, counted from where the period was found.
  // The recent calls are followed only while they are used, from the cap on.
  const int64_t p = period_.push(structure);
  int64_t q = 0;
  if (p == 0 && capped_)
    q = recent_.push(structure);
  else if (recent_.length() > 0)
    recent_.reset();
  auto unit_of = [](int64_t period) { return period * std::max<int64_t>(1, (kMinPeriodCut + period - 1) / period); };
  if (p > 0) {
    if ((period_.length() % unit_of(p)) % static_cast<int64_t>(kMaxRegionCalls) == 0) return FlushReason::Period;
  } else if (q > 0) {
    const int64_t unit = unit_of(q);
    const int64_t units = std::max<int64_t>(1, static_cast<int64_t>(kMaxRegionCalls) / unit) * unit;
    if (recent_.since_found() % units == 0) return FlushReason::Period;
  }
  if (region_->calls.size() >= kMaxRegionCalls) return FlushReason::CapCalls;
  if (region_->fresh_bytes >= kMaxRegionBytes) return FlushReason::CapBytes;
  return std::nullopt;
}

// ---------------------------------------------------------------- flushing

void FusedScheduler::flush(FlushReason why) {
  Lock g(*this);
  if (flushing_) return;
  if (why == FlushReason::Sync || why == FlushReason::Read) period_.reset(), recent_.reset(), capped_ = false;
  if (why == FlushReason::CapCalls || why == FlushReason::CapBytes) capped_ = true;
  if (region_->empty()) return;
  if (capturing_ && !recording_) capture_ok_ = false;
  metrics_.flushed(flush_reason_name(why), static_cast<int64_t>(region_->calls.size()));
  const ProgramKey key = region_->key();
  // A program to compile in the foreground is compiled with the lock
  // released, while the region is sealed (see fused.h).
  if (g.held_once() && !capturing_ && !async_compile_.load() && !compiler_.find(key)) {
    std::optional<Program> lowered;
    try {
      lowered = sequence_of(*region_).lower();
    } catch (const std::exception&) {
      // Lowering errors surface as a compile failure would, under the lock.
    }
    if (lowered) return run_sealed(g, key, std::move(*lowered));
  }
  flushing_ = true;
  struct End {
    FusedScheduler& s;
    ~End() {
      for (Slot* dead : s.region_->clear()) delete dead;
      s.flushing_ = false;
    }
  } end{*this};
  run_region(*region_, key, nullptr, recording_ && capture_ok_);
}

Sequence FusedScheduler::sequence_of(const Region& r) {
  Sequence seq{{}, settings_.precision.load(), &r.dead, r.plan_pointers(), r.zero_unwritten};
  for (const OpCall& c : r.calls) seq.calls.push_back(&c);
  return seq;
}

void FusedScheduler::run_sealed(Lock& g, const ProgramKey& key, Program lowered) {
  std::unique_ptr<Region> sealed = std::move(region_);
  if (spare_regions_.empty()) {
    region_ = std::make_unique<Region>();
  } else {
    region_ = std::move(spare_regions_.back());
    spare_regions_.pop_back();
  }
  sealed->seal();
  metrics_.sealed(+1);
  g.unlock();
  struct Unseal {
    FusedScheduler& s;
    Lock& g;
    std::unique_ptr<Region>& sealed;
    ~Unseal() {
      s.metrics_.sealed(-1);
      g.lock();
      std::vector<Slot*> gone = sealed->clear();
      s.spare_regions_.push_back(std::move(sealed));
      s.unsealed_.notify_all();
      for (Slot* slot : gone) delete slot;
    }
  } unseal{*this, g, sealed};
  run_region(*sealed, key, &lowered, false);
}

std::shared_ptr<const CachedProgram> FusedScheduler::program_of(Region& r, const ProgramKey& key, Program* lowered,
                                                                bool* hit) {
  const Sequence seq = sequence_of(r);
  if (async_compile_.load() && !lowered) {
    std::shared_ptr<const CachedProgram> program = compiler_.find(key);
    *hit = program != nullptr;
    if (!program && compiler_.compile_in_background(key, seq)) {
      // Its program compiles meanwhile: the calls run as strict mode runs them.
      if (capturing_) capture_ok_ = false, capture_compiling_ = true;
      metrics_.ran_while_compiling();
      return nullptr;
    }
    if (program) return program;
  }
  return compiler_.get(key, seq, hit, lowered);
}

void FusedScheduler::run_region(Region& r, const ProgramKey& key, Program* lowered, bool record) {
  std::vector<const OpCall*> calls;
  for (const OpCall& c : r.calls) calls.push_back(&c);
  const std::string name = "a fused region ending in " + r.calls.back().op->name;
  Span span("fused_region", &name);
  bool hit = false;
  std::shared_ptr<const CachedProgram> program;
  try {
    program = program_of(r, key, lowered, &hit);
  } catch (const std::exception& e) {
    // A region that does not compile runs call by call, as strict mode would.
    metrics_.replayed();
    if (std::getenv("TORCH_PJRT_DEBUG_REGIONS")) std::fprintf(stderr, "torch_pjrt: region replayed: %s\n", e.what());
  }
  if (!program) return run_calls_alone(r, calls);
  if (hit) metrics_.cache_hit();
  Binding b;
  try {
    launcher_.execute(*program, calls.data(), calls.size(), r.slots, b, name);
  } catch (const std::exception&) {
    // The program did not start (out of memory, a failed input): nothing was
    // donated, and the calls before the one at fault can still run.
    b.release();
    metrics_.replayed();
    return run_calls_alone(r, calls);
  }
  const Signature& sig = program->signature;
  std::vector<std::string> messages;
  std::vector<size_t> checks_of(r.calls.size(), 0);  // per call: its checks met so far
  for (const auto& c : sig.checks) {
    const std::string& at = r.locations[c.call];
    const BucketPlan* plan = r.plans.size() > static_cast<size_t>(c.call) ? r.plans[c.call].get() : nullptr;
    const size_t k = checks_of[c.call]++;
    const std::string& message = plan && k < plan->check_messages.size() ? plan->check_messages[k] : c.message;
    messages.push_back(check_message(r.calls[c.call].op->name, message) + (at.empty() ? "" : " (at " + at + ")"));
  }
  launcher_.store_region_outputs(sig, r.slots, b, r.writers, messages);
  if (record)
    if (auto cap = capture_of(r, program, r.writers, std::move(messages))) captured_ = std::move(cap);
}

std::shared_ptr<RegionCapture> FusedScheduler::capture_of(const Region& r,
                                                          const std::shared_ptr<const CachedProgram>& program,
                                                          std::vector<const char*> writers,
                                                          std::vector<std::string> messages) {
  const Signature& sig = program->signature;
  auto cap = std::make_shared<RegionCapture>();
  cap->program = program;
  cap->device = r.device;
  cap->precision = settings_.precision.load();
  cap->name = "a compiled graph ending in " + r.calls.back().op->name;
  for (Slot* slot : r.slots) {
    cap->slot_ids.push_back(reinterpret_cast<uintptr_t>(slot));
    cap->slot_nbytes.push_back(slot->nbytes);
  }
  cap->dead = r.dead;
  cap->writers = std::move(writers);
  cap->check_messages = std::move(messages);
  std::vector<const OpCall*> calls;
  std::vector<const TensorRef*> refs;
  for (const OpCall& c : r.calls) {
    calls.push_back(&c);
    for_each_ref(c, [&](const TensorRef& t, bool) { refs.push_back(&t); });
  }
  for (const auto& p : sig.params) {
    if (p.kind == Signature::Param::Rng ||
        (p.kind == Signature::Param::Scalar && calls[p.call]->args[p.index].host_tensor))
      return nullptr;  // not a constant of the graph
    cap->constants.push_back(
        p.kind == Signature::Param::Slot ? nullptr : launcher_.constant_param(p, calls.data(), refs, r.device));
  }
  return cap;
}

void FusedScheduler::run_calls_alone(const Region& r, const std::vector<const OpCall*>& calls) {
  std::exception_ptr first;
  int64_t first_request_bytes = 0;  // for an out-of-memory message
  std::unordered_map<const Slot*, std::exception_ptr> failed;
  struct Reset {
    ~Reset() { Launcher::set_call_location(nullptr); }
  } reset;
  for (size_t i = 0; i < calls.size(); ++i) {
    const OpCall& c = *calls[i];
    std::exception_ptr failure;
    for_each_ref(c, [&](const TensorRef& ref, bool) {
      auto it = failed.find(ref.slot);
      if (!failure && it != failed.end()) failure = it->second;
    });
    if (!failure) {
      Launcher::set_call_location(i < r.locations.size() ? &r.locations[i] : nullptr);
      try {
        run_alone_(c, nullptr);
        continue;
      } catch (...) {
        failure = std::current_exception();
        if (!first) first = failure, first_request_bytes = Launcher::last_request_bytes();
      }
    }
    for (const TensorRef& t : c.targets)
      if (t.slot) {
        t.slot->fail(failure);
        failed[t.slot] = failure;
      }
  }
  if (first) {
    Launcher::set_last_request_bytes(first_request_bytes);
    std::rethrow_exception(first);
  }
}

// ---------------------------------------------------------------- capture and replay

bool FusedScheduler::capturing_here() {
  Lock g(*this);
  return capturing_ && capture_ok_ && std::this_thread::get_id() == capture_thread_;
}

bool FusedScheduler::begin_capture(bool dynamic, int64_t bucket_size) {
  Lock g(*this);
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

std::shared_ptr<const RegionCapture> FusedScheduler::end_capture(bool* compiling) {
  Lock g(*this);
  recording_ = true;
  struct End {
    FusedScheduler& s;
    ~End() {
      s.recording_ = s.capturing_ = false;
      s.dynamic_capture_.store(false, std::memory_order_release);
    }
  } end{*this};
  flush(FlushReason::Graph);
  if (compiling) *compiling = capture_compiling_;
  return capture_ok_ ? std::move(captured_) : nullptr;
}

void FusedScheduler::replay(const RegionCapture& c, const std::vector<Slot*>& slots) {
  flush(FlushReason::Graph);  // its writes come before the graph's reads
  Span span("execute", &c.name);
  const Signature& sig = c.program->signature;
  Binding b;
  b.keep.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    b.keep[i] = p.kind == Signature::Param::Slot ? launcher_.read_slot(*slots[p.index], sig.slot_dtypes[p.index])
                                                 : c.constants[i];
  }
  const char* last_op = "a compiled graph";  // op names live for the process; the capture may not
  for (const char* w : c.writers)
    if (w) last_op = w;
  launcher_.launch(*c.program, slots, b, c.name, last_op);
  launcher_.store_region_outputs(sig, slots, b, c.writers, c.check_messages);
  metrics_.graph_replayed();
}

// ---------------------------------------------------------------- the rest

std::string FusedScheduler::region_text(const Slot& slot) {
  Lock g(*this);
  if (flushing_ || !region_->dtype_of(&slot)) return "";
  return sequence_of(*region_).lower().module_text;
}

void FusedScheduler::release(Slot* slot) {
  if (slot->region_index() >= 0 || slot->sealed()) {
    Lock g(*this);
    if (slot->defer_release()) return;  // sealed: the sealing thread deletes it
    if (region_->dtype_of(slot)) {
      region_->mark_dead(slot);
      return;
    }
  }
  slot->state();  // a non-blocking upload into it finishes first
  delete slot;
}

void FusedScheduler::switch_mode(std::atomic<Mode>& mode, Mode m) {
  Lock g(*this);
  flush(FlushReason::Mode);
  mode.store(m);
}

void FusedScheduler::forget_placements() { signatures_.forget_placements(); }

}  // namespace torch_pjrt::engine
