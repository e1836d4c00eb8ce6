// Op entry: every ATen op with a lowering gets one boxed kernel (its
// functional, in-place and out= variants alike); storage, view and copy ops
// get small explicit kernels; everything else takes the CPU fallback.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <cmath>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "torch/common.h"

namespace torch_pjrt::glue {
namespace {

using engine::CallArg;
using engine::OpCall;
using Kind = CallArg::Kind;

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

[[noreturn]] void device_mismatch(const at::Tensor& a, c10::DeviceIndex device) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, tpu:",
              static_cast<int>(device), " and ", a.device(), "!");
}

// ---------------------------------------------------------------- arguments

// How one schema argument is turned into a CallArg.
enum class ArgType {
  Tensor,
  OptTensorList,
  TensorList,
  Scalar,
  Int,
  Ints,
  Bool,
  Bools,
  DType,
  String,
  Generator,
  Ignore
};

ArgType arg_type(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
  switch (t->kind()) {
    case c10::TypeKind::TensorType:
      return ArgType::Tensor;
    case c10::TypeKind::NumberType:
    case c10::TypeKind::FloatType:
      return ArgType::Scalar;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return ArgType::Int;
    case c10::TypeKind::BoolType:
      return ArgType::Bool;
    case c10::TypeKind::ScalarTypeType:
      return ArgType::DType;
    case c10::TypeKind::StringType:
      return ArgType::String;
    case c10::TypeKind::GeneratorType:
      return ArgType::Generator;
    case c10::TypeKind::ListType: {
      c10::TypePtr e = t->castRaw<c10::ListType>()->getElementType();
      if (e->kind() == c10::TypeKind::TensorType) return ArgType::TensorList;
      if (auto oe = e->cast<c10::OptionalType>())
        if (oe->getElementType()->kind() == c10::TypeKind::TensorType) return ArgType::OptTensorList;
      if (e->kind() == c10::TypeKind::IntType || e->kind() == c10::TypeKind::SymIntType) return ArgType::Ints;
      if (e->kind() == c10::TypeKind::BoolType) return ArgType::Bools;
      return ArgType::Ignore;
    }
    default:
      return ArgType::Ignore;  // Layout, Device, MemoryFormat: no effect on the program
  }
}

void set_scalar(CallArg& a, const c10::Scalar& s) {
  a.kind = Kind::Scalar;
  a.host_tensor = false;
  if (s.isBoolean()) {
    a.scalar_dtype = hlo::DType::Bool;
    a.scalar_bytes[0] = s.toBool();
  } else if (s.isIntegral(false)) {
    a.scalar_dtype = hlo::DType::I64;
    int64_t v = s.toLong();
    std::memcpy(a.scalar_bytes, &v, 8);
  } else if (s.isComplex()) {
    // A Python complex travels as complex64 (8 bytes); only values whose parts
    // are exact in float32 (1j, 0.5+2j, ...) so nothing is rounded.
    c10::complex<double> z = s.toComplexDouble();
    c10::complex<float> f(static_cast<float>(z.real()), static_cast<float>(z.imag()));
    auto same = [](double d, float x) { return d == static_cast<double>(x) || (std::isnan(d) && std::isnan(x)); };
    TORCH_CHECK_TYPE(same(z.real(), f.real()) && same(z.imag(), f.imag()), "torch_pjrt: complex scalar ", z,
                     " is not supported on the tpu device (only complex scalars whose parts are exact float32 values)");
    a.scalar_dtype = hlo::DType::C64;
    std::memcpy(a.scalar_bytes, &f, 8);
  } else {
    a.scalar_dtype = hlo::DType::F64;
    double v = s.toDouble();
    std::memcpy(a.scalar_bytes, &v, 8);
  }
}

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

// t's raw values conjugated and/or negated into a fresh tpu tensor: how a
// lazy conjugate/negative view (is_conj, is_neg) is materialised.
at::Tensor apply_bits(const at::Tensor& t, bool conj, bool neg);

void set_tensor(CallArg& a, const at::Tensor& t, DeviceCheck& dc) {
  if (t.is_privateuseone()) {
    dc.see(t);
    a.kind = Kind::Tensor;
    a.tensor.slot = slot_of(t);
    view_into(t, a.tensor.view);
    return;
  }
  // A CPU scalar (Python number or zero-dim tensor) mixes with tpu tensors
  // as on CUDA; anything else is a device mismatch.
  if (t.dim() == 0 && t.is_cpu()) {
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      set_scalar(a, t.item());
    } else {
      a.kind = Kind::Scalar;
      a.host_tensor = true;
      a.scalar_dtype = to_hlo(t.scalar_type());
      TORCH_CHECK_TYPE(t.element_size() <= static_cast<int64_t>(sizeof a.scalar_bytes), "torch_pjrt: dtype ",
                       t.scalar_type(), " is not supported as a CPU scalar on the tpu device");
      std::memcpy(a.scalar_bytes, t.data_ptr(), t.element_size());
    }
    return;
  }
  device_mismatch(t, dc.device < 0 ? 0 : dc.device);
}

// ---------------------------------------------------------------- lowered ops

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

 private:
  // Back to a default OpCall, keeping the argument vectors' storage.
  static void reset(OpCall& c) {
    for (CallArg& a : c.args) {
      a.kind = Kind::None;
      a.tensor.slot = nullptr;
      a.list.clear();
      a.present.clear();
      a.scalar_dtype = hlo::DType::F64;
      a.host_tensor = false;
      std::memset(a.scalar_bytes, 0, sizeof a.scalar_bytes);
      a.i = 0;
      a.ints.clear();
      a.s.clear();
      a.rng[0] = a.rng[1] = 0;
    }
    c.op = nullptr;
    c.device = 0;
    c.targets.clear();
    c.defer_checks = false;
  }
  static thread_local std::vector<std::unique_ptr<OpCall>> t_pool;
  static thread_local size_t t_depth;
  OpCall* call_;
};
thread_local std::vector<std::unique_ptr<OpCall>> PooledCall::t_pool;
thread_local size_t PooledCall::t_depth = 0;

// Functional: results become new tensors (and, for ops that also update
// some arguments, like batch norm's running stats, the lowering returns those
// arguments' new values after the results). InPlace: the result is written
// into self. Out: the functional op runs, then results are copied into out=
// (resized when needed). OutDirect: the lowering is keyed by the out= name
// itself, sees the out tensors as trailing arguments and writes into them.
enum class Variant { Functional, InPlace, Out, OutDirect };

// Out= ops whose output size depends on argument values: they size `out`
// on the host first, as their CPU kernels do.
void size_arange_out(c10::ArrayRef<c10::IValue> args) {
  double start = args[0].toScalar().toDouble(), end = args[1].toScalar().toDouble(),
         step = args[2].toScalar().toDouble();
  TORCH_CHECK(step != 0, "step must be nonzero");
  TORCH_CHECK((step > 0 && end >= start) || (step < 0 && end <= start),
              "upper bound and larger bound inconsistent with step sign");
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  at::Tensor out = args[3].toTensor();
  if (out.numel() != n) out.resize_({n});
}
// eye.out(n, *, out), eye.m_out(n, m, *, out), linspace.out(start, end, steps, *, out) and
// logspace.out(start, end, steps, base, *, out): `out` takes the shape the ints give.
void size_eye_out(c10::ArrayRef<c10::IValue> args) {
  bool m = args.size() == 3;
  at::Tensor out = args.back().toTensor();
  std::vector<int64_t> shape{args[0].toInt(), m ? args[1].toInt() : args[0].toInt()};
  TORCH_CHECK(shape[0] >= 0 && shape[1] >= 0, "n and m must be greater or equal to 0, got ", shape[0], ", ", shape[1]);
  if (out.sizes() != c10::IntArrayRef(shape)) out.resize_(shape);
}
void size_space_out(c10::ArrayRef<c10::IValue> args) {
  int64_t steps = args[2].toInt();
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::Tensor out = args.back().toTensor();
  if (out.dim() != 1 || out.numel() != steps) out.resize_({steps});
}
using SizeOutFn = void (*)(c10::ArrayRef<c10::IValue>);
SizeOutFn size_out_fn(lowering::OutSizing s) {
  switch (s) {
    case lowering::OutSizing::Given:
      return nullptr;
    case lowering::OutSizing::Arange:
      return size_arange_out;
    case lowering::OutSizing::Eye:
      return size_eye_out;
    case lowering::OutSizing::Space:
      return size_space_out;
  }
  return nullptr;
}

// Data-dependent result sizes (Traits::narrowed): the lowering returns
// results padded to the largest possible size and, last, a rank-0 i64 count;
// the kernel reads the count (a sync point: a small device->host read) and
// returns the narrowed results, views of the padded buffers. One program per
// input shape, none per count.

// Ops whose output size is a function of the data that the lowering takes as
// a static argument: the kernel reads the value first (a sync point) and
// fills the argument in, as the CPU kernels do on the host. `args` are the
// call's arguments on the stack.
void prepare_repeat_interleave(c10::IValue* args) {
  if (!args[1].isNone()) return;  // output_size given
  at::Tensor rep = args[0].toTensor();
  TORCH_CHECK(rep.dim() <= 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(rep.scalar_type() == at::kLong || rep.scalar_type() == at::kInt, "repeats has to be Long or Int tensor");
  int64_t total = 0;
  if (rep.numel() > 0) {
    TORCH_CHECK(rep.min().item<int64_t>() >= 0, "repeats can not be negative");
    total = rep.sum().item<int64_t>();
  }
  args[1] = total;
}
void prepare_bincount(c10::IValue* args) {
  at::Tensor x = args[0].toTensor();
  int64_t minlength = args[2].toInt();
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(x.dim() == 1 && at::isIntegralType(x.scalar_type(), /*includeBool=*/false),
              "bincount only supports 1-d non-negative integral inputs.");
  if (x.numel() == 0) return;
  TORCH_CHECK(x.min().item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  args[2] = std::max(minlength, x.max().item<int64_t>() + 1);
}
using PrepareFn = void (*)(c10::IValue*);
PrepareFn prepare_fn(lowering::HostPrep p) {
  switch (p) {
    case lowering::HostPrep::None:
      return nullptr;
    case lowering::HostPrep::RepeatInterleave:
      return prepare_repeat_interleave;
    case lowering::HostPrep::Bincount:
      return prepare_bincount;
  }
  return nullptr;
}

// Advanced indexing (Traits::expand_masks): the kernel expands bool/uint8
// indices to long indices (their nonzero() columns) before lowering, as
// PyTorch's expandTensors does on CPU. index_put keeps a lone mask whose
// values do not depend on the number of true elements: its lowering does
// that as a select, with no sync point.

bool is_mask(const at::Tensor& t) { return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte; }

// True for index_put(self, [None.., mask], values) where values broadcast to
// self[mask]'s shape for a single true element (mask_put in lowering/shape.cc).
bool lone_mask_put(const at::Tensor& self, const c10::IValue& indices, const c10::IValue& values) {
  int64_t p = -1, pos = 0;
  at::Tensor mask;
  for (const c10::IValue& e : indices.toListRef()) {
    if (!e.isNone() && e.toTensor().defined()) {
      if (p >= 0) return false;
      p = pos;
      mask = e.toTensor();
    }
    ++pos;
  }
  if (p < 0 || !is_mask(mask) || !values.isTensor()) return false;
  int64_t m = mask.dim();
  if (p + m > self.dim()) return true;  // the lowering raises PyTorch's shape error
  std::vector<int64_t> one_k(self.sizes().begin(), self.sizes().begin() + p);
  one_k.push_back(1);
  one_k.insert(one_k.end(), self.sizes().begin() + p + m, self.sizes().end());
  try {
    return at::infer_size(values.toTensor().sizes(), one_k) == one_k;
  } catch (const c10::Error&) {
    return false;
  }
}

// indices with each bool/uint8 mask replaced by one long index per mask dim
// (the columns of mask.nonzero(), a sync point for a tpu mask).
c10::IValue expand_masks(const at::Tensor& self, const c10::IValue& indices) {
  c10::List<std::optional<at::Tensor>> out;
  for (const c10::IValue& e : indices.toListRef()) {
    if (e.isNone() || !e.toTensor().defined() || !is_mask(e.toTensor())) {
      out.push_back(e.isNone() ? std::nullopt : std::optional<at::Tensor>(e.toTensor()));
      continue;
    }
    at::Tensor mask = e.toTensor();
    int64_t at_dim = static_cast<int64_t>(out.size());
    TORCH_CHECK_INDEX(at_dim + mask.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim(),
                      " (got ", at_dim + mask.dim(), ")");
    for (int64_t j = 0; j < mask.dim(); ++j)
      TORCH_CHECK_INDEX(mask.size(j) == self.size(at_dim + j), "The shape of the mask ", mask.sizes(), " at index ", j,
                        " does not match the shape of the indexed tensor ", self.sizes(), " at index ", at_dim + j);
    at::Tensor nz = at::nonzero(mask);
    for (int64_t j = 0; j < mask.dim(); ++j) out.push_back(std::optional<at::Tensor>(nz.select(1, j)));
  }
  return c10::IValue(out);
}

bool has_mask(const c10::IValue& indices) {
  for (const c10::IValue& e : indices.toListRef())
    if (!e.isNone() && e.toTensor().defined() && is_mask(e.toTensor())) return true;
  return false;
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

class LoweredKernel final : public c10::OperatorKernel {
 public:
  LoweredKernel(const lowering::Entry& entry, Variant variant, const c10::FunctionSchema& schema)
      : def_(entry.aten_name, entry.fn), variant_(variant), traits_(entry.traits) {
    for (const auto& a : schema.arguments()) {
      bool is_out = a.alias_info() && a.alias_info()->isWrite() && a.kwarg_only();
      if (variant == Variant::Out && is_out) {
        ++num_out_;
        continue;
      }
      types_.push_back(arg_type(a.real_type()));
      out_index_.push_back(is_out);
    }
    returns_ = schema.returns().size();
    returns_bool_ = returns_ == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::BoolType;
    prepare_ = prepare_fn(traits_.prepare);
    expand_masks_ = traits_.expand_masks && types_.size() > 1 && types_[1] == ArgType::OptTensorList;
    returns_list_ = returns_ > 0 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const auto& a = schema.arguments()[i];
      if (a.alias_info() && a.alias_info()->isWrite() && !(variant != Variant::InPlace && a.kwarg_only()))
        written_.push_back(i);
    }
    if (!traits_.unmarked_writes.empty() && variant != Variant::InPlace)
      written_.assign(traits_.unmarked_writes.begin(), traits_.unmarked_writes.end());
    implicit_rng_ = traits_.implicit_rng;
    check_overlap_ = !traits_.overlap_allowed;
    if (traits_.check_errors_api)
      for (size_t i = 0; i < schema.arguments().size(); ++i)
        if (schema.arguments()[i].name() == "check_errors") check_errors_ = {i, traits_.check_errors_api};
    contiguity_flag_ = traits_.contiguity_flag;
    const size_t dot = def_.name.find('.');
    base_name_ = def_.name.substr(6, dot == std::string::npos ? std::string::npos : dot - 6);
    size_out_ = size_out_fn(traits_.out_sizing);
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    translate_errors(def_.name, [&] { call(op, stack); });
  }

 private:
  void call(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    std::call_once(registered_, [&] {
      Engine::get().register_op(&def_);
      // A native CPU out= kernel built on TensorIterator (one that takes any
      // out dtype the result casts to) checks the out tensor before it sizes
      // it; cat, and generated out= wrappers (no CPU kernel of their own),
      // size it first.
      out_checked_first_ = variant_ == Variant::Out && !traits_.out_same_dtype && !traits_.out_sized_first &&
                           op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
    });
    const size_t nargs = types_.size() + num_out_;
    auto args = torch::jit::last(*stack, nargs);
    if (size_out_) size_out_(args);
    if (prepare_) prepare_(stack->data() + (stack->size() - nargs));
    // Bool/uint8 indices become long indices before the call is described.
    c10::IValue expanded;
    if (expand_masks_ && args[0].isTensor() && !args[1].isNone() && has_mask(args[1]) &&
        !(types_.size() > 2 &&
          lone_mask_put(args[0].toTensor(), args[1], args[2])))  // index_put(self, indices, values)
      expanded = expand_masks(args[0].toTensor(), args[1]);
    PooledCall pooled;
    OpCall& call = *pooled;
    call.op = &def_;
    call.args.resize(types_.size() + (implicit_rng_ ? 1 : 0) + (contiguity_flag_ ? 1 : 0));
    DeviceCheck dc;
    const c10::IValue* generator = nullptr;
    c10::SmallVector<at::Tensor, 2> keep_alive;  // index tensors moved to tpu for this call
    for (size_t i = 0; i < types_.size(); ++i) {
      const c10::IValue& v = i == 1 && !expanded.isNone() ? expanded : args[i];
      CallArg& a = call.args[i];
      if (v.isNone() && types_[i] != ArgType::Generator) continue;
      switch (types_[i]) {
        case ArgType::Tensor:
          if (!v.toTensor().defined()) break;
          // Ops the Conjugate/Negative fallbacks let through (clone, copy_,
          // conj_physical) read a lazy view's logical values.
          if (v.toTensor().is_privateuseone() && (v.toTensor().is_conj() || v.toTensor().is_neg()) &&
              !(op.schema().arguments()[i].alias_info() && op.schema().arguments()[i].alias_info()->isWrite())) {
            keep_alive.push_back(apply_bits(v.toTensor(), v.toTensor().is_conj(), v.toTensor().is_neg()));
            set_tensor(a, keep_alive.back(), dc);
            break;
          }
          set_tensor(a, v.toTensor(), dc);
          break;
        case ArgType::TensorList: {
          a.kind = Kind::TensorList;
          for (const at::Tensor& t : v.toTensorList().vec()) {
            TORCH_CHECK(t.is_privateuseone(), "Expected all tensors to be on the same device, but found ", t.device());
            dc.see(t);
            a.list.push_back(ref_of(t));
            a.present.push_back(1);
          }
          break;
        }
        case ArgType::OptTensorList: {
          a.kind = Kind::TensorList;
          for (const c10::IValue& e : v.toListRef()) {
            bool has = !e.isNone() && e.toTensor().defined();
            a.present.push_back(has);
            if (!has) continue;
            at::Tensor t = e.toTensor();
            if (!t.is_privateuseone()) t = t.to(at::Device(c10::DeviceType::PrivateUse1, std::max<int>(dc.device, 0)));
            dc.see(t);
            a.list.push_back(ref_of(t));
            keep_alive.push_back(t);
          }
          break;
        }
        case ArgType::Scalar:
          set_scalar(a, v.toScalar());
          break;
        case ArgType::Int:
          a.kind = Kind::Int;
          a.i = v.toInt();
          break;
        case ArgType::Bool:
          a.kind = Kind::Bool;
          a.i = v.toBool();
          break;
        case ArgType::Ints:
          a.kind = Kind::Ints;
          a.ints = v.toIntVector();
          break;
        case ArgType::Bools:
          a.kind = Kind::Ints;
          for (const c10::IValue& e : v.toListRef()) a.ints.push_back(e.toBool());
          break;
        case ArgType::DType:
          a.kind = Kind::DType;
          a.i = static_cast<int64_t>(to_hlo(static_cast<at::ScalarType>(v.toInt())));
          break;
        case ArgType::String:
          a.kind = Kind::String;
          a.s = v.toStringRef();
          break;
        case ArgType::Generator:
          a.kind = Kind::Rng;
          generator = &v;
          break;
        case ArgType::Ignore:
          // A factory op without tensor arguments (triu_indices) runs on its device= argument.
          if (v.isDevice() && v.toDevice().is_privateuseone() && dc.device < 0)
            dc.device = v.toDevice().has_index() ? v.toDevice().index() : 0;
          break;
      }
    }
    TORCH_CHECK(dc.device >= 0, def_.name, ": expected at least one tpu tensor argument");
    call.device = dc.device;
    if (generator) {
      std::optional<at::Generator> g;
      if (!generator->isNone()) g = generator->toGenerator();
      for (auto& a : call.args)
        if (a.kind == Kind::Rng) next_rng(g, dc.device, a.rng);
    }
    if (implicit_rng_) {
      call.args[types_.size()].kind = Kind::Rng;
      next_rng(std::nullopt, dc.device, call.args[types_.size()].rng);
    }
    if (contiguity_flag_) {
      call.args.back().kind = Kind::Bool;
      call.args.back().i = args[0].toTensor().is_contiguous();
    }

    c10::SmallVector<at::Tensor, 4> outs;
    if (variant_ == Variant::Out)
      for (size_t k = 0; k < num_out_; ++k) {
        outs.push_back(args[types_.size() + k].toTensor());
        TORCH_CHECK(!traits_.out_bool_or_byte || outs.back().scalar_type() == at::kBool ||
                        outs.back().scalar_type() == at::kByte,
                    base_name_, " only supports bool tensor for result, got: ", outs.back().scalar_type());
      }
    // CPU's rule for the tensors an op writes: no two elements share memory
    // (out= tensors of the Out variant are checked once they are sized).
    if (check_overlap_) {
      if (variant_ == Variant::InPlace)
        for (size_t i : written_) {
          if (args[i].isTensor())
            at::assert_no_internal_overlap(args[i].toTensor());
          else
            for (const at::Tensor& t : args[i].toTensorList().vec()) at::assert_no_internal_overlap(t);
        }
      // ... and no input shares only some of its elements with a written
      // tensor (the same tensor in and out is fine), as TensorIterator checks
      // before it sizes anything.
      auto no_partial_overlap = [&](const at::Tensor& written) {
        if (traits_.partial_overlap_allowed) return;
        for (size_t i = 0; i < types_.size(); ++i)
          if (types_[i] == ArgType::Tensor && args[i].isTensor() && args[i].toTensor().defined() &&
              !args[i].toTensor().is_same(written))
            at::assert_no_partial_overlap(written, args[i].toTensor());
      };
      if (variant_ == Variant::InPlace)
        for (size_t i : written_)
          if (args[i].isTensor()) no_partial_overlap(args[i].toTensor());
      if (variant_ == Variant::Out)
        for (size_t k = 0; k < num_out_; ++k) {
          if (out_checked_first_) at::assert_no_internal_overlap(args[types_.size() + k].toTensor());
          no_partial_overlap(args[types_.size() + k].toTensor());
        }
      if (variant_ == Variant::OutDirect)
        for (size_t i = 0; i < types_.size(); ++i)
          if (out_index_[i] && args[i].isTensor()) no_partial_overlap(args[i].toTensor());
    }
    // In-place: every written argument (a tensor or each tensor of a list)
    // receives the functional op's results, in order.
    c10::IValue self;
    if (variant_ == Variant::InPlace) {
      self = args[written_.front()];
      for (size_t i : written_) {
        if (args[i].isTensor())
          call.targets.push_back(ref_of(args[i].toTensor()));
        else
          for (const at::Tensor& t : args[i].toTensorList().vec()) call.targets.push_back(ref_of(t));
      }
    }
    // A functional op that updates arguments: results first, then the new
    // value of each written argument that is present.
    if ((variant_ == Variant::Functional || variant_ == Variant::Out) && !written_.empty()) {
      call.targets.resize(returns_);
      for (size_t i : written_)
        if (args[i].isTensor() && args[i].toTensor().defined()) call.targets.push_back(ref_of(args[i].toTensor()));
    }
    if (variant_ == Variant::OutDirect)
      for (size_t i = 0; i < types_.size(); ++i)
        if (out_index_[i]) {
          if (check_overlap_) at::assert_no_internal_overlap(args[i].toTensor());
          outs.push_back(args[i].toTensor());
          call.targets.push_back(ref_of(outs.back()));
        }

    call.defer_checks = variant_ == Variant::Out;
    engine::CallResult r;
    try {
      r = Engine::get().run(call);
    } catch (const lowering::NotLowered&) {  // inputs with no native algorithm
      cpu_fallback(op, stack);
      return;
    }
    torch::jit::drop(*stack, nargs);

    if (variant_ == Variant::InPlace) {
      if (returns_ > 0) torch::jit::push(*stack, std::move(self));
      return;
    }
    if (variant_ == Variant::OutDirect) {
      for (auto& t : outs) torch::jit::push(*stack, t);
      return;
    }
    if (returns_bool_) {  // aten::equal: a Python bool, read at a sync point
      bool value = false;
      Engine::get().read_result(r.buffers.at(0), &value, 1, def_.name);
      torch::jit::push(*stack, value);
      return;
    }
    int64_t count = -1;
    const bool narrowed = !traits_.narrowed.empty();
    if (narrowed) {  // data-dependent sizes: the last result is the count
      Engine::get().read_result(r.buffers.at(r.buffers.size() - 1), &count, sizeof count, def_.name);
      r.buffers.pop_back();
    }
    c10::SmallVector<at::Tensor, 4> results;
    for (size_t k = 0; k < r.buffers.size(); ++k) {
      const auto& t = (*r.types)[k];
      results.push_back(new_tensor(t.dims, to_torch(t.dtype), dc.device, r.buffers[k]));
    }
    if (check_errors_ && args[check_errors_->first].toBool() && !results.empty())
      at::_linalg_check_errors(results.back(), check_errors_->second, args[0].toTensor().dim() == 2);
    if (narrowed)
      for (size_t k : traits_.narrowed) {
        if (k >= results.size() || results[k].dim() == 0) continue;
        int64_t d = 0;
        const int dim_arg = traits_.narrow_dim_arg;
        if (k == 0 && dim_arg >= 0 && call.args[dim_arg].kind == Kind::Int)
          d = c10::maybe_wrap_dim(call.args[dim_arg].i, results[k].dim());
        results[k] = results[k].narrow(d, 0, std::min(count, results[k].size(d)));
      }
    if (variant_ == Variant::Out) {
      // out=: resize when needed, then copy (a second small program).
      for (size_t k = 0; k < outs.size() && k < results.size(); ++k) {
        TORCH_CHECK(!traits_.out_same_dtype || results[k].scalar_type() == outs[k].scalar_type(),
                    "Expected out tensor to have dtype ", results[k].scalar_type(), ", but got ", outs[k].scalar_type(),
                    " instead");
        TORCH_CHECK(at::canCast(results[k].scalar_type(), outs[k].scalar_type()), "result type ",
                    results[k].scalar_type(), " can't be cast to the desired output type ", outs[k].scalar_type());
        TORCH_CHECK(!traits_.out_fixed_shape || outs[k].sizes() == results[k].sizes(), "output with shape ",
                    outs[k].sizes(), " doesn't match the broadcast shape ", results[k].sizes());
        if (outs[k].sizes() != results[k].sizes())
          outs[k].resize_(results[k].sizes());
        else if (check_overlap_)
          at::assert_no_internal_overlap(outs[k]);
        outs[k].copy_(results[k]);
        torch::jit::push(*stack, outs[k]);
      }
      Engine::get().add_checks(std::move(r.checks));
      return;
    }
    if (returns_list_) {
      // Each returned list is as long as the tensor list argument at the same
      // position (the functional forms of foreach and fused optimizer ops).
      size_t next = 0;
      for (size_t k = 0; k < returns_; ++k) {
        size_t n = returns_ == 1 ? results.size() : call.args[k].list.size();
        std::vector<at::Tensor> group(results.begin() + next, results.begin() + next + n);
        next += n;
        torch::jit::push(*stack, c10::List<at::Tensor>(group));
      }
      return;
    }
    for (auto& t : results) torch::jit::push(*stack, std::move(t));
  }

  engine::OpDef def_;
  Variant variant_;
  const lowering::Traits& traits_;  // the table entry's, alive for the process
  std::vector<ArgType> types_;
  size_t num_out_ = 0;
  std::vector<bool> out_index_;  // OutDirect: which arguments are out= tensors
  size_t returns_ = 0;
  bool returns_list_ = false;
  std::vector<size_t> written_;  // InPlace: positions of the arguments the op writes
  std::once_flag registered_;    // counted in metrics from its first call
  bool implicit_rng_ = false;
  bool check_overlap_ = true;                                   // not Traits::overlap_allowed
  std::optional<std::pair<size_t, std::string>> check_errors_;  // Traits::check_errors_api: (argument, API name)
  bool contiguity_flag_ = false;
  SizeOutFn size_out_ = nullptr;
  bool returns_bool_ = false;  // a Python bool (aten::equal)
  PrepareFn prepare_ = nullptr;
  bool expand_masks_ = false;
  std::string base_name_;           // "any" for aten::any.dims
  bool out_checked_first_ = false;  // set with registered_
};

bool has_list_out(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite() && a.type()->kind() == c10::TypeKind::ListType)
      return true;
  return false;
}

bool is_out_variant(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite()) return true;
  return false;
}

// The functional op an out= schema computes: same base name, same non-out
// argument names and types, no mutation.
std::string functional_of_out(const c10::FunctionSchema& out,
                              const std::unordered_map<std::string, std::vector<c10::OperatorHandle>>& by_base) {
  std::vector<const c10::Argument*> inputs;
  for (const auto& a : out.arguments())
    if (!(a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite())) inputs.push_back(&a);
  auto it = by_base.find(out.name());
  if (it == by_base.end()) return "";
  for (const auto& h : it->second) {
    const auto& s = h.schema();
    if (s.is_mutable() || s.arguments().size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; i < inputs.size(); ++i)
      same &= s.arguments()[i].name() == inputs[i]->name() && *s.arguments()[i].type() == *inputs[i]->type();
    if (same) return full_name(s.operator_name());
  }
  return "";
}

torch::Library* g_library = nullptr;
std::vector<std::string> g_registered;

// ---------------------------------------------------------------- explicit kernels

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin, std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceIndex d = device && device->has_index() ? device->index() : current_device();
  c10::DeviceIndex saved = current_device();
  set_current_device(d);
  at::Tensor t = at::detail::empty_generic(size, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype), memory_format);
  set_current_device(saved);
  return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device, std::optional<bool> pin) {
  c10::DeviceIndex d = device && device->has_index() ? device->index() : current_device();
  c10::DeviceIndex saved = current_device();
  set_current_device(d);
  at::Tensor t = at::detail::empty_strided_generic(
      size, stride, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype));
  set_current_device(saved);
  return t;
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}

// Grows the storage when needed (keeping its bytes), then sets contiguous sizes.
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat>) {
  int64_t numel = c10::multiply_integers(size);
  int64_t needed = (numel + self.storage_offset()) * static_cast<int64_t>(self.element_size());
  c10::Storage storage = self.storage();
  if (numel > 0 && needed > static_cast<int64_t>(storage.nbytes())) {
    Slot* old = slot_of(self);
    std::vector<uint8_t> bytes(needed, 0);
    if (old && old->has_buffer()) Engine::get().download(*old, bytes.data());
    c10::DeviceIndex saved = current_device();
    set_current_device(self.device().index());
    c10::DataPtr fresh = tpu_allocator()->allocate(needed);
    set_current_device(saved);
    Slot* slot = static_cast<Slot*>(fresh.get_context());
    if (old && old->has_buffer()) {
      hlo::DType t = to_hlo(self.scalar_type());
      if (needed % hlo::byte_size(t) != 0) t = hlo::DType::U8;
      Engine::get().upload(*slot, bytes.data(), t);
    }
    storage.set_data_ptr_noswap(std::move(fresh));
    storage.set_nbytes(needed);
  }
  self.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(source));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes()) / static_cast<int64_t>(self.element_size());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

// May `self` take `from`'s data by `self.data = from`? TensorImpl's own rule
// knows only the built-in dense backends, so CPU <-> tpu would be "no" and
// nn.Module.to("tpu") would make new Parameters, untying shared weights.
// Dense CPU and dense tpu tensors are compatible, as CPU and CUDA are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    c10::DispatchKeySet ks = t.key_set();
    return ks.has(c10::DispatchKey::Dense) && t.layout() == at::kStrided &&
           (ks.has_backend(c10::BackendComponent::CPUBit) || ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
  };
  return (dense(self) && dense(from)) || self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

const engine::OpDef& op_def(const char* name) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::unique_ptr<engine::OpDef>> defs;
  std::lock_guard<std::mutex> g(mu);
  auto& d = defs[name];
  if (!d) {
    auto fn = lowering::find_lowering(name);
    TORCH_INTERNAL_ASSERT(fn, "missing lowering ", name);
    d = std::make_unique<engine::OpDef>(name, fn);
    Engine::get().register_op(d.get());
  }
  return *d;
}

// Runs a one-tensor lowering (clone, copy) through the engine.
engine::CallResult run_simple(const char* name, const std::vector<at::Tensor>& inputs, const at::Tensor* target) {
  OpCall call;
  call.op = &op_def(name);
  call.device = inputs[0].device().index();
  for (const auto& t : inputs) {
    CallArg a;
    a.kind = Kind::Tensor;
    a.tensor = ref_of(t);
    call.args.push_back(std::move(a));
  }
  if (target) call.targets.push_back(ref_of(*target));
  return Engine::get().run(call);
}

at::Tensor apply_bits(const at::Tensor& t, bool conj, bool neg) {
  at::Tensor r = t;
  for (const char* name : {conj ? "aten::_conj_physical" : nullptr, neg ? "aten::neg" : nullptr}) {
    if (!name || r.numel() == 0) continue;
    auto res = run_simple(name, {r}, nullptr);
    r = new_tensor(r.sizes(), r.scalar_type(), r.device().index(), res.buffers[0]);
  }
  if (r.is_same(t)) r = new_tensor(t.sizes(), t.scalar_type(), t.device().index());  // empty
  return r;
}

// The bytes of a tpu tensor as a contiguous CPU tensor of the same dtype.
at::Tensor to_cpu(const at::Tensor& src) {
  at::Tensor whole = src;
  engine::ViewSpec v = view_of(src);
  Slot* slot = slot_of(src);
  const int64_t storage_numel = static_cast<int64_t>(slot->nbytes) / src.element_size();
  // A contiguous part of a storage of up to 64 MiB (a narrowed nonzero or
  // unique result, a row): read the whole storage and slice it on the host,
  // so no copy program is compiled per view size (per data-dependent count).
  if (src.numel() > 0 && !v.covers(storage_numel) && v.is_contiguous() && v.offset + v.numel() <= storage_numel &&
      slot->nbytes <= (int64_t{64} << 20)) {
    at::Tensor host = at::empty({storage_numel}, src.options().device(at::kCPU));
    Engine::get().ensure_buffer(*slot, to_hlo(src.scalar_type()));
    Engine::get().download(*slot, host.data_ptr());
    return host.narrow(0, v.offset, v.numel()).view(src.sizes());
  }
  if (!v.covers(storage_numel)) {
    auto r = run_simple("aten::clone", {src}, nullptr);
    whole = new_tensor(src.sizes(), src.scalar_type(), src.device().index(), r.buffers[0]);
    slot = slot_of(whole);
  }
  at::Tensor out = at::empty(src.sizes(), src.options().device(at::kCPU));
  if (out.numel() == 0) return out;
  Engine::get().ensure_buffer(*slot, to_hlo(src.scalar_type()));
  Engine::get().download(*slot, out.data_ptr());
  // Lazy conjugate/negative views keep their bit: the CPU resolves it.
  if (src.is_conj()) out = out.conj();
  if (src.is_neg()) out = out._neg_view();
  return out;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  return translate_errors("aten::_copy_from", [&] {
    if (dst.numel() == 0) return dst;
    if (self.is_privateuseone() && dst.is_privateuseone()) {
      // Raw values move; conjugate/negative bits that differ between self
      // and dst are applied on the way (both are involutions).
      bool conj = self.is_conj() != dst.is_conj(), neg = self.is_neg() != dst.is_neg();
      if (self.device() == dst.device()) {
        at::Tensor src = conj || neg ? apply_bits(self, conj, neg) : self;
        run_simple("aten::copy", {dst, src}, &dst);
        return dst;
      }
      at::Tensor moved = to_cpu(self).resolve_conj().resolve_neg();
      if (dst.is_conj()) moved = moved.conj().resolve_conj();
      if (dst.is_neg()) moved = moved.neg();
      run_simple("aten::copy", {dst, moved.to(dst.device())}, &dst);
      return dst;
    }
    if (dst.is_privateuseone()) {  // host -> device
      at::Tensor host = self.resolve_conj().resolve_neg();
      if (dst.is_conj()) host = host.conj().resolve_conj();
      if (dst.is_neg()) host = host.neg();
      host = host.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
      Slot* slot = slot_of(dst);
      if (view_of(dst).covers(static_cast<int64_t>(slot->nbytes) / dst.element_size())) {
        Engine::get().upload(*slot, host.data_ptr(), to_hlo(dst.scalar_type()));
        return dst;
      }
      at::Tensor staged = new_tensor(dst.sizes(), dst.scalar_type(), dst.device().index());
      Engine::get().upload(*slot_of(staged), host.data_ptr(), to_hlo(dst.scalar_type()));
      run_simple("aten::copy", {dst, staged}, &dst);
      return dst;
    }
    // device -> host
    at::Tensor host = to_cpu(self);
    const_cast<at::Tensor&>(dst).copy_(host);
    return dst;
  });
}

// copy_ into a lazy conjugate/negative view writes the raw values of its
// storage: through the plain view, of src with the same bits applied. The
// default copy_ would call _copy_from, whose schema does not mark `dst` as
// written, so the Conjugate/Negative fallbacks would hand it a clone and the
// write would be lost.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!self.is_same(src)) at::assert_no_internal_overlap(self);  // as CPU's copy kernel
  if (!self.is_conj() && !self.is_neg()) return at::native::copy_(self, src, non_blocking);
  at::Tensor raw = self, from = src;
  if (self.is_conj()) raw = raw.conj(), from = from.conj();
  if (self.is_neg()) raw = raw._neg_view(), from = from._neg_view();
  raw.copy_(from, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) const_cast<at::Tensor&>(dst).resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return translate_errors("aten::_local_scalar_dense", [&] { return to_cpu(self).item(); });
}

// ---------------------------------------------------------------- fallback

bool fallback_is_error() {
  const char* v = std::getenv("TORCH_PJRT_FALLBACK");
  return v && std::string(v) == "error";
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = full_name(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error(), "The operator '", name,
                              "' has no tpu lowering, and TORCH_PJRT_FALLBACK=error forbids the CPU fallback.");
  {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> g(mu);
    if (warned.insert(name).second)
      TORCH_WARN("torch_pjrt: '", name, "' has no tpu lowering yet; it runs on the CPU (copy in, run, copy out).");
  }
  if (Engine::available()) Engine::get().count_fallback(name);
  at::native::cpu_fallback(op, stack);
}

// scaled_dot_product_attention asks which fused kernel to use; the math
// path decomposes into matmul, softmax and dropout, which are all lowered
// (and differentiable), so XLA sees and fuses the whole attention.
int64_t fused_sdp_choice(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                         double, bool, std::optional<double>, bool) {
  return 0;  // sdp::SDPBackend::math
}

}  // namespace

// ---------------------------------------------------------------- registration

// The functional overload an in-place schema derives from: `foo_.X` ->
// `foo.X`, unless another overload of `foo` takes the same argument types in
// the same order (pow_.Scalar takes (Tensor, Scalar): pow.Tensor_Scalar, not
// pow.Scalar, which is (Scalar, Tensor)).
std::string functional_of_inplace(const c10::FunctionSchema& schema,
                                  const std::unordered_map<std::string, std::vector<c10::OperatorHandle>>& by_base) {
  std::string base = schema.name().substr(0, schema.name().size() - 1);
  std::string by_name = base + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  auto same_types = [&](const c10::FunctionSchema& f) {
    const auto &a = schema.arguments(), &b = f.arguments();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].type()->str() != b[i].type()->str()) return false;
    return true;
  };
  auto it = by_base.find(base);
  if (it == by_base.end()) return by_name;
  for (const auto& h : it->second)
    if (full_name(h.schema().operator_name()) == by_name && same_types(h.schema())) return by_name;
  for (const auto& h : it->second)
    if (same_types(h.schema()) && lowering::find_lowering(full_name(h.schema().operator_name())))
      return full_name(h.schema().operator_name());
  return by_name;
}

std::vector<std::string> register_lowered_ops() {
  if (g_library) return g_registered;
  g_library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::unordered_map<std::string, std::vector<c10::OperatorHandle>> by_base;
  std::vector<c10::OperatorHandle> handles;
  for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
    if (n.name.rfind("aten::", 0) != 0) continue;
    auto h = c10::Dispatcher::singleton().findOp(n);
    if (!h) continue;
    by_base[n.name].push_back(*h);
    handles.push_back(*h);
  }
  // In-place ops whose functional sibling is not simply the name without "_".
  std::unordered_map<std::string, std::string> in_place_of;
  for (const std::string& op : lowering::lowered_ops())
    if (const char* in_place = lowering::find_entry(op)->traits.in_place) in_place_of[in_place] = op;
  for (const auto& h : handles) {
    const auto& schema = h.schema();
    std::string name = full_name(schema.operator_name());
    if (h.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) continue;
    Variant variant = Variant::Functional;
    std::string functional = name;
    if (is_out_variant(schema)) {
      variant = lowering::find_lowering(name) ? Variant::OutDirect : Variant::Out;
      if (variant == Variant::Out) functional = functional_of_out(schema, by_base);
      // out= tensor lists (`_fused_adamw.out`) take the CPU fallback.
      if (variant == Variant::Out && has_list_out(schema)) continue;
    } else if (schema.name().back() == '_' && schema.is_mutable()) {
      variant = Variant::InPlace;
      auto alias = in_place_of.find(name);
      functional = alias != in_place_of.end() ? alias->second : functional_of_inplace(schema, by_base);
    }
    if (functional.empty()) continue;
    const lowering::Entry* entry = lowering::find_entry(functional);
    if (!entry || (entry->traits.own_kernel && variant != Variant::Out)) continue;  // copy_, copy: kernels below
    static std::deque<std::string> impl_names;  // torch keeps pointers to registration names
    impl_names.push_back(name.substr(6));
    g_library->impl(impl_names.back().c_str(),
                    torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredKernel>(*entry, variant, schema)));
    g_registered.push_back(name);
  }
  return g_registered;
}

}  // namespace torch_pjrt::glue

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace torch_pjrt::glue;
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  // Metadata-only views that reinterpret a complex storage as (real, imag)
  // pairs and back; the engine re-types a storage's buffer when it is read
  // with another dtype.
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("_copy_from", copy_from);
  m.impl("copy_", copy_);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_pjrt::glue::cpu_fallback>());
}
