#include "engine/cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "engine/region.h"

namespace torch_pjrt::engine {

uint64_t fnv_extend(uint64_t h, const int64_t* w, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint64_t>(w[i])) * 1099511628211ull;
    h ^= h >> 29;
  }
  return h;
}

namespace {

uint64_t fnv(const std::vector<int64_t>& w) { return fnv_extend(kFnvBasis, w.data(), w.size()); }

void push_string(std::vector<int64_t>& w, const std::string& s) {
  std::vector<int64_t> words = string_words(s);
  w.insert(w.end(), words.begin(), words.end());
}

// How push_call writes views: exactly (`shapes` null), leaving their sizes,
// strides and storage sizes out (appended to `shapes` instead), or bucketed
// by `plan`.
struct ViewWords {
  std::vector<int64_t>* shapes = nullptr;
  const BucketPlan* plan = nullptr;
  size_t ref = 0;  // the next tensor reference (for_each_ref order)
};

// The access-path word of a bucketed view (beyond every Access value).
constexpr int64_t kBucketedAccess = 64;

template <typename Numbering>
void push_ref(std::vector<int64_t>& w, const TensorRef& r, Numbering& slots, const OpCall& call, ViewWords* vw,
              bool target) {
  const std::string& op = call.op->name;
  const size_t ref = vw ? vw->ref++ : 0;
  if (!r.slot) {
    w.push_back(-1);
    return;
  }
  const ViewSpec& v = r.view;
  const int64_t numel = storage_numel(r);
  if (!v.in_bounds(numel))
    throw lowering::LoweringError(op + ": a view reaches outside its storage (offset " + std::to_string(v.offset) +
                                  ", storage of " + std::to_string(numel) + " elements)");
  const size_t before = slots.count();
  const auto [index, fixed] = number_ref(slots, call, r, target);
  w.push_back(index);
  // Program keys tell a storage read as zeros from one read as a parameter;
  // shape-free structures (ShapeHistory) do not: that a loop's first step
  // meets storages not yet written is no change of shape.
  if (static_cast<size_t>(index) == before && !(vw && vw->shapes)) w.push_back(slots.zeroed[index]);
  w.push_back(static_cast<int64_t>(v.dtype));
  if (vw && vw->shapes) {
    w.push_back(static_cast<int64_t>(v.sizes.size()));
    vw->shapes->insert(vw->shapes->end(), v.sizes.begin(), v.sizes.end());
    vw->shapes->insert(vw->shapes->end(), v.strides.begin(), v.strides.end());
    vw->shapes->push_back(numel);
    return;
  }
  if (vw && vw->plan && vw->plan->refs.at(ref).dynamic) {
    const BucketedRef& b = vw->plan->refs[ref];
    w.push_back(kBucketedAccess);
    w.push_back(static_cast<int64_t>(b.padded.size()));
    w.insert(w.end(), b.padded.begin(), b.padded.end());
    w.push_back(b.dynamic_sizes);
    w.push_back(b.fresh + 2 * b.forward);
    w.push_back(numel);
    if (fixed) w.push_back(v.offset);
    return;
  }
  w.push_back(static_cast<int64_t>(access_of(v, numel)));
  w.push_back(static_cast<int64_t>(v.sizes.size()));
  w.insert(w.end(), v.sizes.begin(), v.sizes.end());
  w.insert(w.end(), v.strides.begin(), v.strides.end());
  w.push_back(numel);
  if (fixed) w.push_back(v.offset);
}

template <typename Numbering>
void push_call(std::vector<int64_t>& w, const OpCall& call, Numbering& slots, ViewWords* vw = nullptr) {
  w.insert(w.end(), call.op->name_words.begin(), call.op->name_words.end());
  w.push_back(call.device);
  w.push_back(call.static_values);
  for (const CallArg& a : call.args) {
    w.push_back(static_cast<int64_t>(a.kind));
    switch (a.kind) {
      case CallArg::Kind::Tensor:
        push_ref(w, a.tensor, slots, call, vw, false);
        break;
      case CallArg::Kind::TensorList:
        w.push_back(static_cast<int64_t>(a.list.size()));
        w.insert(w.end(), a.present.begin(), a.present.end());
        for (const auto& t : a.list) push_ref(w, t, slots, call, vw, false);
        break;
      case CallArg::Kind::Scalar:
        w.push_back((static_cast<int64_t>(a.scalar_dtype) * 2 + a.host_tensor) * 2 + a.fixed);
        if (a.fixed) {
          int64_t bytes;
          std::memcpy(&bytes, a.scalar_bytes, 8);
          w.push_back(bytes);
        }
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
      case CallArg::Kind::String:
        push_string(w, a.s);
        break;
      case CallArg::Kind::None:
      case CallArg::Kind::Rng:
        break;
    }
  }
  w.push_back(static_cast<int64_t>(call.targets.size()));
  for (const auto& t : call.targets) {
    if (t.slot)
      push_ref(w, t, slots, call, vw, true);
    else
      w.push_back(-1);  // a fresh result (for_each_ref does not count it)
  }
}

}  // namespace

template <typename Numbering>
void append_call_words(std::vector<int64_t>& w, const OpCall& call, Numbering& numbering) {
  push_call(w, call, numbering);
}
template void append_call_words<SlotNumbering>(std::vector<int64_t>&, const OpCall&, SlotNumbering&);
template void append_call_words<Region>(std::vector<int64_t>&, const OpCall&, Region&);

template <typename Numbering>
void append_bucket_call_words(std::vector<int64_t>& w, const OpCall& call, const BucketPlan& plan,
                              Numbering& numbering) {
  w.push_back(-1);  // bucketed (an exact key holds its number of calls here)
  ViewWords vw{nullptr, &plan, 0};
  push_call(w, call, numbering, &vw);
  for (const auto& r : plan.results) {
    w.push_back(static_cast<int64_t>(r.size()));
    w.insert(w.end(), r.begin(), r.end());
  }
}
template void append_bucket_call_words<Region>(std::vector<int64_t>&, const OpCall&, const BucketPlan&, Region&);

std::string ProgramKey::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[15 - i] = digits[(hash >> (4 * i)) & 0xf];
  return s;
}

std::string compiler_flags() {
  std::string out;
  for (const char* var : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* v = std::getenv(var);
    if (!v) continue;
    std::vector<std::string> flags;
    std::istringstream in(v);
    for (std::string f; in >> f;)
      if (f.rfind("--xla_dump", 0) != 0) flags.push_back(f);
    if (flags.empty()) continue;
    std::sort(flags.begin(), flags.end());
    out += var;
    for (const auto& f : flags) out += " " + f;
    out += ";";
  }
  return out;
}

int64_t plugin_identity(const runtime::Client& client) {
  std::vector<int64_t> w;
  push_string(w, client.platform_name());
  push_string(w, client.platform_version());
  push_string(w, client.plugin().api_version());
  // Compile options differ between devices only by the device id, which
  // each call's words hold.
  push_string(w, runtime::compile_options_proto(0));
  push_string(w, compiler_flags());
  return static_cast<int64_t>(fnv(w));
}

void make_key(int64_t identity, const OpCall* const* calls, size_t n, ProgramKey& key, SlotNumbering& slots) {
  std::vector<int64_t>& w = key.words;
  w.clear();
  slots.clear();
  w.push_back(identity);
  w.push_back(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) push_call(w, *calls[i], slots);
  key.hash = fnv(w);
}

uint64_t shape_free_hash(const OpCall& call, std::vector<int64_t>& shapes) {
  thread_local std::vector<int64_t> w;
  thread_local SlotNumbering slots;
  w.clear();
  slots.clear();
  ViewWords vw{&shapes, nullptr, 0};
  push_call(w, call, slots, &vw);
  return fnv(w);
}

void make_bucket_key(int64_t identity, const OpCall& call, const BucketPlan& plan, ProgramKey& key,
                     SlotNumbering& slots) {
  std::vector<int64_t>& w = key.words;
  w.clear();
  slots.clear();
  w.push_back(identity);
  append_bucket_call_words(w, call, plan, slots);
  key.hash = fnv(w);
}

ProgramCache::ProgramCache() {
  const char* env = std::getenv("TORCH_PJRT_MAX_PROGRAMS");
  if (env && std::atoi(env) > 0) capacity_ = static_cast<size_t>(std::atoi(env));
}

std::shared_ptr<const CachedProgram> ProgramCache::find(const ProgramKey& key) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.program;
}

std::shared_ptr<const CachedProgram> ProgramCache::get(const ProgramKey& key, const Compile& compile, bool* hit) {
  std::unique_lock<std::mutex> g(mu_);
  *hit = true;
  for (;;) {
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.program;
    }
    if (!compiling_.count(key)) break;
    compiled_.wait(g);
  }
  *hit = false;
  compiling_.insert(key);
  g.unlock();
  std::shared_ptr<const CachedProgram> program;
  try {
    program = compile();
  } catch (...) {
    g.lock();
    compiling_.erase(key);
    compiled_.notify_all();
    throw;
  }
  g.lock();
  compiling_.erase(key);
  lru_.push_front(key);
  entries_[key] = Entry{program, lru_.begin()};
  while (entries_.size() > capacity_) {  // a running program keeps its own reference
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  compiled_.notify_all();
  return program;
}

size_t ProgramCache::size() {
  std::lock_guard<std::mutex> g(mu_);
  return entries_.size();
}

std::vector<std::string> ProgramCache::key_hashes() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) out.push_back(k.hex());
  return out;
}

}  // namespace torch_pjrt::engine
