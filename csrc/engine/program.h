// One StableHLO program from a sequence of op calls, and its signature.
//
// ProgramBuilder lowers N calls through the lowering table into one module.
// Eager execution builds N = 1; fused regions and compiled graphs build more
// from the same builder. Calls of a sequence communicate through storages: a
// call that reads a slot an earlier call wrote sees the written value inside
// the program. The module's parameters are the storages the sequence reads
// (each distinct slot once, as its flat buffer), the runtime scalars and RNG
// states of its calls, and the offsets of the views it reaches at an offset.
// Its results are the fresh tensors, the final value of every storage it
// writes, and one i1 per runtime check.
//
// A Signature says what each parameter and result is, in terms of the calls
// (argument k of call c, the i-th distinct slot, the j-th tensor reference),
// never of pointers, so it can be written as text and read back by another
// process together with the compiled program.
//
// Thread-safety: a ProgramBuilder is used by one thread; a Signature is a
// plain value.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/bucket_plan.h"
#include "engine/call.h"

namespace torch_pjrt::engine {

struct Signature {
  // ViewShape: a bucketed view's true sizes then strides (i64[2 * rank]);
  // ResultShape: a bucketed fresh result's true sizes (i64[rank]).
  enum class Param : uint8_t { Slot, Scalar, Rng, Offset, ViewShape, ResultShape };
  struct ParamSource {
    Param kind;
    // Slot: distinct slot; Scalar, Rng: argument of `call`; Offset,
    // ViewShape: tensor reference; ResultShape: fresh result
    int32_t index;
    int32_t call;  // Scalar, Rng: the call of the sequence
  };
  enum class Output : uint8_t { Fresh, SlotWrite, Check };
  struct OutputSink {
    Output kind;
    int32_t index;  // Fresh: fresh result; SlotWrite: distinct slot; Check: check
  };
  struct CheckInfo {
    std::string message;
    lowering::ErrorKind kind;
    int32_t call = 0;  // the call of the sequence that made the check
  };

  std::vector<ParamSource> params;
  std::vector<DType> slot_dtypes;  // the element type each distinct slot is read and written as
  std::vector<OutputSink> outputs;
  // A bucketed program's fresh result with dynamic dims has them at their
  // bounds (the buffer holds its elements at the bounds: its capacity).
  std::vector<hlo::TensorType> fresh_types;
  std::vector<int32_t> fresh_calls;  // the call that produced each fresh result
  std::vector<CheckInfo> checks;
  // Checks of Python scalar arguments alone, made on the host before the run.
  struct ScalarCheck {
    int32_t call;
    int32_t arg;
    DType fits;
    std::string message;
  };
  std::vector<ScalarCheck> scalar_checks;
  // (parameter, output) pairs: the slot's old buffer may be donated to the
  // output that overwrites it (the program aliases them).
  std::vector<std::pair<int32_t, int32_t>> donations;

  // A text form that deserialize() reads back into an equal Signature.
  std::string serialize() const;
  // Throws std::runtime_error on text serialize() did not write.
  static Signature deserialize(const std::string& text);
  bool operator==(const Signature& o) const;
};

struct Program {
  std::string module_text;
  Signature signature;
};

// Numbers the distinct slots of a sequence of calls in order of first
// reference (the numbering keys and signatures use).
class SlotNumbering {
 public:
  int index_of(Slot* slot);
  const std::vector<Slot*>& slots() const { return slots_; }
  void clear() { slots_.clear(), born.clear(), zeroed.clear(); }
  size_t count() const { return slots_.size(); }
  // Per slot: a static_values call's first reference wrote all of it (the
  // sequence made its value); see number_ref.
  std::vector<uint8_t> born;
  // Per slot: the sequence reads it as zeros, not as a parameter (it was
  // never written when first numbered, and zero_unwritten); see number_ref.
  std::vector<uint8_t> zeroed;
  // False for a sequence whose program is kept and run again with other
  // storages (a compiled graph's capture): every storage it reads is then a
  // parameter.
  bool zero_unwritten = true;

 private:
  std::vector<Slot*> slots_;
};

// Numbers `r`'s slot in `numbering` (a SlotNumbering, or a fused Region),
// as a `target` of `call` or an argument. Returns its number and whether
// `call` reaches it at a fixed offset: a static_values call's view of a
// storage the sequence made (its first reference, by a static_values call,
// wrote all of it). On first reference it also decides whether the sequence
// reads the slot as zeros (`zeroed`): a storage never written reads as
// zeros, and making them inside the program saves uploading them. Program
// keys (cache.cc) and ProgramBuilder decide both here alike; a slot is
// written only once (Slot::never_written), so a builder that numbers the
// calls after their key was made decides zeros only where the key did.
template <typename Numbering>
std::pair<int, bool> number_ref(Numbering& numbering, const OpCall& call, const TensorRef& r, bool target) {
  const size_t before = numbering.count();
  const int s = numbering.index_of(r.slot);
  if (static_cast<size_t>(s) == before) numbering.zeroed[s] = numbering.zero_unwritten && r.slot->never_written();
  if (!call.static_values) return {s, false};
  if (static_cast<size_t>(s) == before) {
    numbering.born[s] = target && access_of(r.view, storage_numel(r)) == Access::Whole;
    return {s, false};
  }
  return {s, numbering.born[s] != 0};
}

class ProgramBuilder {
 public:
  // `precision`: of the float32 matmuls and convolutions it lowers.
  // `zero_unwritten`: SlotNumbering::zero_unwritten.
  explicit ProgramBuilder(hlo::Precision precision = hlo::Precision::Default, bool zero_unwritten = true) {
    b_.set_precision(precision);
    numbering_.zero_unwritten = zero_unwritten;
  }
  // Lowers `call` after the calls added before it, bucketed by `plan` when
  // given (bucket.h; its refs in `call`'s for_each_ref order), which lives
  // while the builder does. Throws lowering::LoweringError for arguments its
  // lowering refuses.
  void add(const OpCall& call, const BucketPlan* plan = nullptr);
  // The module and its signature; the builder is spent. Storages marked in
  // `dead` (by distinct slot; may be null) are not results: nothing reads
  // what the sequence wrote into them.
  Program finish(const std::vector<uint8_t>* dead = nullptr);
  // The distinct slots of the calls added so far, in their numbering.
  const std::vector<Slot*>& slots() const { return numbering_.slots(); }

 private:
  struct SlotValue {
    hlo::Value flat;  // the slot's current value in the program
    bool has_value = false;
    bool read = false;  // a parameter
    bool written = false;
    int param = -1;  // its parameter index when read
    int64_t numel = 0;
    // A bucketed fresh result's value before it was compacted into `flat`
    // (fit_to_buckets), for the arguments that forward it; cleared by any
    // other write.
    hlo::Value fitted;
    bool has_fitted = false;
  };
  SlotValue& slot_value(const TensorRef& r, int s, std::string_view op);
  // Makes slot `s`'s flat value a parameter (its first read in the program),
  // or zeros for a slot the numbering zeroed.
  void read_slot(SlotValue& v, DType dtype, int s);
  // The i64 offset of reference `r` read or written by `access`: a
  // parameter, or a constant when `fixed` (a static_values call's view of a
  // storage the sequence made); none when the access takes no offset.
  // Counts the reference either way.
  hlo::Value offset_param(const TensorRef& r, Access access, bool fixed = false);
  // Tensor reference `ref`'s bucketing, or nullptr when it is read exactly.
  const BucketedRef* bucketed_ref(int32_t ref) const;
  // The true sizes and strides of bucketed reference `ref` (rank `rank`).
  hlo::Value view_shape_param(int32_t ref, size_t rank);
  // The steps of add(): the value of an argument view of `call`; its
  // arguments as the lowering sees them; a fresh result `v`; a result `v`
  // written into `target`, one of its views; the lowering's checks.
  hlo::Value read_arg(const OpCall& call, const TensorRef& r);
  std::vector<lowering::Arg> lower_args(const OpCall& call);
  void store_fresh(const OpCall& call, hlo::Value v);
  void store_target(const OpCall& call, const TensorRef& target, hlo::Value v);
  // A fused region's bucketed fresh result `v`, written into its new storage.
  void store_bucketed_fresh(const OpCall& call, const TensorRef& target, const BucketedRef& bucketed, hlo::Value v);
  void record_checks(const lowering::Context& cx);

  const BucketPlan* plan_ = nullptr;  // the call being added's
  int32_t plan_ref0_ = 0;             // its first tensor reference
  int32_t plan_fresh0_ = 0;           // its first fresh result
  hlo::Builder b_;
  Signature sig_;
  SlotNumbering numbering_;
  std::vector<SlotValue> values_;
  std::vector<hlo::Value> fresh_, checks_;
  int32_t calls_ = 0;
  int32_t refs_ = 0;
};

}  // namespace torch_pjrt::engine
