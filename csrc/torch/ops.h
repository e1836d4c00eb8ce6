// The op kernels of the torch glue, one file per job:
//   marshal.cc          schema arguments -> the engine's CallArgs, pooled OpCalls
//   lowered_kernel.cc   the one boxed kernel of every lowered op, in each variant
//   register.cc         which ATen schemas get a lowered kernel, as which variant
//   storage_kernels.cc  storage, view and copy kernels (explicit registrations)
//   fallback.cc         the CPU fallback of ops with no lowering
// This header is for those files only (the rest of the glue sees common.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>

#include "torch/common.h"

namespace torch_pjrt::glue {

using engine::CallArg;
using engine::OpCall;

// ---------------------------------------------------------------- marshal.cc

// "aten::add.Tensor" for an operator name.
std::string full_name(const c10::OperatorName& n);
[[noreturn]] void device_mismatch(const at::Tensor& a, c10::DeviceIndex device);

// How one schema argument is turned into a CallArg.
enum class ArgType {
  Tensor,
  OptTensorList,
  TensorList,
  Scalar,
  ScalarList,  // Scalar[]: its length here (Int), its runtime scalars appended after the schema's arguments
  Int,
  Ints,
  Bool,
  Bools,
  DType,
  String,
  Generator,
  Ignore
};
ArgType arg_type(const c10::TypePtr& type);

// A Python number (or wrapped number) as a runtime scalar argument.
void set_scalar(CallArg& a, const c10::Scalar& s);

// Tracks the call's device: the first tpu tensor decides it.
struct DeviceCheck {
  c10::DeviceIndex device = -1;
  void see(const at::Tensor& t) {
    if (!t.is_privateuseone()) return;
    if (device < 0)
      device = t.device().index();
    else if (t.device().index() != device)
      device_mismatch(t, device);
  }
};

// A tpu tensor as a view argument, or a CPU scalar as a runtime scalar;
// anything else is a device mismatch.
void set_tensor(CallArg& a, const at::Tensor& t, DeviceCheck& dc);

// OpCalls reused per thread, one per nesting level of lowered kernels (a
// kernel may run others: materialising a lazy conjugate, copying into out=),
// so that a warm call allocates no argument storage.
class PooledCall {
 public:
  PooledCall() {
    if (t_depth == t_pool.size()) t_pool.push_back(std::make_unique<OpCall>());
    call_ = t_pool[t_depth++].get();
  }
  ~PooledCall() {
    reset(*call_);
    --t_depth;
  }
  PooledCall(const PooledCall&) = delete;
  OpCall& operator*() { return *call_; }
  OpCall* operator->() { return call_; }
  // Sizes c.args to n. Arguments (with their vectors' storage) move between
  // c and those that calls of this thread left behind, so that a warm call
  // allocates nothing whatever its argument count.
  static void size_args(OpCall& c, size_t n) {
    while (c.args.size() > n) {
      if (t_spare_args.size() < kMaxSpare) t_spare_args.push_back(std::move(c.args.back()));
      c.args.pop_back();
    }
    while (c.args.size() < n) add_arg(c);
  }
  // Appends a default argument to c.args (see size_args).
  static CallArg& add_arg(OpCall& c) {
    if (t_spare_args.empty()) return c.args.emplace_back();
    c.args.push_back(std::move(t_spare_args.back()));
    t_spare_args.pop_back();
    return c.args.back();
  }
  // Appends to c.targets a view of `t`, in a reference whose storage a call
  // of this thread left behind (in-place foreach calls write long lists).
  static void add_target(OpCall& c, const at::Tensor& t) {
    if (t_spare_targets.empty()) {
      c.targets.emplace_back();
    } else {
      c.targets.push_back(std::move(t_spare_targets.back()));
      t_spare_targets.pop_back();
    }
    set_ref(c.targets.back(), t);
  }

 private:
  // Back to a default OpCall, keeping the argument vectors' storage.
  static void reset(OpCall& c) {
    for (CallArg& a : c.args) {
      // A list keeps its elements (their views' storage) for the next list
      // at this position, which resizes it; kind None hides it meanwhile.
      if (a.kind != CallArg::Kind::TensorList) a.list.clear();
      a.kind = CallArg::Kind::None;
      a.tensor.slot = nullptr;
      a.present.clear();
      a.scalar_dtype = hlo::DType::F64;
      a.host_tensor = false;
      a.fixed = false;
      std::memset(a.scalar_bytes, 0, sizeof a.scalar_bytes);
      a.i = 0;
      a.ints.clear();
      a.s.clear();
      a.rng[0] = a.rng[1] = 0;
    }
    c.op = nullptr;
    c.device = 0;
    for (auto& t : c.targets)
      if (t_spare_targets.size() < kMaxSpare) t_spare_targets.push_back(std::move(t));
    c.targets.clear();
    c.defer_checks = false;
    c.fusable = false;
    c.static_values = false;
  }
  static thread_local std::vector<std::unique_ptr<OpCall>> t_pool;
  static thread_local size_t t_depth;
  static thread_local std::vector<CallArg::TensorRef> t_spare_targets;
  static thread_local std::vector<CallArg> t_spare_args;  // reset, as size_args and add_arg expect
  static constexpr size_t kMaxSpare = 1024;               // calls with fresh results leave more targets than they take
  OpCall* call_;
};

// The fresh results of a call as new tensors: they adopt the buffers of a
// call that ran, or, for a deferred call (fused mode), are new storages
// that join the open region with the call (which takes `call`'s contents:
// Engine::join).
c10::SmallVector<at::Tensor, 4> fresh_tensors(OpCall& call, const engine::CallResult& r);

// ---------------------------------------------------------------- lowered_kernel.cc

// Functional: results become new tensors (and, for ops that also update
// some arguments, like batch norm's running stats, the lowering returns those
// arguments' new values after the results). InPlace: the result is written
// into self. Out: the functional op runs, then results are copied into out=
// (resized when needed). OutDirect: the lowering is keyed by the out= name
// itself, sees the out tensors as trailing arguments and writes into them.
enum class Variant { Functional, InPlace, Out, OutDirect };

// The boxed kernel that runs `entry`'s lowering for `schema` in `variant`.
torch::CppFunction lowered_kernel(const lowering::Entry& entry, Variant variant, const c10::FunctionSchema& schema);

// ---------------------------------------------------------------- storage_kernels.cc

// t's raw values conjugated and/or negated into a fresh tpu tensor: how a
// lazy conjugate/negative view (is_conj, is_neg) is materialised.
at::Tensor apply_bits(const at::Tensor& t, bool conj, bool neg);

// ---------------------------------------------------------------- fallback.cc

// Runs the op on the CPU (copy in, run, copy out), with a warning once per
// op, unless TORCH_PJRT_FALLBACK=error.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_pjrt::glue
