// The compiler: programs by key, through the compile cache's tiers.
//
// Asked for the program of a key, it looks in memory (ProgramCache, cache.h),
// then in the host tier on disk, then in the shared tier (disk_cache.h), and
// only then lowers the calls (ProgramBuilder, program.h) and has the plugin
// compile them; what it compiled is written to the disk tiers in the
// background. The shared tier gets a head start; a read still running after
// it races a local compile, and the first to finish wins. Threads that ask
// for one key at once compile it once (ProgramCache), processes that share a
// host tier take its per-key file lock, and at most one compile per core runs
// at once (compile slots), so other threads keep dispatching.
//
// Async compile (torch.compile's async_compile option, fused mode with
// torch_pjrt.set_async_compile): compile_in_background lowers a program at
// once and compiles it on a thread of its own into the cache; a later ask
// finds it there. A program that failed there is compiled in the foreground
// the next time, where its error surfaces.
//
// Thread-safety: every method may be called from any thread. The compiler
// never calls back into the engine, and callers must not hold a lock of
// theirs while asking it for a program: a compile takes seconds (the fused
// scheduler compiles a region with its lock released, fused.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/cache.h"
#include "engine/disk_cache.h"
#include "engine/key.h"
#include "engine/metrics.h"
#include "engine/program.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// What a program is lowered from when no tier has it: a sequence of calls
// (one for an eager op; a fused region or a compiled graph otherwise) and
// how ProgramBuilder treats it. The calls (and `dead`, the plans) are
// borrowed: they live while the compiler uses them (compile_in_background
// lowers before it returns).
struct Sequence {
  std::vector<const OpCall*> calls;
  hlo::Precision precision = hlo::Precision::Highest;
  const std::vector<uint8_t>* dead = nullptr;  // per distinct slot: not a result
  Plans plans = {};                            // per call: its bucketing or nullptr (empty: none)
  bool zero_unwritten = true;                  // SlotNumbering::zero_unwritten, as the key decided it

  // The module and signature of the sequence (ProgramBuilder over its calls).
  Program lower() const;
  // What metrics()["compiles_by_name"] counts it under: its op, or
  // "fused_region" for several calls.
  const std::string& name() const;
  // "aten::add.Tensor" for one call; "37 calls: aten::mm x4, ..." for more
  // (a disk entry's summary).
  std::string summary() const;
  int device() const { return calls.front()->device; }
};

class Compiler {
 public:
  // `client` and `metrics` outlive the compiler.
  Compiler(runtime::Client& client, MetricsRecorder& metrics);

  // The compiled program of `key` in memory, or null. Never waits for a
  // compile (one running for the key is not waited for) and never compiles.
  std::shared_ptr<const CachedProgram> find(const ProgramKey& key) { return memory_.find(key); }
  // The program of `key`: from memory, else from the disk tiers, else
  // lowered from `seq` and compiled (`lowered`: already lowered from it, as
  // a fused region is under its lock). `*hit`: found compiled in memory.
  // Compile errors name the sequence's op; lowering errors raise as they are.
  std::shared_ptr<const CachedProgram> get(const ProgramKey& key, const Sequence& seq, bool* hit,
                                           Program* lowered = nullptr);
  // Starts compiling `seq` (key `key`) on a background thread, unless it is
  // compiling already; false when it failed there before (the caller then
  // compiles in the foreground) or when it does not lower. Lowers here, so
  // `seq` need not outlive the call.
  bool compile_in_background(const ProgramKey& key, const Sequence& seq);
  // Waits for every background compile (async compile, compiles that lost a
  // race with the shared tier), then for the pending disk writes.
  void finish_background_work();

  size_t cached_programs() { return memory_.size(); }
  std::vector<std::string> key_hashes() { return memory_.key_hashes(); }
  // The persistent tiers (disabled when TORCH_PJRT_CACHE_DIR is off and no
  // shared tier is set).
  DiskCache& disk() { return *disk_; }
  // What the persistent tiers' fingerprint directory hashes: the plugin
  // and the build of this engine.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  // `key`'s program from the disk tiers, else compiled from `lower()`.
  std::shared_ptr<const CachedProgram> from_tiers(const ProgramKey& key, const std::function<Program()>& lower,
                                                  int device, const std::string& name, const std::string& summary);
  // Compiles a lowered program (waits for a compile slot).
  std::shared_ptr<const CachedProgram> compile(Program program, int device, const std::string& name);
  // A disk entry, deserialised; nullptr for none or a damaged one (dropped
  // from `tier`).
  std::shared_ptr<const CachedProgram> loaded(std::optional<DiskEntry> e, DiskCache::Tier tier, const std::string& hex,
                                              int device);
  // Compiles `program` on a thread of its own while `read` reads the shared
  // tier; returns whichever usable result comes first.
  std::shared_ptr<const CachedProgram> race(DiskCache::SharedRead& read, const ProgramKey& key, const std::string& hex,
                                            Program program, int device, const std::string& name, bool* from_shared);

  runtime::Client& client_;
  MetricsRecorder& metrics_;
  std::string fingerprint_;
  ProgramCache memory_;
  std::unique_ptr<DiskCache> disk_;
  // Compile slots: at most one compile per core at once.
  std::mutex slots_mu_;
  std::condition_variable slot_free_;
  int free_slots_ = 1;
  std::atomic<int> background_{0};  // background compile threads still running
  // Async compile: keys compiling in the background, or failed there.
  std::mutex async_mu_;
  std::unordered_set<ProgramKey, ProgramKeyHash> async_compiling_, async_failed_;
};

}  // namespace torch_pjrt::engine
