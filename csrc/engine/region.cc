#include "engine/region.h"

#include <algorithm>

#include "engine/key_words.h"

namespace torch_pjrt::engine {

int Region::index_of(Slot* slot) {
  int32_t i = slot->region_index_.load(std::memory_order_relaxed);
  if (i >= 0) return i;
  i = static_cast<int32_t>(slots.size());
  slots.push_back(slot);
  slot_dtypes.push_back(DType::U8);  // set by add()
  dead.push_back(0);
  born.push_back(0);
  zeroed.push_back(0);
  writers.push_back(nullptr);
  fresh_writes_.emplace_back();
  slot->region_index_.store(i, std::memory_order_release);
  return i;
}

void Region::mark_forwards(const OpCall& call, BucketPlan& plan) {
  size_t i = 0;
  for_each_ref(call, [&](const TensorRef& r, bool target) {
    BucketedRef& b = plan.refs.at(i++);
    if (target || !b.dynamic || b.fresh || !r.slot) return;
    const int32_t s = r.slot->region_index();
    if (s < 0 || static_cast<size_t>(s) >= slots.size() || slots[s] != r.slot) return;
    const FreshWrite& f = fresh_writes_[s];
    b.forward = f.valid && f.ref.padded == b.padded && f.ref.dynamic_sizes == b.dynamic_sizes &&
                f.view.dtype == r.view.dtype && f.view.sizes == r.view.sizes && f.view.strides == r.view.strides &&
                f.view.offset == r.view.offset;
  });
}

void Region::record_writes(const OpCall& call, const BucketPlan* plan) {
  size_t i = 0;
  for_each_ref(call, [&](const TensorRef& r, bool target) {
    const BucketedRef* b = plan ? &plan->refs.at(i) : nullptr;
    ++i;
    if (!target) return;
    FreshWrite& f = fresh_writes_[r.slot->region_index()];
    f.valid = b && b->fresh && b->dynamic;
    if (f.valid) f.view = r.view, f.ref = *b;
  });
}

void Region::add(OpCall call, std::string location, std::shared_ptr<BucketPlan> plan) {
  const size_t old_words = words_.size(), old_slots = slots.size();
  if (plan) mark_forwards(call, *plan);
  try {
    if (plan)
      append_bucket_call_words(words_, call, *plan, *this);
    else
      append_call_words(words_, call, *this);
  } catch (...) {
    words_.resize(old_words);
    for (size_t i = old_slots; i < slots.size(); ++i) slots[i]->region_index_.store(-1);
    slots.resize(old_slots);
    slot_dtypes.resize(old_slots);
    dead.resize(old_slots);
    born.resize(old_slots);
    zeroed.resize(old_slots);
    writers.resize(old_slots);
    fresh_writes_.resize(old_slots);
    throw;
  }
  record_writes(call, plan.get());
  for_each_ref(call, [&](const TensorRef& r, bool target) {
    int32_t i = r.slot->region_index();
    if (static_cast<size_t>(i) >= old_slots) slot_dtypes[i] = r.view.dtype;
    if (target) writers[i] = call.op->name.c_str();
  });
  hash_ = fnv_extend(hash_, words_.data() + old_words, words_.size() - old_words);
  call.defer_checks = false;
  calls.push_back(std::move(call));
  locations.push_back(std::move(location));
  plans.push_back(std::move(plan));
}

Plans Region::plan_pointers() const {
  Plans p;
  for (const auto& plan : plans) p.push_back(plan.get());
  return p;
}

const DType* Region::dtype_of(const Slot* slot) const {
  int32_t i = slot->region_index();
  return i >= 0 && static_cast<size_t>(i) < slots.size() && slots[i] == slot ? &slot_dtypes[i] : nullptr;
}

ProgramKey Region::key() const {
  ProgramKey k;
  k.words = words_;
  std::vector<int64_t> tail{-2};  // the dead storages
  for (size_t i = 0; i < dead.size(); ++i)
    if (dead[i]) tail.push_back(static_cast<int64_t>(i));
  k.words.insert(k.words.end(), tail.begin(), tail.end());
  k.hash = fnv_extend(hash_, tail.data(), tail.size());
  return k;
}

OpCall Region::recycled() { return next_spare_ < spare_.size() ? std::move(spare_[next_spare_++]) : OpCall(); }

void Region::seal() {
  for (Slot* slot : slots) slot->seal();
  sealed_ = true;
}

std::vector<Slot*> Region::clear() {
  std::vector<Slot*> gone;
  for (size_t i = 0; i < slots.size(); ++i) {
    const bool released = sealed_ ? slots[i]->unseal() : (slots[i]->region_index_.store(-1), false);
    if (dead[i] || released) gone.push_back(slots[i]);
  }
  sealed_ = false;
  // Call i of the next region takes spare i (recycled): every spare below
  // this region's length was taken, and the longer regions before left the
  // rest.
  if (spare_.size() < calls.size()) spare_.resize(std::min(calls.size(), kMaxSpares));
  for (size_t i = 0; i < calls.size() && i < spare_.size(); ++i) spare_[i] = std::move(calls[i]);
  next_spare_ = 0;
  calls.clear();
  locations.clear();
  plans.clear();
  slots.clear();
  slot_dtypes.clear();
  dead.clear();
  born.clear();
  zeroed.clear();
  writers.clear();
  fresh_writes_.clear();
  fresh_bytes = 0;
  words_.clear();
  hash_ = kFnvBasis;
  return gone;
}

int64_t StreamPeriod::push(uint64_t h) {
  const size_t i = s_.size();
  s_.push_back(h);
  int32_t k = i == 0 ? 0 : pi_[i - 1];
  while (k > 0 && s_[k] != h) k = pi_[k - 1];
  if (i > 0 && s_[k] == h) ++k;
  pi_.push_back(k);
  const int64_t n = static_cast<int64_t>(i + 1), p = n - k;
  return k >= p ? p : 0;
}

int64_t RecentPeriod::push(uint64_t h) {
  if (ring_.empty()) {
    ring_.assign(2 * kMaxPeriod, 0);
    run_.assign(kMaxPeriod, 0);
  }
  // ring_ holds each hash twice (at i and i + kMaxPeriod), so the calls p
  // back, p = 1..kMaxPeriod, lie in one contiguous range, read backwards:
  // run_[p - 1] pairs with before[kMaxPeriod - p].
  const size_t at = static_cast<size_t>(n_ % kMaxPeriod);
  const uint64_t* before = ring_.data() + at;
  int64_t* run = run_.data();
  for (size_t j = 0; j < static_cast<size_t>(kMaxPeriod); ++j)
    run[kMaxPeriod - 1 - j] = before[j] == h ? run[kMaxPeriod - 1 - j] + 1 : 0;
  ring_[at] = ring_[at + kMaxPeriod] = h;
  ++n_;
  if (period_ > 0 && run_[period_ - 1] == 0) period_ = 0;
  const int64_t reach = std::min(n_ - 1, kMaxPeriod);
  for (int64_t p = 1; period_ == 0 && p <= reach; ++p)
    if (run_[p - 1] >= std::max(p, kMinRun)) period_ = p, found_at_ = n_;
  return period_;
}

void RecentPeriod::reset() {
  std::fill(run_.begin(), run_.end(), 0);
  n_ = period_ = found_at_ = 0;
}

void StreamPeriod::reset() {
  s_.clear();
  pi_.clear();
}

}  // namespace torch_pjrt::engine
