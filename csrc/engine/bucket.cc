#include "engine/bucket.h"

#include <algorithm>

#include "engine/key.h"

namespace torch_pjrt::engine {

using hlo::TensorType;
using hlo::Value;

int64_t bucket_of(int64_t n, int64_t multiple) {
  if (multiple > 0) return std::max<int64_t>(1, (n + multiple - 1) / multiple) * multiple;
  if (n > kBucketCap) return (n + kBucketCap - 1) / kBucketCap * kBucketCap;
  int64_t b = 1;
  while (b < n) b *= 2;
  return b;
}

BucketPlan& bucket_scratch() {
  thread_local BucketPlan plan;
  return plan;
}

void bucket_results(BucketPlan& plan, const Signature& exact, int64_t multiple) {
  plan.results.clear();
  for (const auto& t : exact.fresh_types) {
    plan.results.push_back(t.dims);
    for (int64_t& d : plan.results.back()) d = bucket_of(d, multiple);
  }
}

bool bucketed_signature_fits(const Signature& bucketed, const Signature& exact) {
  if (bucketed.checks.size() != exact.checks.size()) return false;
  for (size_t k = 0; k < exact.checks.size(); ++k)
    if (bucketed.checks[k].kind != exact.checks[k].kind || bucketed.checks[k].call != exact.checks[k].call)
      return false;
  if (bucketed.fresh_types.size() != exact.fresh_types.size()) return false;
  for (size_t k = 0; k < exact.fresh_types.size(); ++k) {
    const auto &b = bucketed.fresh_types[k], &e = exact.fresh_types[k];
    if (b.dtype != e.dtype || b.rank() != e.rank()) return false;
    for (int64_t d = 0; d < e.rank(); ++d)
      if (b.is_dynamic(d) ? e.dims[d] > b.dims[d] : e.dims[d] != b.dims[d]) return false;
  }
  return true;
}

bool refuses_dynamic(const std::exception& e) {
  const auto* r = dynamic_cast<const runtime::Error*>(&e);
  return !r || !r->out_of_memory();
}

void ShapeHistory::settle(Record& r, const std::vector<int64_t>& shapes, const std::vector<uint8_t>& is_size) {
  // A size that stays dynamic: a growing length, whose first kDistinct
  // values include n, n + 1, n + 2 taken one after another. Every other
  // dynamic size settles, also small sizes one apart that a loop cycles
  // through (spatial sizes 2 and 1, the head counts and widths of several
  // models' layers: 4, 32, 2, 24, 7, 3, 1).
  auto stays = [&](size_t i) {
    if (r.dynamic[i] == kGraph) return true;
    if (r.dynamic[i] != kAdjacent) return false;
    const int64_t* seen = &r.seen[i * kDistinct];
    for (int k = 0; k + 2 < kDistinct && seen[k + 2] != kNone; ++k)
      if (seen[k + 1] == seen[k] + 1 && seen[k + 2] == seen[k] + 2) return true;
    return false;
  };
  bool settles = false, sizes_stay = false;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!is_size[i] || !r.dynamic[i]) continue;
    (stays(i) ? sizes_stay : settles) = true;
  }
  if (!settles) return;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!r.dynamic[i] || (is_size[i] ? stays(i) : sizes_stay)) continue;
    r.dynamic[i] = 0;
    std::fill_n(&r.seen[i * kDistinct], kDistinct, kNone);
    r.seen[i * kDistinct] = shapes[i];
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool ShapeHistory::Record::remember(uint64_t shape) {
  auto it = std::find(recent.begin(), recent.end(), shape);
  const bool fresh = it == recent.end();
  if (fresh) {
    if (recent.size() < kRecent) recent.push_back(shape);
    it = recent.end() - 1;
    *it = shape;
  }
  std::rotate(recent.begin(), it, it + 1);
  return fresh;
}

namespace {

// Which positions of a call's recorded shapes (per reference with a slot:
// sizes, strides, storage elements) are sizes.
void size_positions(const OpCall& call, size_t n, std::vector<uint8_t>& is_size) {
  is_size.assign(n, 0);
  size_t at = 0;
  for_each_ref(call, [&](const TensorRef& ref, bool) {
    if (!ref.slot) return;
    const size_t rank = ref.view.sizes.size();
    for (size_t d = 0; d < rank; ++d) is_size[at + d] = 1;
    at += 2 * rank + 1;
  });
}

}  // namespace

Shapes ShapeHistory::observe(const OpCall& call, BucketPlan& plan, bool eager, int64_t multiple) {
  thread_local std::vector<int64_t> shapes;
  shapes.clear();
  const uint64_t h = shape_free_hash(call, shapes);
  const uint64_t shape = fnv_extend(kFnvBasis, shapes.data(), shapes.size());
  std::lock_guard<std::mutex> g(mu_);
  if (records_.size() > 65536) records_.clear();
  auto [it, first] = records_.try_emplace(h);
  Record& r = it->second;
  if (first || r.last.size() != shapes.size()) {
    r.last = shapes;
    r.seen.assign(shapes.size() * kDistinct, kNone);
    r.dynamic.assign(shapes.size(), 0);
    for (size_t i = 0; i < shapes.size(); ++i) r.seen[i * kDistinct] = shapes[i];
    r.recent.assign(1, shape);
    r.last_new = ++clock_;
    r.gap = 0;
    return Shapes::Static;
  }
  const uint64_t now = ++clock_;
  const bool fresh = r.remember(shape);
  if (fresh) {
    r.gap = now - r.last_new;
    r.last_new = now;
  }
  // Which positions are sizes: only they follow the rules below. Strides
  // become dynamic with the sizes, and storage sizes never do: the tensors
  // that one op structure serves have storages of many sizes (an optimizer
  // over its parameters).
  thread_local std::vector<uint8_t> is_size;
  size_positions(call, shapes.size(), is_size);
  if (now - r.last_new >= 2 * r.gap + kSettleCalls) settle(r, shapes, is_size);
  if (fresh) mark_sizes(r, shapes, is_size, eager);
  mark_strides(call, r, shapes);
  bool any_dynamic = false;
  for (uint8_t d : r.dynamic) any_dynamic |= d != 0;
  r.last = shapes;
  if (!any_dynamic) return Shapes::Static;
  if (!call.op->shape_generic) return Shapes::Dynamic;
  return plan_buckets(call, r, h, multiple, plan);
}

void ShapeHistory::mark_sizes(Record& r, const std::vector<int64_t>& shapes, const std::vector<uint8_t>& is_size,
                              bool eager) {
  // A size is dynamic once a new shape gives it a value one off a value it
  // took (a length that grows by one, a sweep over lengths), or more than
  // kDistinct values. Layers of a few fixed widths, which one op structure
  // serves in turn, stay exact.
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!is_size[i] || shapes[i] == r.last[i]) continue;
    int64_t* seen = &r.seen[i * kDistinct];
    int k = 0;
    bool adjacent = false;
    for (; k < kDistinct && seen[k] != kNone && seen[k] != shapes[i]; ++k)
      adjacent |= seen[k] == shapes[i] - 1 || seen[k] == shapes[i] + 1;
    if (k < kDistinct && seen[k] == shapes[i]) continue;  // seen before
    if (k < kDistinct) seen[k] = shapes[i];
    if (!r.dynamic[i] && (adjacent || k == kDistinct || eager))
      r.dynamic[i] = eager ? kGraph : adjacent ? kAdjacent : kMany;
  }
}

void ShapeHistory::mark_strides(const OpCall& call, Record& r, const std::vector<int64_t>& shapes) {
  // A view's strides follow its sizes: once a size is dynamic, so is every
  // stride that changed.
  bool sizes_dynamic = false;
  size_t at = 0;
  for_each_ref(call, [&](const TensorRef& ref, bool) {
    if (!ref.slot) return;
    const size_t rank = ref.view.sizes.size();
    for (size_t d = 0; d < rank; ++d) sizes_dynamic |= r.dynamic[at + d] != 0;
    at += 2 * rank + 1;
  });
  if (!sizes_dynamic) return;
  at = 0;
  for_each_ref(call, [&](const TensorRef& ref, bool) {
    if (!ref.slot) return;
    const size_t rank = ref.view.sizes.size();
    for (size_t d = 0; d < rank; ++d) {
      size_t i = at + rank + d;
      if (shapes[i] != r.seen[i * kDistinct] && !r.dynamic[i]) r.dynamic[i] = kFollows;
    }
    at += 2 * rank + 1;
  });
}

Shapes ShapeHistory::plan_buckets(const OpCall& call, const Record& r, uint64_t structure, int64_t multiple,
                                  BucketPlan& plan) {
  plan.structure = structure;
  plan.refs.clear();
  size_t pos = 0;
  bool any = false, ok = true;
  for_each_ref(call, [&](const TensorRef& ref, bool) {
    BucketedRef b;
    if (ref.slot) {
      const ViewSpec& v = ref.view;
      const size_t rank = v.sizes.size();
      b.padded = v.sizes;
      // Read bucketed when a dynamic size is more than 1 or a dynamic
      // stride steps over more than one element; otherwise the exact
      // program of these sizes serves every call (a one-token step). A
      // size at its bucket is read bucketed too: its result then has the
      // capacity of its own bucket, as every other step's has, and the
      // next step reads a storage of the size it always reads.
      for (size_t d = 0; d < rank; ++d) {
        if (r.dynamic[pos + rank + d] && v.sizes[d] > 1) b.dynamic = true;
        // A size of 1 is read exactly (its bucket is 1): XLA expands no
        // bounded dim, and a bucket-1 dim is one in every call.
        if (!r.dynamic[pos + d] || v.sizes[d] == 1) continue;
        if (rank > 32 || v.sizes[d] == 0) ok = false;
        b.dynamic_sizes |= 1u << d;
        b.padded[d] = bucket_of(v.sizes[d], multiple);
        if (v.sizes[d] > 1) b.dynamic = true;
      }
      if (!b.dynamic) {
        b.dynamic_sizes = 0;
        b.padded = v.sizes;
      }
      if (b.dynamic && v.numel() == 0) ok = false;
      pos += 2 * rank + 1;
    }
    any |= b.dynamic;
    plan.refs.push_back(std::move(b));
  });
  if (!any || !ok) return Shapes::Dynamic;
  uint64_t pattern = kFnvBasis;
  for (const BucketedRef& b : plan.refs) {
    const int64_t w = b.dynamic ? int64_t{b.dynamic_sizes} + 1 : 0;
    pattern = fnv_extend(pattern, &w, 1);
  }
  plan.pattern = pattern;
  for (uint64_t p : r.refused)
    if (p == pattern) return Shapes::Dynamic;
  return Shapes::Bucketed;
}

void ShapeHistory::clear() {
  std::lock_guard<std::mutex> g(mu_);
  records_.clear();
  clock_ = 0;
}

void ShapeHistory::refuse(const BucketPlan& plan) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = records_.find(plan.structure);
  if (it != records_.end() && it->second.refused.size() < 64) it->second.refused.push_back(plan.pattern);
}

uint64_t UploadHistory::key_of(hlo::DType dtype, const hlo::Dims& sizes, size_t dim) {
  thread_local std::vector<int64_t> words;
  words.assign({static_cast<int64_t>(dtype), static_cast<int64_t>(dim)});
  for (size_t e = 0; e < sizes.size(); ++e) words.push_back(e == dim ? -1 : sizes[e]);
  return fnv_extend(kFnvBasis, words.data(), words.size());
}

void UploadHistory::mark(hlo::DType dtype, const hlo::Dims& sizes, const hlo::Dims& dims, int64_t multiple) {
  std::lock_guard<std::mutex> g(mu_);
  if (records_.size() > 65536) records_.clear();
  for (int64_t d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(sizes.size())) continue;
    Record& r = records_[key_of(dtype, sizes, d)];
    r.dynamic = true;
    r.multiple = multiple;
  }
}

int64_t UploadHistory::capacity(hlo::DType dtype, const hlo::Dims& sizes, bool eager, int64_t multiple) {
  const size_t rank = sizes.size();
  if (rank == 0 || rank > 32) return 0;
  int64_t capacity = 1, numel = 1;
  std::lock_guard<std::mutex> g(mu_);
  if (records_.size() > 65536) records_.clear();
  for (size_t d = 0; d < rank; ++d) {
    Record& r = records_[key_of(dtype, sizes, d)];
    const int64_t n = sizes[d];
    if (!r.dynamic && std::find(r.seen.begin(), r.seen.end(), n) == r.seen.end()) {
      const bool adjacent = std::find_if(r.seen.begin(), r.seen.end(),
                                         [&](int64_t v) { return v == n - 1 || v == n + 1; }) != r.seen.end();
      if (adjacent || static_cast<int>(r.seen.size()) == kDistinct || (eager && !r.seen.empty())) {
        r.dynamic = true;
        if (eager) r.multiple = multiple;
      } else {
        r.seen.push_back(n);
      }
    }
    numel *= n;
    capacity *= r.dynamic && n > 0 ? bucket_of(n, r.multiple) : n;
  }
  return capacity > numel ? capacity : 0;
}

void UploadHistory::clear() {
  std::lock_guard<std::mutex> g(mu_);
  records_.clear();
}

}  // namespace torch_pjrt::engine
