// Foreach ops (torch._foreach_*): one call over lists of tensors, as
// torch.optim's foreach steps and clip_grad_norm_ make them.
//
// A foreach op is its per-tensor op applied to each position of its lists,
// as ATen's CPU kernels compute it (they loop over the per-tensor op), so
// each lowering here calls the per-tensor op's own lowering once per
// position. The whole list is one program: one dispatch instead of one per
// tensor. A Scalar[] argument arrives as its length, with its elements as
// runtime scalars after all other arguments (the glue appends them).
#include <array>
#include <stdexcept>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// One argument of a per-tensor call and the position of the foreach call's
// argument it comes from (-1 for a constant made here), so that the
// per-tensor op's host checks on a Python scalar apply to the right one.
struct SubArg {
  Arg arg;
  int from = -1;
};

// Runs the lowering of `aten_name` on `args`; its runtime checks become the
// foreach call's, and its errors name the foreach op.
Value per_tensor(Context& cx, const char* aten_name, std::vector<SubArg> args) {
  std::vector<Arg> plain;
  for (const SubArg& a : args) plain.push_back(a.arg);
  const Entry* e = find_entry(aten_name);
  if (!e) throw std::logic_error(std::string("foreach: no lowering for ") + aten_name);
  Context sub(cx.b, std::move(plain), cx.op());
  V out = e->fn(sub);
  for (const Check& c : sub.checks()) cx.check(c.failed, c.message, c.kind);
  for (const ScalarCheck& c : sub.scalar_checks())
    if (c.arg < args.size() && args[c.arg].from >= 0) cx.check_scalar(args[c.arg].from, c.fits, c.message);
  return out.at(0);
}

SubArg at(Context& cx, size_t i) { return {cx.arg(i), static_cast<int>(i)}; }
SubArg one(Context& cx) { return {Arg::scalar(cx.b.constant(1, DType::I64))}; }

// The tensors of list argument i, after CPU's check that every list is as
// long as the first.
const std::vector<Value>& list(Context& cx, size_t i) {
  const auto& first = cx.tensors(0);
  const auto& l = cx.tensors(i);
  if (l.size() != first.size())
    cx.fail("Tensor lists must have the same number of tensors, got " + std::to_string(first.size()) + " and " +
            std::to_string(l.size()));
  return l;
}
// Element k of the Scalar[] whose length is argument i: the runtime scalars
// after the schema's arguments (the only Scalar[] of a foreach schema).
SubArg scalar_at(Context& cx, size_t i, size_t k) {
  const auto n = static_cast<size_t>(cx.integer(i));
  if (n != cx.tensors(0).size()) cx.fail("Tensor list must have same number of elements as scalar list.");
  return at(cx, cx.size() - n + k);
}
// The Tensor `other` of a .Tensor overload: CPU takes a zero-dim tensor only.
SubArg zero_dim_tensor(Context& cx, size_t i) {
  const Value& t = cx.tensor(i);
  if (t.rank() != 0)
    cx.fail("scalar tensor expected to be 0 dim but it has " + std::to_string(t.rank()) + " dimensions and " +
            std::to_string(t.type.numel()) + " elements.");
  return at(cx, i);
}

// Where an argument of the per-tensor call comes from, for list position k.
enum class From : uint8_t {
  Element,   // element k of list argument i
  Same,      // argument i as is (a Scalar)
  ScalarAt,  // element k of the Scalar[] whose length is argument i
  ZeroDim,   // argument i, a zero-dim tensor (.Tensor overloads)
  OrOne,     // argument i, or 1 where it is None (alpha, value)
  One,       // the constant 1 (alpha of add/sub with a scalar)
};
struct Source {
  From from;
  uint8_t i = 0;
};
// The per-tensor arguments of a foreach schema, in the per-tensor op's order.
struct Recipe {
  std::array<Source, 4> args;
  size_t n;
};

// Argument `s` of the per-tensor call at list position k.
SubArg source_arg(Context& cx, Source s, size_t k) {
  switch (s.from) {
    case From::Element:
      return {Arg::tensor(cx.tensors(s.i)[k])};
    case From::Same:
      return at(cx, s.i);
    case From::ScalarAt:
      return scalar_at(cx, s.i, k);
    case From::ZeroDim:
      return zero_dim_tensor(cx, s.i);
    case From::OrOne:
      return cx.none(s.i) ? one(cx) : at(cx, s.i);
    case From::One:
      break;
  }
  return one(cx);
}

// One call of per-tensor op `Op` per position of list 0, its arguments made as `R` says.
template <const char* Op, const Recipe& R>
V apply(Context& cx) {
  for (size_t a = 0; a < R.n; ++a) {  // CPU's checks, before any call
    if (R.args[a].from == From::Element) list(cx, R.args[a].i);
    if (R.args[a].from == From::ZeroDim) zero_dim_tensor(cx, R.args[a].i);
  }
  V out;
  for (size_t k = 0; k < cx.tensors(0).size(); ++k) {
    std::vector<SubArg> args;
    for (size_t a = 0; a < R.n; ++a) args.push_back(source_arg(cx, R.args[a], k));
    out.push_back(per_tensor(cx, Op, std::move(args)));
  }
  return out;
}

constexpr Source E(uint8_t i) { return {From::Element, i}; }
// _foreach_op(Tensor[] self): op(self[k]).
constexpr Recipe kUnary{{E(0)}, 1};
// .Scalar(Tensor[] self, Scalar s): op(self[k], s); with add/sub's alpha 1.
constexpr Recipe kScalar{{E(0), {From::Same, 1}}, 2};
constexpr Recipe kScalarAlpha{{E(0), {From::Same, 1}, {From::One}}, 3};
// .ScalarList(Tensor[] self, Scalar[] s): op(self[k], s[k]); with add/sub's alpha 1.
constexpr Recipe kScalarList{{E(0), {From::ScalarAt, 1}}, 2};
constexpr Recipe kScalarListAlpha{{E(0), {From::ScalarAt, 1}, {From::One}}, 3};
// .List(Tensor[] self, Tensor[] other[, Scalar alpha]): op(self[k], other[k][, alpha]).
constexpr Recipe kList{{E(0), E(1)}, 2};
constexpr Recipe kListAlpha{{E(0), E(1), {From::OrOne, 2}}, 3};
// .Tensor(Tensor[] self, Tensor other[, Scalar alpha]): op(self[k], other[, alpha]), other zero-dim.
constexpr Recipe kTensor{{E(0), {From::ZeroDim, 1}}, 2};
constexpr Recipe kTensorAlpha{{E(0), {From::ZeroDim, 1}, {From::OrOne, 2}}, 3};
// addcmul/addcdiv(Tensor[] self, Tensor[] t1, Tensor[] t2, Scalar value=1 | Scalar[] scalars).
constexpr Recipe kPointwise{{E(0), E(1), E(2), {From::OrOne, 3}}, 4};
constexpr Recipe kPointwiseList{{E(0), E(1), E(2), {From::ScalarAt, 3}}, 4};
// lerp(Tensor[] self, Tensor[] end, Scalar weight | Tensor[] weights | Scalar[] weight).
constexpr Recipe kLerp{{E(0), E(1), {From::Same, 2}}, 3};
constexpr Recipe kLerpList{{E(0), E(1), E(2)}, 3};
constexpr Recipe kLerpScalarList{{E(0), E(1), {From::ScalarAt, 2}}, 3};

// _foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype): linalg_vector_norm of each, whole.
V norm(Context& cx) {
  V out;
  for (const Value& t : cx.tensors(0))
    out.push_back(per_tensor(cx, "aten::linalg_vector_norm",
                             {{Arg::tensor(t)},
                              cx.none(1) ? SubArg{Arg::scalar(cx.b.constant(2, DType::I64))} : at(cx, 1),
                              {Arg::none()},
                              {Arg::boolean(false)},
                              cx.none(2) ? SubArg{Arg::none()} : at(cx, 2)}));
  return out;
}

#define PER_TENSOR_OP(name) constexpr char k_##name[] = "aten::" #name;
PER_TENSOR_OP(abs)
PER_TENSOR_OP(acos)
PER_TENSOR_OP(asin)
PER_TENSOR_OP(atan)
PER_TENSOR_OP(ceil)
PER_TENSOR_OP(cos)
PER_TENSOR_OP(cosh)
PER_TENSOR_OP(erf)
PER_TENSOR_OP(erfc)
PER_TENSOR_OP(exp)
PER_TENSOR_OP(expm1)
PER_TENSOR_OP(floor)
PER_TENSOR_OP(frac)
PER_TENSOR_OP(lgamma)
PER_TENSOR_OP(log)
PER_TENSOR_OP(log10)
PER_TENSOR_OP(log1p)
PER_TENSOR_OP(log2)
PER_TENSOR_OP(neg)
PER_TENSOR_OP(reciprocal)
PER_TENSOR_OP(round)
PER_TENSOR_OP(rsqrt)
PER_TENSOR_OP(sigmoid)
PER_TENSOR_OP(sign)
PER_TENSOR_OP(sin)
PER_TENSOR_OP(sinh)
PER_TENSOR_OP(sqrt)
PER_TENSOR_OP(tan)
PER_TENSOR_OP(tanh)
PER_TENSOR_OP(trunc)
PER_TENSOR_OP(zero)
PER_TENSOR_OP(max)
PER_TENSOR_OP(addcmul)
PER_TENSOR_OP(addcdiv)
#undef PER_TENSOR_OP
constexpr char k_add_tensor[] = "aten::add.Tensor";
constexpr char k_add_scalar[] = "aten::add.Scalar";
constexpr char k_sub_tensor[] = "aten::sub.Tensor";
constexpr char k_sub_scalar[] = "aten::sub.Scalar";
constexpr char k_mul_tensor[] = "aten::mul.Tensor";
constexpr char k_mul_scalar[] = "aten::mul.Scalar";
constexpr char k_div_tensor[] = "aten::div.Tensor";
constexpr char k_div_scalar[] = "aten::div.Scalar";
constexpr char k_clamp_min[] = "aten::clamp_min";
constexpr char k_clamp_min_tensor[] = "aten::clamp_min.Tensor";
constexpr char k_clamp_max[] = "aten::clamp_max";
constexpr char k_clamp_max_tensor[] = "aten::clamp_max.Tensor";
constexpr char k_pow_tensor_tensor[] = "aten::pow.Tensor_Tensor";
constexpr char k_pow_tensor_scalar[] = "aten::pow.Tensor_Scalar";
constexpr char k_lerp_scalar[] = "aten::lerp.Scalar";
constexpr char k_lerp_tensor[] = "aten::lerp.Tensor";

}  // namespace

std::vector<Entry> foreach_lowerings() {
  std::vector<Entry> t = {
      {"aten::_foreach_add.Scalar", apply<k_add_scalar, kScalarAlpha>},
      {"aten::_foreach_add.ScalarList", apply<k_add_scalar, kScalarListAlpha>},
      {"aten::_foreach_add.List", apply<k_add_tensor, kListAlpha>},
      {"aten::_foreach_add.Tensor", apply<k_add_tensor, kTensorAlpha>},
      {"aten::_foreach_sub.Scalar", apply<k_sub_scalar, kScalarAlpha>},
      {"aten::_foreach_sub.ScalarList", apply<k_sub_scalar, kScalarListAlpha>},
      {"aten::_foreach_sub.List", apply<k_sub_tensor, kListAlpha>},
      {"aten::_foreach_mul.Scalar", apply<k_mul_scalar, kScalar>},
      {"aten::_foreach_mul.ScalarList", apply<k_mul_scalar, kScalarList>},
      {"aten::_foreach_mul.List", apply<k_mul_tensor, kList>},
      {"aten::_foreach_mul.Tensor", apply<k_mul_tensor, kTensor>},
      {"aten::_foreach_div.Scalar", apply<k_div_scalar, kScalar>},
      {"aten::_foreach_div.ScalarList", apply<k_div_scalar, kScalarList>},
      {"aten::_foreach_div.List", apply<k_div_tensor, kList>},
      {"aten::_foreach_div.Tensor", apply<k_div_tensor, kTensor>},
      // ATen computes maximum/minimum with a scalar or a list as clamp_min/clamp_max.
      {"aten::_foreach_clamp_min.Scalar", apply<k_clamp_min, kScalar>},
      {"aten::_foreach_clamp_min.ScalarList", apply<k_clamp_min, kScalarList>},
      {"aten::_foreach_clamp_min.List", apply<k_clamp_min_tensor, kList>},
      {"aten::_foreach_maximum.Scalar", apply<k_clamp_min, kScalar>},
      {"aten::_foreach_maximum.ScalarList", apply<k_clamp_min, kScalarList>},
      {"aten::_foreach_maximum.List", apply<k_clamp_min_tensor, kList>},
      {"aten::_foreach_clamp_max.Scalar", apply<k_clamp_max, kScalar>},
      {"aten::_foreach_clamp_max.ScalarList", apply<k_clamp_max, kScalarList>},
      {"aten::_foreach_clamp_max.List", apply<k_clamp_max_tensor, kList>},
      {"aten::_foreach_minimum.Scalar", apply<k_clamp_max, kScalar>},
      {"aten::_foreach_minimum.ScalarList", apply<k_clamp_max, kScalarList>},
      {"aten::_foreach_minimum.List", apply<k_clamp_max_tensor, kList>},
      {"aten::_foreach_pow.Scalar", apply<k_pow_tensor_scalar, kScalar>},
      {"aten::_foreach_pow.ScalarList", apply<k_pow_tensor_scalar, kScalarList>},
      {"aten::_foreach_pow.List", apply<k_pow_tensor_tensor, kList>},
      {"aten::_foreach_addcmul.Scalar", apply<k_addcmul, kPointwise>},
      {"aten::_foreach_addcmul.ScalarList", apply<k_addcmul, kPointwiseList>},
      {"aten::_foreach_addcdiv.Scalar", apply<k_addcdiv, kPointwise>},
      {"aten::_foreach_addcdiv.ScalarList", apply<k_addcdiv, kPointwiseList>},
      {"aten::_foreach_lerp.Scalar", apply<k_lerp_scalar, kLerp>},
      {"aten::_foreach_lerp.List", apply<k_lerp_tensor, kLerpList>},
      {"aten::_foreach_lerp.ScalarList", apply<k_lerp_scalar, kLerpScalarList>},
      {"aten::_foreach_norm.Scalar", norm, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::_foreach_abs", apply<k_abs, kUnary>, Traits().set_in_place_refuses_complex(kAbsInPlaceOfComplex)},
  };
  const std::vector<std::pair<const char*, LowerFn>> unaries = {
      {"aten::_foreach_acos", apply<k_acos, kUnary>},
      {"aten::_foreach_asin", apply<k_asin, kUnary>},
      {"aten::_foreach_atan", apply<k_atan, kUnary>},
      {"aten::_foreach_ceil", apply<k_ceil, kUnary>},
      {"aten::_foreach_cos", apply<k_cos, kUnary>},
      {"aten::_foreach_cosh", apply<k_cosh, kUnary>},
      {"aten::_foreach_erf", apply<k_erf, kUnary>},
      {"aten::_foreach_erfc", apply<k_erfc, kUnary>},
      {"aten::_foreach_exp", apply<k_exp, kUnary>},
      {"aten::_foreach_expm1", apply<k_expm1, kUnary>},
      {"aten::_foreach_floor", apply<k_floor, kUnary>},
      {"aten::_foreach_frac", apply<k_frac, kUnary>},
      {"aten::_foreach_lgamma", apply<k_lgamma, kUnary>},
      {"aten::_foreach_log", apply<k_log, kUnary>},
      {"aten::_foreach_log10", apply<k_log10, kUnary>},
      {"aten::_foreach_log1p", apply<k_log1p, kUnary>},
      {"aten::_foreach_log2", apply<k_log2, kUnary>},
      {"aten::_foreach_neg", apply<k_neg, kUnary>},
      {"aten::_foreach_reciprocal", apply<k_reciprocal, kUnary>},
      {"aten::_foreach_round", apply<k_round, kUnary>},
      {"aten::_foreach_rsqrt", apply<k_rsqrt, kUnary>},
      {"aten::_foreach_sigmoid", apply<k_sigmoid, kUnary>},
      {"aten::_foreach_sign", apply<k_sign, kUnary>},
      {"aten::_foreach_sin", apply<k_sin, kUnary>},
      {"aten::_foreach_sinh", apply<k_sinh, kUnary>},
      {"aten::_foreach_sqrt", apply<k_sqrt, kUnary>},
      {"aten::_foreach_tan", apply<k_tan, kUnary>},
      {"aten::_foreach_tanh", apply<k_tanh, kUnary>},
      {"aten::_foreach_trunc", apply<k_trunc, kUnary>},
      {"aten::_foreach_zero", apply<k_zero, kUnary>},
      {"aten::_foreach_max", apply<k_max, kUnary>},
  };
  for (const auto& [name, fn] : unaries) t.push_back({name, fn});
  return t;
}

}  // namespace torch_pjrt::lowering
