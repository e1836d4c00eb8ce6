#include "engine/program.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "engine/bucketed_view.h"

namespace torch_pjrt::engine {

using hlo::TensorType;
using hlo::Value;
using lowering::Arg;
using lowering::LoweringError;

// ---------------------------------------------------------------- signature

std::string Signature::serialize() const {
  std::ostringstream o;
  o << "sig3\nparams " << params.size();
  for (const auto& p : params) o << ' ' << int(p.kind) << ':' << p.index << ':' << p.call;
  o << "\nslots " << slot_dtypes.size();
  for (DType t : slot_dtypes) o << ' ' << int(t);
  o << "\noutputs " << outputs.size();
  for (const auto& s : outputs) o << ' ' << int(s.kind) << ':' << s.index;
  o << "\nfresh " << fresh_types.size();
  for (size_t i = 0; i < fresh_types.size(); ++i) {
    o << ' ' << fresh_calls[i] << ':' << int(fresh_types[i].dtype) << ':' << fresh_types[i].dims.size();
    for (int64_t d : fresh_types[i].dims) o << ':' << d;
    o << ':' << fresh_types[i].dynamic;
  }
  o << "\ndonations " << donations.size();
  for (const auto& [p, r] : donations) o << ' ' << p << ':' << r;
  o << "\nchecks " << checks.size() << '\n';
  for (const auto& c : checks) o << int(c.kind) << ' ' << c.call << ' ' << c.message.size() << ' ' << c.message << '\n';
  o << "scalar_checks " << scalar_checks.size() << '\n';
  for (const auto& c : scalar_checks)
    o << c.call << ' ' << c.arg << ' ' << int(c.fits) << ' ' << c.message.size() << ' ' << c.message << '\n';
  return o.str();
}

namespace {

// Reads "a:b:c" groups of integers; throws on anything else.
struct SigReader {
  std::istringstream in;
  explicit SigReader(const std::string& s) : in(s) {}
  [[noreturn]] void bad() { throw std::runtime_error("malformed program signature"); }
  void word(const char* w) {
    std::string got;
    if (!(in >> got) || got != w) bad();
  }
  int64_t integer() {
    int64_t v;
    if (!(in >> v)) bad();
    return v;
  }
  int64_t next() {  // after ':'
    char c;
    if (!(in >> c) || c != ':') bad();
    return integer();
  }
  size_t count(const char* w) {
    word(w);
    int64_t n = integer();
    if (n < 0 || n > (int64_t{1} << 24)) bad();
    return static_cast<size_t>(n);
  }
};

}  // namespace

Signature Signature::deserialize(const std::string& text) {
  SigReader r(text);
  Signature s;
  r.word("sig3");
  for (size_t n = r.count("params"); n--;) {
    auto kind = static_cast<Param>(r.integer());
    int32_t index = static_cast<int32_t>(r.next());
    s.params.push_back({kind, index, static_cast<int32_t>(r.next())});
  }
  for (size_t n = r.count("slots"); n--;) s.slot_dtypes.push_back(static_cast<DType>(r.integer()));
  for (size_t n = r.count("outputs"); n--;) {
    auto kind = static_cast<Output>(r.integer());
    s.outputs.push_back({kind, static_cast<int32_t>(r.next())});
  }
  for (size_t n = r.count("fresh"); n--;) {
    s.fresh_calls.push_back(static_cast<int32_t>(r.integer()));
    TensorType t;
    t.dtype = static_cast<DType>(r.next());
    for (int64_t rank = r.next(); rank-- > 0;) t.dims.push_back(r.next());
    t.dynamic = static_cast<uint32_t>(r.next());
    s.fresh_types.push_back(t);
  }
  for (size_t n = r.count("donations"); n--;) {
    int32_t p = static_cast<int32_t>(r.integer());
    s.donations.push_back({p, static_cast<int32_t>(r.next())});
  }
  for (size_t n = r.count("checks"); n--;) {
    auto kind = static_cast<lowering::ErrorKind>(r.integer());
    int32_t call = static_cast<int32_t>(r.integer());
    int64_t len = r.integer();
    if (len < 0 || len > (1 << 20) || r.in.get() != ' ') r.bad();
    std::string message(static_cast<size_t>(len), '\0');
    if (!r.in.read(message.data(), len)) r.bad();
    s.checks.push_back({message, kind, call});
  }
  for (size_t n = r.count("scalar_checks"); n--;) {
    int32_t call = static_cast<int32_t>(r.integer());
    int32_t arg = static_cast<int32_t>(r.integer());
    auto fits = static_cast<DType>(r.integer());
    int64_t len = r.integer();
    if (len < 0 || len > (1 << 20) || r.in.get() != ' ') r.bad();
    std::string message(static_cast<size_t>(len), '\0');
    if (!r.in.read(message.data(), len)) r.bad();
    s.scalar_checks.push_back({call, arg, fits, message});
  }
  return s;
}

bool Signature::operator==(const Signature& o) const { return serialize() == o.serialize(); }

// ---------------------------------------------------------------- builder

int SlotNumbering::index_of(Slot* slot) {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i] == slot) return static_cast<int>(i);
  slots_.push_back(slot);
  born.push_back(0);
  zeroed.push_back(0);
  return static_cast<int>(slots_.size() - 1);
}

ProgramBuilder::SlotValue& ProgramBuilder::slot_value(const TensorRef& r, int s, std::string_view op) {
  if (s >= static_cast<int>(values_.size())) {
    values_.resize(s + 1);
    sig_.slot_dtypes.resize(s + 1, r.view.dtype);
    values_[s].numel = storage_numel(r);
  } else if (sig_.slot_dtypes[s] != r.view.dtype) {
    throw LoweringError(std::string(op) + ": one storage is viewed with two dtypes in one program");
  }
  return values_[s];
}

Value ProgramBuilder::offset_param(const TensorRef& r, Access access, bool fixed) {
  int32_t ref = refs_++;
  if (!takes_offset(access)) return Value{};
  if (fixed) return b_.constant(static_cast<double>(r.view.offset), DType::I64);
  sig_.params.push_back({Signature::Param::Offset, ref, calls_});
  return b_.parameter(TensorType{DType::I64, {}});
}

void ProgramBuilder::read_slot(SlotValue& v, DType dtype, int s) {
  v.has_value = true;
  if (numbering_.zeroed[s]) {
    v.flat = b_.full(0, TensorType{dtype, {v.numel}});
    return;
  }
  v.flat = b_.parameter(TensorType{dtype, {v.numel}});
  v.read = true;
  v.param = static_cast<int>(sig_.params.size());
  sig_.params.push_back({Signature::Param::Slot, s, calls_});
}

const BucketedRef* ProgramBuilder::bucketed_ref(int32_t ref) const {
  return plan_ && plan_->refs.at(ref - plan_ref0_).dynamic ? &plan_->refs[ref - plan_ref0_] : nullptr;
}

Value ProgramBuilder::view_shape_param(int32_t ref, size_t rank) {
  sig_.params.push_back({Signature::Param::ViewShape, ref, calls_});
  return b_.parameter(TensorType{DType::I64, {2 * static_cast<int64_t>(rank)}});
}

Value ProgramBuilder::read_arg(const OpCall& call, const TensorRef& r) {
  const std::string& op = call.op->name;
  // A slot's flat value becomes a parameter the first time the sequence
  // reads it before writing all of it.
  const auto [s, fixed] = number_ref(numbering_, call, r, false);
  SlotValue& v = slot_value(r, s, op);
  const int32_t ref = refs_;
  const BucketedRef* bucketed = bucketed_ref(ref);
  if (bucketed && bucketed->forward) {
    if (!v.has_fitted || v.fitted.dims() != bucketed->padded)
      throw LoweringError(op + ": a forwarded argument has no value of its sizes");
    ++refs_;
    return v.fitted;
  }
  Access access = bucketed ? Access::Gather : access_of(r.view, v.numel);
  Value offset = offset_param(r, access, fixed);
  if (!v.has_value && access != Access::Empty) read_slot(v, r.view.dtype, s);
  if (bucketed) return read_bucketed_view(b_, v.flat, *bucketed, view_shape_param(ref, r.view.sizes.size()), offset);
  if (fixed) return read_view_at_offset(b_, v.flat, r.view, access);
  return read_view(b_, v.flat, r.view, access, offset);
}

std::vector<Arg> ProgramBuilder::lower_args(const OpCall& call) {
  std::vector<Arg> args;
  for (size_t i = 0; i < call.args.size(); ++i) {
    const CallArg& a = call.args[i];
    switch (a.kind) {
      case CallArg::Kind::None:
        args.push_back(Arg::none());
        break;
      case CallArg::Kind::Tensor:
        args.push_back(Arg::tensor(read_arg(call, a.tensor)));
        break;
      case CallArg::Kind::TensorList: {
        std::vector<Value> vs;
        for (const auto& t : a.list) vs.push_back(read_arg(call, t));
        Arg arg = Arg::tensor_list(vs);
        arg.ints = a.present;
        args.push_back(arg);
        break;
      }
      case CallArg::Kind::Scalar: {
        if (a.fixed) {
          const double v = *real_scalar(a);
          Arg arg = Arg::scalar(b_.constant(v, a.scalar_dtype));
          arg.fixed = v;
          args.push_back(arg);
          break;
        }
        Value p = b_.parameter(TensorType{a.scalar_dtype, {}});
        sig_.params.push_back({Signature::Param::Scalar, static_cast<int32_t>(i), calls_});
        args.push_back(a.host_tensor ? Arg::tensor(p) : Arg::scalar(p));
        break;
      }
      case CallArg::Kind::Rng: {
        Value p = b_.parameter(TensorType{DType::U64, {2}});
        sig_.params.push_back({Signature::Param::Rng, static_cast<int32_t>(i), calls_});
        args.push_back(Arg::rng(p));
        break;
      }
      case CallArg::Kind::Int:
        args.push_back(Arg::integer(a.i));
        break;
      case CallArg::Kind::Bool:
        args.push_back(Arg::boolean(a.i != 0));
        break;
      case CallArg::Kind::DType:
        args.push_back(Arg::dtype(static_cast<DType>(a.i)));
        break;
      case CallArg::Kind::Ints:
        args.push_back(Arg::integers(a.ints));
        break;
      case CallArg::Kind::String:
        args.push_back(Arg::string(a.s));
        break;
    }
  }
  return args;
}

void ProgramBuilder::add(const OpCall& call, const BucketPlan* plan) {
  const std::string& op = call.op->name;
  plan_ = plan;
  plan_ref0_ = refs_;
  plan_fresh0_ = static_cast<int32_t>(sig_.fresh_types.size());
  lowering::Context cx(b_, lower_args(call), op);
  std::vector<Value> results = call.op->lower(cx);
  if (!call.targets.empty() && results.size() < call.targets.size())
    throw LoweringError(op + ": lowering returned fewer results than the op writes");
  for (size_t k = 0; k < results.size(); ++k) {
    if (k >= call.targets.size() || !call.targets[k].slot)
      store_fresh(call, results[k]);
    else
      store_target(call, call.targets[k], results[k]);
  }
  record_checks(cx);
  ++calls_;
}

void ProgramBuilder::store_fresh(const OpCall& call, Value v) {
  const std::string& op = call.op->name;
  sig_.fresh_calls.push_back(calls_);
  if (!v.type.dynamic) {
    sig_.fresh_types.push_back(v.type);
    fresh_.push_back(b_.reshape(v, {v.type.numel()}));
    return;
  }
  const int32_t index = static_cast<int32_t>(sig_.fresh_types.size());
  if (!plan_) throw LoweringError(op + ": a dynamic result outside a bucketed call");
  const hlo::Dims& buckets = plan_->results.at(index - plan_fresh0_);
  if (static_cast<int64_t>(buckets.size()) != v.rank())
    throw LoweringError(op + ": a bucketed result has another rank than the exact one");
  sig_.fresh_types.push_back(capacity_of(v.type, buckets));
  Value sizes = b_.parameter(TensorType{DType::I64, {v.rank()}});
  sig_.params.push_back({Signature::Param::ResultShape, index, calls_});
  fresh_.push_back(compact_bucketed_result(b_, v, sizes, buckets));
}

void ProgramBuilder::store_bucketed_fresh(const OpCall& call, const TensorRef& target, const BucketedRef& bucketed,
                                          Value v) {
  // A fused region's fresh result: its new storage holds the value
  // compacted at its true sizes (the first half of its view's shape).
  const ViewSpec& view = target.view;
  const int32_t ref = refs_;
  const int s = number_ref(numbering_, call, target, true).first;
  SlotValue& sv = slot_value(target, s, call.op->name);
  offset_param(target, Access::Whole);
  const int64_t rank = static_cast<int64_t>(view.sizes.size());
  Value sizes = b_.slice(view_shape_param(ref, view.sizes.size()), {0}, {rank}, {1});
  if (v.rank() != rank || capacity_of(v.type, bucketed.padded).numel() != sv.numel)
    throw LoweringError(call.op->name + ": a bucketed result does not fill its storage");
  Value value = b_.convert(v, view.dtype);
  sv.flat = compact_bucketed_result(b_, value, sizes, bucketed.padded);
  sv.fitted = fit_to_buckets(b_, value, sizes, bucketed.padded);
  sv.has_value = sv.written = sv.has_fitted = true;
}

void ProgramBuilder::store_target(const OpCall& call, const TensorRef& target, Value v) {
  const std::string& op = call.op->name;
  const ViewSpec& view = target.view;
  if (!hlo::can_cast(v.dtype(), view.dtype))  // checked for empty tensors too, as on CPU
    throw LoweringError(op + ": result type " + std::string(hlo::scalar_type_name(v.dtype())) +
                        " can't be cast to the desired output type " + std::string(hlo::scalar_type_name(view.dtype)));
  if (view.numel() == 0 && v.type.numel() == 0) {
    number_ref(numbering_, call, target, true);  // numbered as make_key numbers it
    offset_param(target, Access::Empty);
    return;
  }
  const BucketedRef* bucketed = bucketed_ref(refs_);
  if (bucketed && bucketed->fresh) return store_bucketed_fresh(call, target, *bucketed, v);
  if (bucketed ? v.dims() != bucketed->padded || (v.type.dynamic & ~bucketed->dynamic_sizes) != 0
               : v.dims() != view.sizes || v.type.dynamic != 0)
    throw LoweringError(op + ": output with shape " + hlo::dims_str(view.sizes) +
                        " doesn't match the broadcast shape " + hlo::dims_str(v.dims()));
  const int32_t ref = refs_;
  const auto [s, fixed] = number_ref(numbering_, call, target, true);
  SlotValue& sv = slot_value(target, s, op);
  Access access = bucketed ? Access::Gather : access_of(view, sv.numel);
  Value offset = offset_param(target, access, fixed);
  // A partial write keeps the rest of the storage: read it first.
  if (!sv.has_value && access != Access::Whole) read_slot(sv, view.dtype, s);
  Value base = sv.has_value ? sv.flat : b_.full(0, TensorType{view.dtype, {sv.numel}});
  if (bucketed) {
    Value shape = view_shape_param(ref, view.sizes.size());
    sv.flat = write_bucketed_view(b_, base, b_.convert(v, view.dtype), *bucketed, shape, offset);
  } else if (fixed) {
    sv.flat = write_view_at_offset(b_, base, b_.convert(v, view.dtype), view, access);
  } else {
    sv.flat = write_view(b_, base, b_.convert(v, view.dtype), view, access, offset);
  }
  sv.has_value = sv.written = true;
  sv.has_fitted = false;
}

void ProgramBuilder::record_checks(const lowering::Context& cx) {
  for (const auto& c : cx.checks()) {
    sig_.checks.push_back({c.message, c.kind, calls_});
    checks_.push_back(c.failed);
  }
  for (const auto& c : cx.scalar_checks())
    sig_.scalar_checks.push_back({calls_, static_cast<int32_t>(c.arg), c.fits, c.message});
}

Program ProgramBuilder::finish(const std::vector<uint8_t>* dead) {
  std::vector<Value> outs;
  for (size_t i = 0; i < fresh_.size(); ++i) {
    sig_.outputs.push_back({Signature::Output::Fresh, static_cast<int32_t>(i)});
    outs.push_back(fresh_[i]);
  }
  for (size_t s = 0; s < values_.size(); ++s) {
    if (!values_[s].written || (dead && s < dead->size() && (*dead)[s])) continue;
    if (values_[s].read) {
      int32_t out = static_cast<int32_t>(outs.size());
      sig_.donations.push_back({values_[s].param, out});
      b_.alias_parameter(values_[s].param, out);
    }
    sig_.outputs.push_back({Signature::Output::SlotWrite, static_cast<int32_t>(s)});
    outs.push_back(values_[s].flat);
  }
  if (!checks_.empty()) {  // one pred[n] output: read with one copy at a sync point
    std::vector<Value> flags;
    for (const Value& c : checks_) flags.push_back(b_.reshape(c, {1}));
    sig_.outputs.push_back({Signature::Output::Check, 0});
    outs.push_back(flags.size() == 1 ? flags[0] : b_.concatenate(flags, 0));
  }
  b_.set_results(outs);
  return Program{b_.module_text(), std::move(sig_)};
}

}  // namespace torch_pjrt::engine
