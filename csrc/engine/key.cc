#include "engine/key.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "engine/key_words.h"

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

}  // namespace

using key_words::push_call;
using key_words::push_string;
using key_words::ViewWords;

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

template void append_call_words<SlotNumbering>(std::vector<int64_t>&, const OpCall&, SlotNumbering&);

}  // namespace torch_pjrt::engine
