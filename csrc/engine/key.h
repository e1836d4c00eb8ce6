// Program keys: what a compiled program is cached under.
//
// A ProgramKey is a sequence of 64-bit words that determines a program
// completely: the plugin's identity (platform, version, C API version) and
// compile options, hashed into one word, then for each call its ATen op name
// (as text, not a pointer), device, argument kinds, the structure of every
// view (dtype, sizes, strides, access path, storage size and which distinct
// storage it is; not its offset) and the static arguments. Runtime values
// (scalars, RNG states, view offsets) never enter it. Its hash is a fixed
// function of the words (FNV-1a), so the same calls give the same key and
// hash in every process: key and signature are written to disk and read
// back by the compile cache's tiers (cache.h, disk_cache.h).
//
// This module makes every key: one call's (make_key), a bucketed call's
// (make_bucket_key), a fused region's as its calls join (append_call_words
// with the Region's numbering, region.h), and the shape-free structure that
// ShapeHistory watches (shape_free_hash). How a call becomes words is
// key_words.h.
//
// Thread-safety: plain functions; a ProgramKey is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/bucket_plan.h"
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

// For unordered containers of keys.
struct ProgramKeyHash {
  size_t operator()(const ProgramKey& k) const { return static_cast<size_t>(k.hash); }
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

}  // namespace torch_pjrt::engine
