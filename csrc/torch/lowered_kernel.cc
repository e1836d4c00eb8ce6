// The lowered kernel: one boxed kernel serves every lowered ATen op and its
// in-place and out= variants. It marshals the stack into an OpCall, applies
// the torch-side rules CPU's kernels apply before they compute (devices,
// overlap, out= dtypes and sizes, the entry's traits), runs the call through
// the engine and pushes the results.
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "torch/ops.h"

namespace torch_pjrt::glue {
namespace {

using Kind = CallArg::Kind;

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
// CPU's order: the dtype dispatch (AT_DISPATCH_INDEX_TYPES), then the
// shape and value checks.
void prepare_repeat_interleave(c10::IValue* args) {
  at::Tensor rep = args[0].toTensor();
  TORCH_CHECK_NOT_IMPLEMENTED(rep.scalar_type() == at::kLong || rep.scalar_type() == at::kInt,
                              "\"repeat_interleave_cpu\" not implemented for '", rep.scalar_type(), "'");
  if (!args[1].isNone()) return;  // output_size given
  TORCH_CHECK(rep.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(rep.scalar_type() == at::kLong || rep.scalar_type() == at::kInt, "repeats has to be Long or Int tensor");
  int64_t total = 0;
  if (rep.numel() > 0) {
    TORCH_CHECK(rep.min().item<int64_t>() >= 0, "repeats can not be negative");
    total = rep.sum().item<int64_t>();
  }
  args[1] = total;
}
// CPU's order: the dtype dispatch (AT_DISPATCH_INTEGRAL_TYPES, no bool),
// then minlength, then the shape and value checks.
void prepare_bincount(c10::IValue* args) {
  at::Tensor x = args[0].toTensor();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(x.scalar_type(), /*includeBool=*/false),
                              "\"bincount_cpu\" not implemented for '", x.scalar_type(), "'");
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
    def_.shape_generic = traits_.shape_generic;
    prepare_ = prepare_fn(traits_.prepare);
    expand_masks_ = traits_.expand_masks && types_.size() > 1 && types_[1] == ArgType::OptTensorList;
    for (size_t i = 0; i < types_.size(); ++i)
      if (types_[i] == ArgType::ScalarList) scalar_list_ = static_cast<int>(i);
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
    // Fused mode: a call joins the open region unless its results are read
    // on the host at once. An out= call joins when it writes no argument of
    // its own: the checks of copy_into_outs then refuse it before anything
    // is written (the engine keeps a call with runtime checks out, see
    // defer_checks).
    fusable_ =
        (variant_ != Variant::Out || written_.empty()) && !returns_bool_ && traits_.narrowed.empty() && !check_errors_;
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    translate_errors(def_.name, [&] { call(op, stack); });
  }

 private:
  // What the steps of one call share. It lives on call()'s stack frame and
  // holds the pooled OpCall by reference: a warm call allocates nothing for it.
  struct Frame {
    Frame(c10::ArrayRef<c10::IValue> args_, const c10::IValue& expanded_, OpCall& call_)
        : args(args_), expanded(expanded_), call(call_) {}
    c10::ArrayRef<c10::IValue> args;  // the schema's arguments on the stack, until they are dropped
    const c10::IValue& expanded;      // args[1] with its masks expanded, or None
    OpCall& call;
    DeviceCheck dc;
    const c10::IValue* generator = nullptr;      // the schema's Generator? argument
    c10::SmallVector<at::Tensor, 2> keep_alive;  // tensors made for this call (index tensors moved to tpu)
    c10::SmallVector<at::Tensor, 4> outs;        // Out, OutDirect: the out= tensors
    c10::IValue self;                            // InPlace: the first written argument, returned
    bool check_errors = false;                   // check_errors=True (Traits::check_errors_api)
    bool is_matrix = false;                      // ... and the input is a single matrix
  };

  // Marshal, check, plan the writes, run, push the results: each step is a
  // function below, called in the order CPU's kernels check (the messages
  // and error classes are pinned by tests).
  void call(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    std::call_once(registered_, [&] { first_call(op); });
    const size_t nargs = types_.size() + num_out_;
    const auto args = torch::jit::last(*stack, nargs);
    // What CPU's kernels compute on the host first: out= sizes and static
    // arguments that depend on argument values.
    if (size_out_) size_out_(args);
    if (prepare_) prepare_(stack->data() + (stack->size() - nargs));
    const c10::IValue expanded = expanded_indices(args);  // may run kernels: before this call takes a pooled OpCall
    PooledCall pooled;
    Frame f(args, expanded, *pooled);
    marshal(op, f);
    finish_args(f);
    collect_outs(f);
    check_overlap(f);
    add_targets(f);
    f.call.defer_checks = variant_ == Variant::Out;
    f.call.fusable = fusable_;
    engine::CallResult r;
    if (!run(op, stack, f.call, r)) return;  // it ran on the CPU
    drop_arguments(f, stack, nargs);
    push_results(f, r, stack);
  }

  // Counts the op in metrics and reads what only the operator handle says.
  void first_call(const c10::OperatorHandle& op) {
    Engine::get().register_op(&def_);
    // A native CPU out= kernel built on TensorIterator (one that takes any
    // out dtype the result casts to) checks the out tensor before it sizes
    // it; cat, and generated out= wrappers (no CPU kernel of their own),
    // size it first.
    out_generated_ = variant_ == Variant::Out && !op.hasKernelForDispatchKey(c10::DispatchKey::CPU);
    out_checked_first_ =
        variant_ == Variant::Out && !traits_.out_same_dtype && !traits_.out_sized_first && !out_generated_;
  }

  // Bool/uint8 indices become long indices before the call is described:
  // args[1] with its masks expanded, or None.
  c10::IValue expanded_indices(c10::ArrayRef<c10::IValue> args) const {
    if (expand_masks_ && args[0].isTensor() && !args[1].isNone() && has_mask(args[1]) &&
        !(types_.size() > 2 &&
          lone_mask_put(args[0].toTensor(), args[1], args[2])))  // index_put(self, indices, values)
      return expand_masks(args[0].toTensor(), args[1]);
    return c10::IValue();
  }

  // ---------------------------------------------------------------- marshal

  // The schema's arguments into the call's, noting the call's device.
  void marshal(const c10::OperatorHandle& op, Frame& f) const {
    f.call.op = &def_;
    PooledCall::size_args(f.call, types_.size() + (implicit_rng_ ? 1 : 0) + (contiguity_flag_ ? 1 : 0));
    for (size_t i = 0; i < types_.size(); ++i) {
      const c10::IValue& v = i == 1 && !f.expanded.isNone() ? f.expanded : f.args[i];
      if (v.isNone() && types_[i] != ArgType::Generator) continue;
      marshal_arg(op, i, v, f);
    }
  }

  void marshal_arg(const c10::OperatorHandle& op, size_t i, const c10::IValue& v, Frame& f) const {
    CallArg& a = f.call.args[i];
    switch (types_[i]) {
      case ArgType::Tensor:
        marshal_tensor(op, i, v.toTensor(), f);
        break;
      case ArgType::TensorList:
        marshal_tensor_list(v, a, f.dc);
        break;
      case ArgType::OptTensorList:
        marshal_opt_tensor_list(v, a, f);
        break;
      case ArgType::Scalar:
        set_scalar(a, v.toScalar());
        if (static_cast<int>(i) == traits_.fixed_arg) a.fixed = is_fixed_value(a);
        break;
      case ArgType::ScalarList:  // the foreach ops' Scalar[]
        a.kind = Kind::Int;
        a.i = static_cast<int64_t>(v.toListRef().size());
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
        f.generator = &v;
        break;
      case ArgType::Ignore:
        // A factory op without tensor arguments (triu_indices) runs on its device= argument.
        if (v.isDevice() && v.toDevice().is_privateuseone() && f.dc.device < 0)
          f.dc.device = v.toDevice().has_index() ? v.toDevice().index() : 0;
        break;
    }
  }

  void marshal_tensor(const c10::OperatorHandle& op, size_t i, const at::Tensor& t, Frame& f) const {
    if (!t.defined()) return;
    CallArg& a = f.call.args[i];
    // Ops the Conjugate/Negative fallbacks let through (clone, copy_,
    // conj_physical) read a lazy view's logical values.
    if (t.is_privateuseone() && (t.is_conj() || t.is_neg()) &&
        !(op.schema().arguments()[i].alias_info() && op.schema().arguments()[i].alias_info()->isWrite())) {
      f.keep_alive.push_back(apply_bits(t, t.is_conj(), t.is_neg()));
      set_tensor(a, f.keep_alive.back(), f.dc);
      return;
    }
    set_tensor(a, t, f.dc);
  }

  static void marshal_tensor_list(const c10::IValue& v, CallArg& a, DeviceCheck& dc) {
    a.kind = Kind::TensorList;
    const c10::List<at::Tensor> tensors = v.toTensorList();
    a.list.resize(tensors.size());  // the pool's elements keep their storage
    for (size_t k = 0; k < tensors.size(); ++k) {
      const at::Tensor t = tensors.get(k);
      TORCH_CHECK(t.is_privateuseone(), "Expected all tensors to be on the same device, but found ", t.device());
      dc.see(t);
      set_ref(a.list[k], t);
      a.present.push_back(1);
    }
  }

  // Index lists: a CPU index tensor is moved to the call's device.
  static void marshal_opt_tensor_list(const c10::IValue& v, CallArg& a, Frame& f) {
    a.kind = Kind::TensorList;
    a.list.clear();
    for (const c10::IValue& e : v.toListRef()) {
      bool has = !e.isNone() && e.toTensor().defined();
      a.present.push_back(has);
      if (!has) continue;
      at::Tensor t = e.toTensor();
      if (!t.is_privateuseone()) t = t.to(at::Device(c10::DeviceType::PrivateUse1, std::max<int>(f.dc.device, 0)));
      f.dc.see(t);
      a.list.push_back(ref_of(t));
      f.keep_alive.push_back(t);
    }
  }

  // Whether a scalar is one of the values the lowering fixes in the program
  // (Traits::fixed_values).
  bool is_fixed_value(const CallArg& a) const {
    std::optional<double> x = real_scalar(a);
    const auto& fv = traits_.fixed_values;
    return x && std::find(fv.begin(), fv.end(), *x) != fv.end();
  }

  // The call's device and the arguments after the schema's: random draws,
  // the contiguity flag, a Scalar[]'s elements.
  void finish_args(Frame& f) const {
    TORCH_CHECK(f.dc.device >= 0, def_.name, ": expected at least one tpu tensor argument");
    OpCall& call = f.call;
    call.device = f.dc.device;
    if (f.generator) {
      std::optional<at::Generator> g;
      if (!f.generator->isNone()) g = f.generator->toGenerator();
      for (auto& a : call.args)
        if (a.kind == Kind::Rng) next_rng(g, f.dc.device, a.rng);
    }
    if (implicit_rng_) {
      call.args[types_.size()].kind = Kind::Rng;
      next_rng(std::nullopt, f.dc.device, call.args[types_.size()].rng);
    }
    if (contiguity_flag_) {
      call.args.back().kind = Kind::Bool;
      call.args.back().i = f.args[0].toTensor().is_contiguous();
    }
    // A Scalar[]'s elements are runtime scalars after all other arguments
    // (foreach.cc's scalar_at reads them there).
    if (scalar_list_ >= 0 && !f.args[scalar_list_].isNone())
      for (const c10::IValue& e : f.args[scalar_list_].toListRef()) set_scalar(PooledCall::add_arg(call), e.toScalar());
  }

  // ---------------------------------------------------------------- checks

  // Out: the out= tensors, each checked to be bool or uint8 where the op
  // asks for that (Traits::out_bool_or_byte).
  void collect_outs(Frame& f) const {
    if (variant_ != Variant::Out) return;
    for (size_t k = 0; k < num_out_; ++k) {
      f.outs.push_back(f.args[types_.size() + k].toTensor());
      TORCH_CHECK(!traits_.out_bool_or_byte || f.outs.back().scalar_type() == at::kBool ||
                      f.outs.back().scalar_type() == at::kByte,
                  base_name_, " only supports bool tensor for result, got: ", f.outs.back().scalar_type());
    }
  }

  // CPU's rule for the tensors an op writes: no two elements share memory
  // (out= tensors of the Out variant are checked once they are sized), and
  // no input shares only some of its elements with a written tensor.
  void check_overlap(const Frame& f) const {
    if (!check_overlap_) return;
    const c10::ArrayRef<c10::IValue> args = f.args;
    if (variant_ == Variant::InPlace)
      for (size_t i : written_) {
        if (args[i].isTensor())
          at::assert_no_internal_overlap(args[i].toTensor());
        else
          for (const at::Tensor& t : args[i].toTensorList().vec()) at::assert_no_internal_overlap(t);
      }
    if (variant_ == Variant::InPlace)
      for (size_t i : written_)
        if (args[i].isTensor()) check_no_partial_overlap(args, args[i].toTensor());
    if (variant_ == Variant::Out)
      for (size_t k = 0; k < num_out_; ++k) {
        if (out_checked_first_) at::assert_no_internal_overlap(args[types_.size() + k].toTensor());
        // A generated wrapper computes into a fresh tensor, then copies.
        if (!out_generated_) check_no_partial_overlap(args, args[types_.size() + k].toTensor());
      }
    if (variant_ == Variant::OutDirect)
      for (size_t i = 0; i < types_.size(); ++i)
        if (out_index_[i] && args[i].isTensor()) check_no_partial_overlap(args, args[i].toTensor());
  }

  // No tensor argument shares only some of its elements with `written` (the
  // same tensor in and out is fine), as TensorIterator checks before it
  // sizes anything.
  void check_no_partial_overlap(c10::ArrayRef<c10::IValue> args, const at::Tensor& written) const {
    if (traits_.partial_overlap_allowed) return;
    for (size_t i = 0; i < types_.size(); ++i)
      if (types_[i] == ArgType::Tensor && args[i].isTensor() && args[i].toTensor().defined() &&
          !args[i].toTensor().is_same(written))
        at::assert_no_partial_overlap(written, args[i].toTensor());
  }

  // ---------------------------------------------------------------- plan the writes

  // The tensors the call writes (OpCall::targets).
  void add_targets(Frame& f) const {
    // In-place: every written argument (a tensor or each tensor of a list)
    // receives the functional op's results, in order.
    if (variant_ == Variant::InPlace) {
      f.self = f.args[written_.front()];
      for (size_t i : written_) {
        if (f.args[i].isTensor())
          add_in_place_target(f.call, f.args[i].toTensor());
        else
          for (const at::Tensor& t : f.args[i].toTensorList().vec()) add_in_place_target(f.call, t);
      }
    }
    // A functional op that updates arguments: results first, then the new
    // value of each written argument that is present.
    if ((variant_ == Variant::Functional || variant_ == Variant::Out) && !written_.empty()) {
      f.call.targets.resize(returns_);
      for (size_t i : written_)
        if (f.args[i].isTensor() && f.args[i].toTensor().defined())
          PooledCall::add_target(f.call, f.args[i].toTensor());
    }
    // OutDirect: the lowering writes the out= tensors.
    if (variant_ == Variant::OutDirect)
      for (size_t i = 0; i < types_.size(); ++i)
        if (out_index_[i]) {
          if (check_overlap_) at::assert_no_internal_overlap(f.args[i].toTensor());
          f.outs.push_back(f.args[i].toTensor());
          PooledCall::add_target(f.call, f.outs.back());
        }
  }

  void add_in_place_target(OpCall& call, const at::Tensor& t) const {
    TORCH_CHECK(!traits_.in_place_refuses_complex || !t.is_complex(), traits_.in_place_refuses_complex);
    PooledCall::add_target(call, t);
  }

  // ---------------------------------------------------------------- run

  // Runs the call through the engine into `r`. False when the inputs have no
  // native algorithm: the op then ran on the CPU, which took the stack.
  bool run(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpCall& call, engine::CallResult& r) const {
    try {
      follow_matmul_precision();
      r = Engine::get().run(call);
    } catch (const lowering::NotLowered&) {
      cpu_fallback(op, stack);
      return false;
    }
    return true;
  }

  // Drops the arguments from the stack, first reading what the results need
  // of them.
  void drop_arguments(Frame& f, torch::jit::Stack* stack, size_t nargs) const {
    f.check_errors = check_errors_ && f.args[check_errors_->first].toBool();
    f.is_matrix = f.check_errors && f.args[0].toTensor().dim() == 2;
    torch::jit::drop(*stack, nargs);
    f.args = {};
  }

  // ---------------------------------------------------------------- write back and wrap results

  // Pushes what the op returns: InPlace its self, OutDirect its out=
  // tensors, aten::equal a Python bool, the others the call's fresh results
  // (narrowed, checked, copied into out=, grouped into lists).
  void push_results(Frame& f, engine::CallResult& r, torch::jit::Stack* stack) const {
    // Several returned lists (the functional fused optimizer ops): each is as
    // long as the tensor list argument at the same position, read before a
    // deferred call's arguments move into the region.
    c10::SmallVector<size_t, 8> list_lengths;
    if (returns_list_ && returns_ > 1)
      for (size_t k = 0; k < returns_; ++k) list_lengths.push_back(f.call.args[k].list.size());
    c10::SmallVector<at::Tensor, 4> results;
    if (r.deferred) results = fresh_tensors(f.call, r);
    if (variant_ == Variant::InPlace) {
      if (returns_ > 0) torch::jit::push(*stack, std::move(f.self));
      return;
    }
    if (variant_ == Variant::OutDirect) {
      for (auto& t : f.outs) torch::jit::push(*stack, t);
      return;
    }
    if (returns_bool_) {  // aten::equal: a Python bool, read at a sync point
      bool value = false;
      Engine::get().read_result(r.buffers.at(0), &value, 1, def_.name);
      torch::jit::push(*stack, value);
      return;
    }
    const bool narrowed = !traits_.narrowed.empty();
    const int64_t count = narrowed ? read_count(r) : -1;
    if (!r.deferred) results = fresh_tensors(f.call, r);
    if (f.check_errors && !results.empty())
      at::_linalg_check_errors(results.back(), check_errors_->second, f.is_matrix);
    if (narrowed) narrow_results(f.call, count, results);
    if (variant_ == Variant::Out) {
      copy_into_outs(f.outs, results, stack);
      Engine::get().add_checks(std::move(r.checks));
      return;
    }
    if (returns_list_) {
      push_lists(results, list_lengths, stack);
      return;
    }
    for (auto& t : results) torch::jit::push(*stack, std::move(t));
  }

  // Data-dependent sizes: the last result is the count, read at a sync point
  // and taken off the results.
  int64_t read_count(engine::CallResult& r) const {
    int64_t count = -1;
    Engine::get().read_result(r.buffers.at(r.buffers.size() - 1), &count, sizeof count, def_.name);
    r.buffers.pop_back();
    return count;
  }

  // The narrowed results (Traits::narrowed) cut to `count` along their dim.
  void narrow_results(const OpCall& call, int64_t count, c10::SmallVector<at::Tensor, 4>& results) const {
    for (size_t k : traits_.narrowed) {
      if (k >= results.size() || results[k].dim() == 0) continue;
      int64_t d = 0;
      const int dim_arg = traits_.narrow_dim_arg;
      if (k == 0 && dim_arg >= 0 && call.args[dim_arg].kind == Kind::Int)
        d = c10::maybe_wrap_dim(call.args[dim_arg].i, results[k].dim());
      results[k] = results[k].narrow(d, 0, std::min(count, results[k].size(d)));
    }
  }

  // out=: each out tensor resized when needed, then the result copied in (a
  // second small program) and the out tensor pushed.
  void copy_into_outs(c10::SmallVector<at::Tensor, 4>& outs, const c10::SmallVector<at::Tensor, 4>& results,
                      torch::jit::Stack* stack) const {
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
  }

  // Results returned as lists: one list of all results, or (several returned
  // lists) consecutive groups of `list_lengths`.
  void push_lists(const c10::SmallVector<at::Tensor, 4>& results, const c10::SmallVector<size_t, 8>& list_lengths,
                  torch::jit::Stack* stack) const {
    size_t next = 0;
    for (size_t k = 0; k < returns_; ++k) {
      size_t n = returns_ == 1 ? results.size() : list_lengths[k];
      std::vector<at::Tensor> group(results.begin() + next, results.begin() + next + n);
      next += n;
      torch::jit::push(*stack, c10::List<at::Tensor>(group));
    }
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
  bool fusable_ = false;            // OpCall::fusable of every call
  int scalar_list_ = -1;            // the position of the schema's Scalar[] (foreach ops have at most one)
  std::string base_name_;           // "any" for aten::any.dims
  bool out_checked_first_ = false;  // set with registered_
  bool out_generated_ = false;      // an out= form with no CPU kernel of its own (set with registered_)
};

}  // namespace

torch::CppFunction lowered_kernel(const lowering::Entry& entry, Variant variant, const c10::FunctionSchema& schema) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<LoweredKernel>(entry, variant, schema));
}

}  // namespace torch_pjrt::glue
