// The program cache: compiled programs by the structure of their calls.
//
// A ProgramKey is a sequence of 64-bit words that determines a program
// completely: the plugin's identity (platform, version, C API version) and
// compile options, hashed into one word, then for each call its ATen op name (as text, not a
// pointer), device, argument kinds, the structure of every view (dtype,
// sizes, strides, access path, storage size and which distinct storage it
// is; not its offset) and the static arguments. Runtime values (scalars,
// RNG states, view offsets) never enter it. Its hash is a fixed function of
// the words (FNV-1a), so the same calls give the same key and hash in every
// process: key and signature can be written to disk and read back (the disk
// tiers come later; the in-memory tier is here).
//
// The cache holds at most TORCH_PJRT_MAX_PROGRAMS programs (default 4096)
// and evicts the least recently used: each executable of the CPU plugin
// costs a few memory mappings, and a process that never evicts reaches the
// kernel's mapping limit after about 10,000 programs.
//
// Thread-safety: ProgramCache methods may be called from any thread. A found
// entry is shared: it stays valid while the caller holds it, even if it is
// evicted meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/bucket.h"
#include "engine/call.h"
#include "engine/program.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

struct ProgramKey {
  std::vector<int64_t> words;
  uint64_t hash = 0;

  bool operator==(const ProgramKey& o) const { return hash == o.hash && words == o.words; }
  // The hash as 16 hex digits.
  std::string hex() const;
};

// What identifies the plugin and how it compiles: its platform, platform
// version, C API version, compile options and compiler flags
// (compiler_flags()), hashed into the one word that begins every key (the
// same in every process).
int64_t plugin_identity(const runtime::Client& client);

// The flags the plugin's compiler reads from the environment and that can
// change what it builds: XLA_FLAGS and LIBTPU_INIT_ARGS, each split at
// whitespace and sorted, without XLA's --xla_dump* flags (they only write
// files). "" when neither is set.
std::string compiler_flags();

// FNV-1a over key words, continued from `h` (kFnvBasis to start): keys are
// hashed incrementally as a fused region grows.
constexpr uint64_t kFnvBasis = 1469598103934665603ull;
uint64_t fnv_extend(uint64_t h, const int64_t* w, size_t n);

// Appends the key words of one call to `w`, numbering its storages with
// `numbering` (a SlotNumbering, or a fused Region across its calls). Throws
// lowering::LoweringError for a view that reaches outside its storage.
template <typename Numbering>
void append_call_words(std::vector<int64_t>& w, const OpCall& call, Numbering& numbering);

// The same for `call` run bucketed by `plan` (as make_bucket_key writes it
// after the identity word).
template <typename Numbering>
void append_bucket_call_words(std::vector<int64_t>& w, const OpCall& call, const BucketPlan& plan,
                              Numbering& numbering);

// Builds the key of the `n` calls at `calls` into `key` and numbers their
// distinct slots into `slots` (both cleared first, their storage reused).
// Throws lowering::LoweringError for a view that reaches outside its storage
// (programs would clamp it).
void make_key(int64_t identity, const OpCall* const* calls, size_t n, ProgramKey& key, SlotNumbering& slots);

// The hash of `call`'s key words without its views' sizes, strides, access
// paths and storage sizes, which are appended to `shapes` instead (per
// tensor reference with a slot: sizes, strides, storage elements). Calls
// that differ only in shapes share it (bucket.h).
uint64_t shape_free_hash(const OpCall& call, std::vector<int64_t>& shapes);
// The key of `call` run bucketed by `plan`: dynamic views hold their
// bucketed sizes and storage size instead of sizes and strides.
void make_bucket_key(int64_t identity, const OpCall& call, const BucketPlan& plan, ProgramKey& key,
                     SlotNumbering& slots);

// A compiled program and what its parameters and results are.
struct CachedProgram {
  Signature signature;
  std::unique_ptr<runtime::Executable> exe;
};

class ProgramCache {
 public:
  ProgramCache();
  using Compile = std::function<std::shared_ptr<const CachedProgram>()>;
  // The entry for `key`; when there is none, `compile` makes it and it is
  // stored. Threads that miss the same key at once compile it once: the
  // others wait for the first (and compile themselves if it threw, so each
  // sees its own error). `*hit` says whether this call found it ready.
  std::shared_ptr<const CachedProgram> get(const ProgramKey& key, const Compile& compile, bool* hit);
  // The compiled entry for `key`, or null (one being compiled is not
  // waited for). Marks it recently used.
  std::shared_ptr<const CachedProgram> find(const ProgramKey& key);
  size_t size();
  // The hex hash of every cached key (for diagnostics and tests).
  std::vector<std::string> key_hashes();

 private:
  struct Hash {
    size_t operator()(const ProgramKey& k) const { return static_cast<size_t>(k.hash); }
  };
  std::mutex mu_;
  std::condition_variable compiled_;
  struct Entry {
    std::shared_ptr<const CachedProgram> program;
    std::list<ProgramKey>::iterator lru;
  };
  size_t capacity_ = 4096;
  std::unordered_map<ProgramKey, Entry, Hash> entries_;
  std::list<ProgramKey> lru_;  // most recently used first
  std::unordered_set<ProgramKey, Hash> compiling_;
};

}  // namespace torch_pjrt::engine
