// Fused eager mode: the open region and the stream period that cuts it.
//
// In fused mode an op call does not run: it joins the open Region (the call,
// moved in, its fresh results turned into whole writes of their new
// storages). The region numbers the storages its calls reach in order of
// first reference, exactly as ProgramBuilder does, and extends its key words
// and their hash as each call joins, so flushing a region seen before costs a
// hash lookup and no string work. At a flush the engine (engine.h) lowers
// the calls with one ProgramBuilder into one program, runs it, and stores
// only the storages that are still referenced: a storage that died while the
// region held it is marked dead, its value is not a result (XLA may fuse it
// away), and the key lists the dead storages.
//
// StreamPeriod finds the period of the op stream (the structural hash of
// each call, in order) with the prefix function of Knuth-Morris-Pratt. Once
// the stream has repeated a period twice, the engine cuts regions at
// multiples of it, so a loop that never syncs still runs the same few region
// shapes every step. Cuts depend on the op stream alone, never on time or
// thread scheduling: ranks running the same code cut the same regions.
//
// Thread-safety: none of its own; the fused scheduler (fused.h) uses the
// open Region and the periods under its region lock only, and a sealed
// Region from the one thread that runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/bucket_plan.h"
#include "engine/call.h"
#include "engine/key.h"

namespace torch_pjrt::engine {

class Region {
 public:
  Region() = default;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  bool empty() const { return calls.empty(); }
  size_t count() const { return slots.size(); }
  // The region number of `slot`, numbering it (and marking it as referenced
  // by the open region) on first sight. Used by append_call_words.
  int index_of(Slot* slot);
  // Appends `call` with its key words. `location` is the user's
  // Python line for a call with runtime checks ("" otherwise). `plan`: the
  // call runs bucketed by it (bucket.h; its refs cover the call's fresh
  // results, which are whole writes here), and its key words hold bucketed
  // sizes. Throws lowering::LoweringError (and leaves the region as it was)
  // for a view outside its storage.
  // Marks the plan's arguments that can forward a bucketed fresh result of
  // an earlier call (BucketedRef::forward).
  void add(OpCall call, std::string location, std::shared_ptr<BucketPlan> plan = nullptr);
  // Per call, its bucketing or nullptr (for Engine::lower).
  Plans plan_pointers() const;
  // The dtype the region reads and writes `slot` as, or nullptr when the
  // region does not reference it.
  const DType* dtype_of(const Slot* slot) const;
  // Marks a referenced storage dead (its tensor is gone).
  void mark_dead(const Slot* slot) { dead[slot->region_index()] = 1; }
  // The key of the region as it stands: its words, then the dead storages.
  ProgramKey key() const;
  // Seals the region before it runs with the scheduler's lock released
  // (fused.h): every slot leaves the open region's numbering
  // (region_index -1) and is sealed by this thread (Slot::seal). The
  // region keeps its calls and numbering.
  void seal();
  // Forgets every call; unmarks (or unseals) every slot; returns the slots
  // to delete: the dead ones, and those released while sealed.
  std::vector<Slot*> clear();
  // An OpCall to move the next call into: the spent call at the same
  // position of earlier regions, whose vectors keep their capacity (in a
  // periodic stream, the same op), so that a loop's regions join calls
  // without allocating; or a new one.
  OpCall recycled();

  int device = 0;
  std::vector<OpCall> calls;
  std::vector<std::string> locations;                    // per call
  std::vector<std::shared_ptr<const BucketPlan>> plans;  // per call (null: exact)
  std::vector<Slot*> slots;                              // region numbering: first reference
  std::vector<DType> slot_dtypes;
  std::vector<uint8_t> dead;         // per slot
  std::vector<uint8_t> born;         // per slot: first referenced by a write of all of it (cache.cc)
  std::vector<uint8_t> zeroed;       // per slot: read as zeros (SlotNumbering::zeroed)
  std::vector<const char*> writers;  // per slot: the ATen name of the call that wrote it last (nullptr: none)
  bool zero_unwritten = true;        // SlotNumbering::zero_unwritten, for the calls that join
  int64_t fresh_bytes = 0;           // bytes of the fresh results joined so far

 private:
  std::vector<int64_t> words_;
  uint64_t hash_ = kFnvBasis;
  bool sealed_ = false;
  // Per slot: how a bucketed call wrote it as its fresh result, while no
  // other call wrote it since (an argument reading that view forwards it).
  struct FreshWrite {
    bool valid = false;
    ViewSpec view;
    BucketedRef ref;
  };
  std::vector<FreshWrite> fresh_writes_;
  // Spent calls by position: the last region's, then those of longer
  // regions before it, for recycled().
  std::vector<OpCall> spare_;
  size_t next_spare_ = 0;
  static constexpr size_t kMaxSpares = 1024;  // captured graphs make longer regions
  void mark_forwards(const OpCall& call, BucketPlan& plan);
  void record_writes(const OpCall& call, const BucketPlan* plan);
};

class StreamPeriod {
 public:
  // Appends one call's structural hash. Returns the stream's period once the
  // stream so far is that period repeated at least twice, else 0.
  int64_t push(uint64_t h);
  // Forgets the stream (at a sync point: the host saw a value, and what
  // follows starts a new stream).
  void reset();
  int64_t length() const { return static_cast<int64_t>(s_.size()); }

 private:
  std::vector<uint64_t> s_;
  std::vector<int32_t> pi_;  // prefix function
};

// The period of the stream's recent calls, for a stream whose start is not
// periodic (a loop entered after other work, with no sync point between):
// p is the period once each of the last max(p, kMinRun) calls equals the
// call p before it (the last two periods repeat), and it stays the period
// while each new call does too. When there is none, the smallest such p up
// to kMaxPeriod is taken.
class RecentPeriod {
 public:
  static constexpr int64_t kMaxPeriod = 256;
  static constexpr int64_t kMinRun = 32;
  // Appends one call's structural hash; returns the period, else 0.
  int64_t push(uint64_t h);
  // Calls since the period was found (0 at the call that found it).
  int64_t since_found() const { return n_ - found_at_; }
  int64_t length() const { return n_; }
  void reset();

 private:
  std::vector<uint64_t> ring_;  // the last kMaxPeriod hashes
  std::vector<int64_t> run_;    // per p: how many of the last calls equal the call p before each
  int64_t n_ = 0;
  int64_t period_ = 0;
  int64_t found_at_ = 0;
};

}  // namespace torch_pjrt::engine
