// How one call becomes key words (key.h): the definitions of
// append_call_words and append_bucket_call_words, templates over the
// numbering of storages (a SlotNumbering for one program's calls, or the
// fused Region as its calls join). Included by key.cc and region.cc only.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "engine/key.h"

namespace torch_pjrt::engine {

namespace key_words {

inline void push_string(std::vector<int64_t>& w, const std::string& s) {
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
inline constexpr int64_t kBucketedAccess = 64;

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

}  // namespace key_words

template <typename Numbering>
void append_call_words(std::vector<int64_t>& w, const OpCall& call, Numbering& numbering) {
  key_words::push_call(w, call, numbering);
}

template <typename Numbering>
void append_bucket_call_words(std::vector<int64_t>& w, const OpCall& call, const BucketPlan& plan,
                              Numbering& numbering) {
  w.push_back(-1);  // bucketed (an exact key holds its number of calls here)
  key_words::ViewWords vw{nullptr, &plan, 0};
  key_words::push_call(w, call, numbering, &vw);
  for (const auto& r : plan.results) {
    w.push_back(static_cast<int64_t>(r.size()));
    w.insert(w.end(), r.begin(), r.end());
  }
}

}  // namespace torch_pjrt::engine
