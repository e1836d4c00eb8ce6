// Foreach ops (torch._foreach_*): one call over lists of tensors, as
// torch.optim's foreach steps and clip_grad_norm_ make them.
//
// A foreach op is its per-tensor op applied to each position of its lists,
// as ATen's CPU kernels compute it (they loop over the per-tensor op), so
// each lowering here calls the per-tensor op's own lowering once per
// position. The whole list is one program: one dispatch instead of one per
// tensor. A Scalar[] argument arrives as its length, with its elements as
// runtime scalars after all other arguments (the glue appends them).
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
SubArg tensor_arg(const Value& v) { return {Arg::tensor(v)}; }
// The Tensor `other` of a .Tensor overload: CPU takes a zero-dim tensor only.
SubArg zero_dim_tensor(Context& cx, size_t i) {
  const Value& t = cx.tensor(i);
  if (t.rank() != 0)
    cx.fail("scalar tensor expected to be 0 dim but it has " + std::to_string(t.rank()) + " dimensions and " +
            std::to_string(t.type.numel()) + " elements.");
  return at(cx, i);
}

// One per-tensor call per position of list 0; `args(k)` gives position k's arguments.
template <typename F>
V each(Context& cx, const char* aten_name, F args) {
  V out;
  for (size_t k = 0; k < cx.tensors(0).size(); ++k) out.push_back(per_tensor(cx, aten_name, args(k)));
  return out;
}

// _foreach_op(Tensor[] self) -> Tensor[]: op(self[k]).
template <const char* Op>
V unary(Context& cx) {
  return each(cx, Op, [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k])}; });
}
// _foreach_op.Scalar(Tensor[] self, Scalar scalar): op(self[k], scalar).
template <const char* Op>
V with_scalar(Context& cx) {
  return each(cx, Op, [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), at(cx, 1)}; });
}
// _foreach_op.ScalarList(Tensor[] self, Scalar[] scalars): op(self[k], scalars[k]).
template <const char* Op>
V with_scalar_list(Context& cx) {
  return each(cx, Op, [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), scalar_at(cx, 1, k)}; });
}
// _foreach_op.List(Tensor[] self, Tensor[] other): op(self[k], other[k]).
template <const char* Op>
V with_list(Context& cx) {
  const auto& other = list(cx, 1);
  return each(cx, Op,
              [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(other[k])}; });
}
// _foreach_op.Tensor(Tensor[] self, Tensor other): op(self[k], other), other zero-dim.
template <const char* Op>
V with_tensor(Context& cx) {
  const SubArg other = zero_dim_tensor(cx, 1);
  return each(cx, Op, [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), other}; });
}
// The same with add/sub's alpha (argument 2): op(self[k], other, alpha).
template <const char* Op>
V with_list_alpha(Context& cx) {
  const auto& other = list(cx, 1);
  return each(cx, Op, [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(other[k]), cx.none(2) ? one(cx) : at(cx, 2)};
  });
}
template <const char* Op>
V with_tensor_alpha(Context& cx) {
  const SubArg other = zero_dim_tensor(cx, 1);
  return each(cx, Op, [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), other, cx.none(2) ? one(cx) : at(cx, 2)};
  });
}
// add.Scalar/sub.Scalar with alpha 1, for the Scalar and ScalarList forms.
template <const char* Op>
V with_scalar_alpha(Context& cx) {
  return each(cx, Op, [&](size_t k) { return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), at(cx, 1), one(cx)}; });
}
template <const char* Op>
V with_scalar_list_alpha(Context& cx) {
  return each(cx, Op, [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), scalar_at(cx, 1, k), one(cx)};
  });
}

// _foreach_addcmul/addcdiv(Tensor[] self, Tensor[] tensor1, Tensor[] tensor2, Scalar value=1 | Scalar[] scalars).
template <const char* Op>
V pointwise_scalar(Context& cx) {
  const auto &t1 = list(cx, 1), &t2 = list(cx, 2);
  return each(cx, Op, [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(t1[k]), tensor_arg(t2[k]),
                               cx.none(3) ? one(cx) : at(cx, 3)};
  });
}
template <const char* Op>
V pointwise_scalar_list(Context& cx) {
  const auto &t1 = list(cx, 1), &t2 = list(cx, 2);
  return each(cx, Op, [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(t1[k]), tensor_arg(t2[k]), scalar_at(cx, 3, k)};
  });
}

// _foreach_lerp(Tensor[] self, Tensor[] tensors1, Scalar weight | Tensor[] weights | Scalar[] weight).
V lerp_scalar(Context& cx) {
  const auto& end = list(cx, 1);
  return each(cx, "aten::lerp.Scalar", [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(end[k]), at(cx, 2)};
  });
}
V lerp_list(Context& cx) {
  const auto &end = list(cx, 1), &weight = list(cx, 2);
  return each(cx, "aten::lerp.Tensor", [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(end[k]), tensor_arg(weight[k])};
  });
}
V lerp_scalar_list(Context& cx) {
  const auto& end = list(cx, 1);
  return each(cx, "aten::lerp.Scalar", [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]), tensor_arg(end[k]), scalar_at(cx, 2, k)};
  });
}

// _foreach_norm.Scalar(Tensor[] self, Scalar ord=2, ScalarType? dtype): linalg_vector_norm of each, whole.
V norm(Context& cx) {
  return each(cx, "aten::linalg_vector_norm", [&](size_t k) {
    return std::vector<SubArg>{tensor_arg(cx.tensors(0)[k]),
                               cx.none(1) ? SubArg{Arg::scalar(cx.b.constant(2, DType::I64))} : at(cx, 1),
                               {Arg::none()},
                               {Arg::boolean(false)},
                               cx.none(2) ? SubArg{Arg::none()} : at(cx, 2)};
  });
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

}  // namespace

std::vector<Entry> foreach_lowerings() {
  std::vector<Entry> t = {
      {"aten::_foreach_add.Scalar", with_scalar_alpha<k_add_scalar>},
      {"aten::_foreach_add.ScalarList", with_scalar_list_alpha<k_add_scalar>},
      {"aten::_foreach_add.List", with_list_alpha<k_add_tensor>},
      {"aten::_foreach_add.Tensor", with_tensor_alpha<k_add_tensor>},
      {"aten::_foreach_sub.Scalar", with_scalar_alpha<k_sub_scalar>},
      {"aten::_foreach_sub.ScalarList", with_scalar_list_alpha<k_sub_scalar>},
      {"aten::_foreach_sub.List", with_list_alpha<k_sub_tensor>},
      {"aten::_foreach_mul.Scalar", with_scalar<k_mul_scalar>},
      {"aten::_foreach_mul.ScalarList", with_scalar_list<k_mul_scalar>},
      {"aten::_foreach_mul.List", with_list<k_mul_tensor>},
      {"aten::_foreach_mul.Tensor", with_tensor<k_mul_tensor>},
      {"aten::_foreach_div.Scalar", with_scalar<k_div_scalar>},
      {"aten::_foreach_div.ScalarList", with_scalar_list<k_div_scalar>},
      {"aten::_foreach_div.List", with_list<k_div_tensor>},
      {"aten::_foreach_div.Tensor", with_tensor<k_div_tensor>},
      // ATen computes maximum/minimum with a scalar or a list as clamp_min/clamp_max.
      {"aten::_foreach_clamp_min.Scalar", with_scalar<k_clamp_min>},
      {"aten::_foreach_clamp_min.ScalarList", with_scalar_list<k_clamp_min>},
      {"aten::_foreach_clamp_min.List", with_list<k_clamp_min_tensor>},
      {"aten::_foreach_maximum.Scalar", with_scalar<k_clamp_min>},
      {"aten::_foreach_maximum.ScalarList", with_scalar_list<k_clamp_min>},
      {"aten::_foreach_maximum.List", with_list<k_clamp_min_tensor>},
      {"aten::_foreach_clamp_max.Scalar", with_scalar<k_clamp_max>},
      {"aten::_foreach_clamp_max.ScalarList", with_scalar_list<k_clamp_max>},
      {"aten::_foreach_clamp_max.List", with_list<k_clamp_max_tensor>},
      {"aten::_foreach_minimum.Scalar", with_scalar<k_clamp_max>},
      {"aten::_foreach_minimum.ScalarList", with_scalar_list<k_clamp_max>},
      {"aten::_foreach_minimum.List", with_list<k_clamp_max_tensor>},
      {"aten::_foreach_pow.Scalar", with_scalar<k_pow_tensor_scalar>},
      {"aten::_foreach_pow.ScalarList", with_scalar_list<k_pow_tensor_scalar>},
      {"aten::_foreach_pow.List", with_list<k_pow_tensor_tensor>},
      {"aten::_foreach_addcmul.Scalar", pointwise_scalar<k_addcmul>},
      {"aten::_foreach_addcmul.ScalarList", pointwise_scalar_list<k_addcmul>},
      {"aten::_foreach_addcdiv.Scalar", pointwise_scalar<k_addcdiv>},
      {"aten::_foreach_addcdiv.ScalarList", pointwise_scalar_list<k_addcdiv>},
      {"aten::_foreach_lerp.Scalar", lerp_scalar},
      {"aten::_foreach_lerp.List", lerp_list},
      {"aten::_foreach_lerp.ScalarList", lerp_scalar_list},
      {"aten::_foreach_norm.Scalar", norm, Traits().fixes(1, kNormFixedOrders)},
  };
  const std::vector<std::pair<const char*, LowerFn>> unaries = {
      {"aten::_foreach_abs", unary<k_abs>},         {"aten::_foreach_acos", unary<k_acos>},
      {"aten::_foreach_asin", unary<k_asin>},       {"aten::_foreach_atan", unary<k_atan>},
      {"aten::_foreach_ceil", unary<k_ceil>},       {"aten::_foreach_cos", unary<k_cos>},
      {"aten::_foreach_cosh", unary<k_cosh>},       {"aten::_foreach_erf", unary<k_erf>},
      {"aten::_foreach_erfc", unary<k_erfc>},       {"aten::_foreach_exp", unary<k_exp>},
      {"aten::_foreach_expm1", unary<k_expm1>},     {"aten::_foreach_floor", unary<k_floor>},
      {"aten::_foreach_frac", unary<k_frac>},       {"aten::_foreach_lgamma", unary<k_lgamma>},
      {"aten::_foreach_log", unary<k_log>},         {"aten::_foreach_log10", unary<k_log10>},
      {"aten::_foreach_log1p", unary<k_log1p>},     {"aten::_foreach_log2", unary<k_log2>},
      {"aten::_foreach_neg", unary<k_neg>},         {"aten::_foreach_reciprocal", unary<k_reciprocal>},
      {"aten::_foreach_round", unary<k_round>},     {"aten::_foreach_rsqrt", unary<k_rsqrt>},
      {"aten::_foreach_sigmoid", unary<k_sigmoid>}, {"aten::_foreach_sign", unary<k_sign>},
      {"aten::_foreach_sin", unary<k_sin>},         {"aten::_foreach_sinh", unary<k_sinh>},
      {"aten::_foreach_sqrt", unary<k_sqrt>},       {"aten::_foreach_tan", unary<k_tan>},
      {"aten::_foreach_tanh", unary<k_tanh>},       {"aten::_foreach_trunc", unary<k_trunc>},
  };
  for (const auto& [name, fn] : unaries) t.push_back({name, fn});
  return t;
}

}  // namespace torch_pjrt::lowering
