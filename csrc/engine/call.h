// What the torch glue hands the engine: one ATen call as plain data.
//
// An OpCall names its op (an OpDef: ATen name and lowering), its device, its
// arguments in schema order and the views its results are written into.
// Tensors are views of storage slots; Python numbers and zero-dim host
// tensors are runtime scalars; dims, flags and dtypes are static. Runtime
// values (scalars, RNG seeds and offsets, view offsets) become program
// parameters and never enter a program key, except the offsets of views of
// a compiled graph's intermediates, which the graph fixes
// (OpCall::static_values).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "engine/slot.h"
#include "engine/view.h"
#include "lowering/context.h"

namespace torch_pjrt::engine {

using hlo::DType;

// One argument of a call as the glue hands it over.
struct CallArg {
  using Kind = lowering::Arg::Kind;
  Kind kind = Kind::None;
  // Tensor (and each element of TensorList): a view of a slot.
  struct TensorRef {
    Slot* slot = nullptr;
    ViewSpec view;
  };
  TensorRef tensor;
  std::vector<TensorRef> list;
  std::vector<int64_t> present;  // Tensor?[]: 1 per position with a tensor
  // Scalar: a rank-0 runtime value (f64/i64/bool/c128 for Python numbers, or
  // the dtype of a zero-dim host tensor when `host_tensor`), its bytes in
  // host order (up to 16: a complex128).
  DType scalar_dtype = DType::F64;
  bool host_tensor = false;
  uint8_t scalar_bytes[16] = {};
  // Scalar: a program constant, its bytes part of the key (lowering::Traits::fixed_values).
  bool fixed = false;
  // Static values (part of the key).
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::string s;
  // Rng: seed and offset for this call.
  uint64_t rng[2] = {0, 0};
};
using TensorRef = CallArg::TensorRef;

// A Python-number Scalar's real value (bool, int64 or double), or nullopt
// for a complex number or a zero-dim host tensor.
inline std::optional<double> real_scalar(const CallArg& a) {
  if (a.kind != CallArg::Kind::Scalar || a.host_tensor) return std::nullopt;
  switch (a.scalar_dtype) {
    case DType::Bool:
      return a.scalar_bytes[0] ? 1.0 : 0.0;
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, a.scalar_bytes, 8);
      return static_cast<double>(v);
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, a.scalar_bytes, 8);
      return v;
    }
    default:
      return std::nullopt;
  }
}

// A registered op: its ATen name and lowering. Lives for the process.
// A string as key words: its length, then its bytes 8 to a word.
inline std::vector<int64_t> string_words(const std::string& s) {
  std::vector<int64_t> w{static_cast<int64_t>(s.size())};
  for (size_t i = 0; i < s.size(); i += 8) {
    int64_t chunk = 0;
    std::memcpy(&chunk, s.data() + i, std::min<size_t>(8, s.size() - i));
    w.push_back(chunk);
  }
  return w;
}

struct OpDef {
  OpDef(std::string name, lowering::LowerFn lower)
      : name(std::move(name)), name_words(string_words(this->name)), lower(lower) {}
  std::string name;                 // "aten::add.Tensor"
  std::vector<int64_t> name_words;  // string_words(name), as program keys hold it
  lowering::LowerFn lower;
  bool shape_generic = false;     // lowering::Traits::shape_generic
  std::atomic<int64_t> calls{0};  // programs run for this op (metrics()["op_calls"])
};

struct OpCall {
  const OpDef* op = nullptr;
  int device = 0;
  std::vector<CallArg> args;
  // One entry per op result: the view the result is written into (in-place
  // and out= variants), or slot == nullptr for a fresh output tensor.
  std::vector<TensorRef> targets;
  // Strict mode: hand the program's runtime checks back in CallResult
  // instead of queueing them, for a caller that still validates the call
  // after it ran (out= casts) and queues them with add_checks() only if the
  // call succeeds, so a refused call leaves no check behind.
  bool defer_checks = false;
  // Fused mode: the call may join a region (its caller handles a deferred
  // result). Calls whose caller reads a result on the host at once
  // (data-dependent sizes, aten::equal) run at once instead. A call with
  // defer_checks joins only when it makes no runtime checks, and a caller
  // that validates afterwards marks fusable only a call with no writes of
  // its own: a refused call then leaves nothing behind.
  bool fusable = false;
  // A call of a compiled graph with no symbolic sizes: the views it reaches
  // in storages an earlier call of its sequence made (a whole write: the
  // graph's intermediates) sit at offsets the graph fixes, so they are
  // program constants and key words instead of parameters, and XLA fuses
  // them (a split's q, k and v are static slices). Views of the graph's
  // inputs keep their runtime offsets.
  bool static_values = false;
};

// Every tensor reference of a call, in the fixed order that numbers them in
// program keys and signatures: tensor arguments (list elements in order),
// then targets that have a slot.
template <typename Fn>
void for_each_ref(const OpCall& call, Fn&& fn) {
  for (const CallArg& a : call.args) {
    if (a.kind == CallArg::Kind::Tensor) fn(a.tensor, false);
    if (a.kind == CallArg::Kind::TensorList)
      for (const auto& t : a.list) fn(t, false);
  }
  for (const auto& t : call.targets)
    if (t.slot) fn(t, true);
}

// Elements of the storage a reference views, counted in the view's dtype.
inline int64_t storage_numel(const TensorRef& r) { return r.slot->nbytes / hlo::byte_size(r.view.dtype); }

}  // namespace torch_pjrt::engine
