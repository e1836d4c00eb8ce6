// The program cache: compiled programs by their key (key.h), in memory.
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

#include "engine/key.h"
#include "engine/program.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

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
  using Hash = ProgramKeyHash;
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
