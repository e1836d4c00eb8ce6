// Elementwise arithmetic, comparison, logic and unary math.
#include <cmath>
#include <cstring>
#include <optional>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// Unary float function: ints promote to float32, f16/bf16 compute in f32.
V float_unary(Context& cx, std::string_view op) {
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(cx.b.unary(op, x), out)};
}

// Arguments `idx` (and the optional ones that are present) converted to the
// opmath type of dtype t: PyTorch computes fused arithmetic on float16 and
// bfloat16 in float32 and rounds once, so composite formulas must too.
Value opmath_arg(Context& cx, size_t i, DType t) { return cx.as(i, hlo::opmath_type(t)); }

// NaN-propagating maximum / minimum. The CPU plugin's stablehlo.maximum and
// minimum return the first operand when only the second is NaN; PyTorch
// returns NaN when either is.
Value nan_extremum(hlo::Builder& b, Value x, Value y, bool is_max) {
  Value m = is_max ? b.max(x, y) : b.min(x, y);
  if (!hlo::is_floating(m.dtype())) return m;
  m = b.select(b.compare(y, y, "NE"), y, m);
  return b.select(b.compare(x, x, "NE"), x, m);
}

bool is_bool_arg(Context& cx, size_t i) { return cx.tensor(i).dtype() == DType::Bool; }

// CPU kernels that dispatch over the float dtypes (and the complex ones where
// `complex_ok`) only: integer and bool inputs are refused, not promoted.
void require_float_kernel(Context& cx, DType t, const char* kernel, bool complex_ok) {
  if (!hlo::is_floating(t) && !(complex_ok && hlo::is_complex(t))) refuse_dtype(cx, t, kernel);
}

// PyTorch refuses subtraction with a bool operand (tensor or scalar).
void check_sub(Context& cx) {
  if (is_bool_arg(cx, 0) && is_bool_arg(cx, 1))
    cx.fail(
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
        "operator instead.");
  if (is_bool_arg(cx, 0) || is_bool_arg(cx, 1))
    cx.fail(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, "
        "use the `~` or `logical_not()` operator instead.");
}

// a + alpha * b (alpha argument `alpha_arg`, optional), alpha scaling in opmath.
Value add_scaled(Context& cx, size_t a_arg, size_t b_arg, size_t alpha_arg, bool subtract) {
  DType t = cx.result_type({a_arg, b_arg});
  if (cx.none(alpha_arg)) {
    Value a = cx.as(a_arg, t), b = cx.as(b_arg, t);
    return subtract ? cx.b.sub(a, b) : cx.b.add(a, b);
  }
  // ATen's alpha_check on the result dtype.
  DType at = cx.tensor(alpha_arg).dtype();
  if (at == DType::Bool && t != DType::Bool) cx.fail("Boolean alpha only supported for Boolean results.");
  if (!hlo::is_floating(t) && !hlo::is_complex(t) && (hlo::is_floating(at) || hlo::is_complex(at)))
    cx.fail("For integral input tensors, argument alpha must not be a floating point number.");
  if (!hlo::is_complex(t) && hlo::is_complex(at))
    cx.fail("For non-complex input tensors, argument alpha must not be a complex number.");
  DType m = hlo::opmath_type(t);
  check_scalar_fits(cx, alpha_arg, m);
  Value a = cx.as(a_arg, m), b = cx.b.mul(cx.as(b_arg, m), cx.as(alpha_arg, m));
  return cx.b.convert(subtract ? cx.b.sub(a, b) : cx.b.add(a, b), t);
}

// ---- arithmetic

V add_tensor(Context& cx) { return {add_scaled(cx, 0, 1, 2, false)}; }
V sub_tensor(Context& cx) {
  check_sub(cx);
  return {add_scaled(cx, 0, 1, 2, true)};
}
// rsub(self, other, alpha) = other - alpha * self
V rsub_tensor(Context& cx) {
  check_sub(cx);
  return {add_scaled(cx, 1, 0, 2, true)};
}
V mul_tensor(Context& cx) {
  auto [a, b] = promote(cx, 0, 1);
  return {cx.b.binary(hlo::product_op(a.dtype()), a, b)};
}

// Round toward zero (NaN and infinities pass through).
Value float_trunc(hlo::Builder& b, Value q) {
  return b.select(b.compare(q, b.constant(0, q.dtype()), "LT"), b.unary("stablehlo.ceil", q),
                  b.unary("stablehlo.floor", q));
}

// PyTorch's floor division of floats (div_floor_floating): floor((a - fmod(a, b)) / b)
// with the remainder's sign fixed up, not floor(a / b), which rounds 1 / 0.1
// up to 10 where Python's 1 // 0.1 is 9. Division by zero gives a / b.
Value float_floor_div(hlo::Builder& b, Value a, Value d) {
  DType t = a.dtype();
  Value zero = b.constant(0, t), one = b.constant(1, t);
  Value mod = b.binary("stablehlo.remainder", a, d);
  Value div = b.div(b.sub(a, mod), d);
  Value fix = b.and_(b.compare(mod, zero, "NE"), b.compare(b.compare(d, zero, "LT"), b.compare(mod, zero, "LT"), "NE"));
  div = b.select(fix, b.sub(div, one), div);
  Value fl = b.unary("stablehlo.floor", div);
  fl = b.select(b.compare(b.sub(div, fl), b.constant(0.5, t), "GT"), b.add(fl, one), fl);
  Value q = b.div(a, d);
  fl = b.select(b.compare(div, zero, "EQ"), b.mul(q, zero), fl);  // copysign(0, a / b)
  return b.select(b.compare(d, zero, "EQ"), q, fl);
}

// CPU raises ZeroDivisionError for an integer division or remainder of `a`
// by zero: the program checks the divisor `d` (raised at the next sync
// point). An empty result divides nothing (its broadcast has a 0 dim).
void check_divisor(Context& cx, Value a, Value d) {
  if (hlo::is_floating(d.dtype()) || hlo::is_complex(d.dtype())) return;
  if (a.type.numel() == 0 || d.type.numel() == 0) return;
  auto& b = cx.b;
  cx.check(any_true(b, b.compare(d, b.constant(0, d.dtype()), "EQ")), "ZeroDivisionError",
           lowering::ErrorKind::ZeroDivision);
}

Value divide(Context& cx, const std::string& mode) {
  if (!mode.empty() && mode != "trunc" && mode != "floor")
    cx.fail("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '" + mode + "'");
  DType t = cx.result_type({0, 1});
  // The trunc and floor kernels dispatch over real, non-bool dtypes.
  if (!mode.empty() && (hlo::is_complex(t) || t == DType::Bool)) refuse_dtype(cx, t, "div_" + mode + "_cpu");
  if (mode.empty()) t = float_type(t);
  if (!hlo::is_floating(t)) {
    Value a = cx.as(0, t), b = cx.as(1, t);
    check_divisor(cx, a, b);
    if (mode == "floor") return int_floor_div(cx.b, a, b);
    return cx.b.div(a, b);  // trunc
  }
  Value b = opmath_arg(cx, 1, t);
  auto quotient = [&](Value a) {
    Value q = mode == "floor" ? float_floor_div(cx.b, a, b) : cx.b.div(a, b);
    return mode == "trunc" ? float_trunc(cx.b, q) : q;
  };
  if (cx.tensor(0).dtype() == DType::Bool) {
    // XLA folds convert(pred) / 0 to 0; divide the constants 1 and 0 instead.
    DType m = b.dtype();
    Value q = cx.b.select(cx.tensor(0), quotient(cx.b.constant(1, m)), quotient(cx.b.constant(0, m)));
    return cx.b.convert(q, t);
  }
  return cx.b.convert(quotient(opmath_arg(cx, 0, t)), t);
}
V div_tensor(Context& cx) { return {divide(cx, "")}; }
V div_tensor_mode(Context& cx) { return {divide(cx, cx.none(2) ? "" : cx.str(2))}; }

V remainder_tensor(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (hlo::is_complex(t) || t == DType::Bool) refuse_dtype(cx, t, "remainder_cpu");
  // Both operands in dtype t first (a Scalar divisor rounds to float16 too), then opmath.
  DType m = hlo::opmath_type(t);
  Value a = cx.b.convert(cx.as(0, t), m), b = cx.b.convert(cx.as(1, t), m);
  check_divisor(cx, a, b);
  Value r = cx.b.binary("stablehlo.remainder", a, b);
  Value zero = cx.b.constant(0, a.dtype());
  Value fix = cx.b.and_(cx.b.compare(r, zero, "NE"),
                        cx.b.compare(cx.b.compare(r, zero, "LT"), cx.b.compare(b, zero, "LT"), "NE"));
  return {cx.b.convert(cx.b.select(fix, cx.b.add(r, b), r), t)};
}
V fmod_tensor(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (hlo::is_complex(t) || t == DType::Bool) refuse_dtype(cx, t, "fmod_cpu");
  auto [a, b] = promote(cx, 0, 1);
  check_divisor(cx, a, b);
  return {cx.b.binary("stablehlo.remainder", a, b)};
}

V pow_tensor(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (t == DType::Bool) return {cx.b.or_(cx.as(0, t), cx.b.not_(cx.as(1, t)))};  // x ** 0 == 1, 0 ** 1 == 0
  Value a = opmath_arg(cx, 0, t), b = opmath_arg(cx, 1, t);
  Value r = cx.b.binary("stablehlo.power", a, b);
  if (hlo::is_complex(t)) {
    // 0 ** z is 0 for Re(z) > 0 on CPU (exp(z log 0)); XLA gives NaN.
    auto& B = cx.b;
    DType rt = hlo::real_type(a.dtype());
    Value zero_base =
        B.and_(B.compare(B.real(a), B.constant(0, rt), "EQ"), B.compare(B.imag(a), B.constant(0, rt), "EQ"));
    Value pos = B.compare(B.real(b), B.constant(0, rt), "GT");
    r = B.select(B.and_(zero_base, pos), B.constant(0, a.dtype()), r);
  }
  return {cx.b.convert(r, t)};
}
// pow(Tensor, Tensor): CPU's kernel has no bool case (a bool exponent or base
// with a Scalar on the other side is fine).
V pow_tensor_tensor(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (t == DType::Bool) refuse_dtype(cx, t, "pow");
  return pow_tensor(cx);
}
V pow_scalar_base(Context& cx) { return pow_tensor(cx); }

// The exponents ATen's CPU pow(Tensor, Scalar) computes without pow: 1
// copies, 2, 3 and -2 multiply (bfloat16 rounding the square first,
// pow_tensor_scalar_optimized_kernel), 0.5, -0.5 and -1 take the sqrt,
// 1 / sqrt and reciprocal kernels (float16 computes those two with pow).
// They are program constants (Traits::fixed_values) for floating results: XLA's
// CPU backend computes power with a scalar libm call per element, the
// others vectorised.
const std::vector<double> kPowFixedExponents = {1, 2, 3, -2, 0.5, -0.5, -1};

// x ** k in opmath dtype m for one of kPowFixedExponents, rounding squares to t.
Value pow_fixed(hlo::Builder& b, Value x, double k, DType t) {
  DType m = x.dtype();
  auto one = [&] { return b.constant(1, m); };
  auto square = [&] { return t == DType::BF16 ? b.convert(b.convert(b.mul(x, x), t), m) : b.mul(x, x); };
  if (k == 1) return x;
  if (k == 2) return b.mul(x, x);
  if (k == 3) return b.mul(square(), x);
  if (k == -2) return b.div(one(), square());
  if (k == 0.5) return b.unary("stablehlo.sqrt", x);
  if (k == -0.5) return b.div(one(), b.unary("stablehlo.sqrt", x));
  return b.div(one(), x);  // -1
}

// pow(Tensor, Scalar) as ATen's CPU kernel computes it: for float16/bfloat16
// the exponent is first rounded to that dtype and the math runs in float32.
// An exponent of kPowFixedExponents arrives as a constant for floating
// results; one that reaches the lowering as a parameter anyway (a bfloat16
// call that XLA's power would round differently) is selected at run time.
V pow_tensor_scalar(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (!hlo::is_floating(t) && !hlo::is_complex(t) && cx.arg(1).kind == Arg::Kind::Scalar &&
      !hlo::is_floating(cx.tensor(1).dtype()) && hlo::category(cx.tensor(1).dtype()) != hlo::Category::Bool) {
    auto& b = cx.b;
    cx.check(b.compare(cx.as(1, DType::I64), b.constant(0, DType::I64), "LT"),
             "Integers to negative integer powers are not allowed.", ErrorKind::Runtime);
  }
  DType m = hlo::opmath_type(t);
  std::optional<double> k = cx.fixed_scalar(1);
  if (k && t == DType::F16 && (*k == 0.5 || *k == -0.5)) k.reset();  // float16 takes pow there (pow(-0., .5) is 0)
  if (!hlo::is_floating(t) || (m == t && !k)) return pow_tensor(cx);
  auto& b = cx.b;
  Value x = cx.as(0, m);
  if (k) return {b.convert(pow_fixed(b, x, *k, t), t)};
  Value e = b.convert(cx.as(1, t), m);
  Value r = b.binary("stablehlo.power", x, e);
  if (t == DType::BF16)
    for (double s : {3.0, -2.0, 0.5, -0.5, -1.0})
      r = b.select(b.compare(e, b.constant(s, m), "EQ"), pow_fixed(b, x, s, t), r);
  return {b.convert(r, t)};
}

V maximum(Context& cx) {
  refuse_complex(cx, {0, 1}, "maximum not implemented for complex tensors.");
  auto [a, b] = promote(cx, 0, 1);
  return {nan_extremum(cx.b, a, b, true)};
}
V minimum(Context& cx) {
  refuse_complex(cx, {0, 1}, "minimum not implemented for complex tensors.");
  auto [a, b] = promote(cx, 0, 1);
  return {nan_extremum(cx.b, a, b, false)};
}

constexpr const char* kClampComplex = "clamp is not supported for complex types";

// min(max(x, lo), hi), a NaN in any operand giving NaN.
V clamp(Context& cx) {
  if (cx.none(1) && cx.none(2)) cx.fail("torch.clamp: At least one of 'min' or 'max' must not be None");
  refuse_complex(cx, {0, 1, 2}, kClampComplex, ErrorKind::NotImplemented);
  Value x = cx.tensor(0);
  DType t = cx.result_type({0, 1, 2});
  // clamp.Tensor with both bounds runs clamp_cpu, which has no bool case (one
  // bound runs maximum / minimum, which have).
  if (t == DType::Bool && !cx.none(1) && !cx.none(2) && cx.arg(1).kind == Arg::Kind::Tensor &&
      cx.arg(2).kind == Arg::Kind::Tensor)
    refuse_dtype(cx, t, "clamp_cpu");
  for (size_t i : {1, 2}) check_scalar_fits(cx, i, t);  // CPU: min/max.to<scalar_t>()
  x = cx.b.convert(x, t);
  if (!cx.none(1)) x = nan_extremum(cx.b, x, cx.as(1, t), true);
  if (!cx.none(2)) x = nan_extremum(cx.b, x, cx.as(2, t), false);
  return {x};
}
V clamp_min(Context& cx) {
  refuse_complex(cx, {0, 1}, kClampComplex, ErrorKind::NotImplemented);
  check_scalar_fits(cx, 1, cx.result_type({0, 1}));  // CPU: the bound .to<scalar_t>()
  auto [x, lo] = promote(cx, 0, 1);
  return {nan_extremum(cx.b, x, lo, true)};
}
V clamp_max(Context& cx) {
  refuse_complex(cx, {0, 1}, kClampComplex, ErrorKind::NotImplemented);
  check_scalar_fits(cx, 1, cx.result_type({0, 1}));  // CPU: the bound .to<scalar_t>()
  auto [x, hi] = promote(cx, 0, 1);
  return {nan_extremum(cx.b, x, hi, false)};
}

// lerp(self, end, weight): PyTorch requires end (and a tensor weight) in
// self's dtype, and computes in opmath with the formula that is exact at
// both ends: self + w * (end - self) for |w| < 0.5, else end - (end - self) * (1 - w).
V lerp(Context& cx) {
  decline_complex(cx, {0, 1, 2});
  DType t = cx.tensor(0).dtype();
  const char* names[] = {"self", "end", "weight"};
  for (size_t i = 1; i < 3; ++i)
    if (cx.arg(i).kind == Arg::Kind::Tensor && cx.tensor(i).dtype() != t)
      cx.fail("expected dtype " + std::string(hlo::dtype_name(t)) + " for `" + names[i] + "` but got dtype " +
              std::string(hlo::dtype_name(cx.tensor(i).dtype())));
  bool tensor_weight = cx.arg(2).kind == Arg::Kind::Tensor;
  require_float_kernel(cx, t, tensor_weight ? "lerp_kernel_tensor" : "lerp_kernel_scalar", true);
  check_scalar_fits(cx, 2, hlo::opmath_type(t));
  auto& b = cx.b;
  Value s = opmath_arg(cx, 0, t), e = opmath_arg(cx, 1, t), w = opmath_arg(cx, 2, t);
  DType m = s.dtype();
  Value diff = b.sub(e, s);
  Value small = b.compare(b.abs(w), b.constant(0.5, m), "LT");
  Value r = b.select(small, b.add(s, b.mul(w, diff)), b.sub(e, b.mul(diff, b.sub(b.constant(1, m), w))));
  return {b.convert(r, t)};
}
// self + value * t1 * t2, in opmath.
V addcmul(Context& cx) {
  DType t = cx.result_type({0, 1, 2});
  if (t == DType::Bool) refuse_dtype(cx, t, "addcmul_cpu_out");
  DType m = hlo::opmath_type(t);
  check_scalar_fits(cx, 3, m);
  Value v = cx.none(3) ? cx.b.constant(1, m) : cx.as(3, m);
  Value prod = cx.b.mul(cx.b.mul(v, cx.as(1, m)), cx.as(2, m));
  return {cx.b.convert(cx.b.add(cx.as(0, m), prod), t)};
}
// self + value * t1 / t2, in opmath; PyTorch refuses integer t1 and t2.
V addcdiv(Context& cx) {
  if (!hlo::is_floating(cx.tensor(1).dtype()) && !hlo::is_floating(cx.tensor(2).dtype()) && !any_complex(cx, {1, 2}))
    cx.fail(
        "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
        "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
        "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
        "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
        "(input + value * tensor1 / tensor2), for all dtypes.");
  DType t = cx.result_type({0, 1, 2});
  DType m = hlo::opmath_type(t);
  check_scalar_fits(cx, 3, m);
  Value v = cx.none(3) ? cx.b.constant(1, m) : cx.as(3, m);
  Value q = cx.b.div(cx.b.mul(v, cx.as(1, m)), cx.as(2, m));
  return {cx.b.convert(cx.b.add(cx.as(0, m), q), t)};
}

// ---- unary

V neg(Context& cx) {
  if (is_bool_arg(cx, 0))
    cx.fail(
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use "
        "the `~` or `logical_not()` operator instead.");
  return {cx.b.neg(cx.tensor(0))};
}
V abs(Context& cx) {
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), "abs_cpu");
  if (hlo::is_unsigned(x.dtype())) return {x};  // stablehlo.abs takes signed integers only
  return {abs_value(cx.b, x)};
}
// sign of a float is (x > 0) - (x < 0) as in PyTorch: 0 for NaN and for -0.0;
// a bool is its own sign; sgn of a complex x is x / |x| (stablehlo.sign).
V sgn(Context& cx) {
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) return {x};
  if (hlo::is_unsigned(x.dtype()))  // stablehlo.sign takes signed integers only
    return {cx.b.convert(cx.b.compare(x, scalar_like(cx, 0, x), "GT"), x.dtype())};
  if (!hlo::is_floating(x.dtype())) return {cx.b.unary("stablehlo.sign", x)};
  Value zero = scalar_like(cx, 0, x);
  return {cx.b.sub(cx.b.convert(cx.b.compare(x, zero, "GT"), x.dtype()),
                   cx.b.convert(cx.b.compare(x, zero, "LT"), x.dtype()))};
}
V sign(Context& cx) {
  refuse_complex(cx, {0},
                 "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use torch.sgn instead.",
                 ErrorKind::NotImplemented);
  return sgn(cx);
}
V exp(Context& cx) { return float_unary(cx, "stablehlo.exponential"); }
V expm1(Context& cx) { return float_unary(cx, "stablehlo.exponential_minus_one"); }
V log(Context& cx) { return float_unary(cx, "stablehlo.log"); }
V log1p(Context& cx) { return float_unary(cx, "stablehlo.log_plus_one"); }
V sqrt(Context& cx) { return float_unary(cx, "stablehlo.sqrt"); }
V rsqrt(Context& cx) { return float_unary(cx, "stablehlo.rsqrt"); }
V sin(Context& cx) { return float_unary(cx, "stablehlo.sine"); }
V cos(Context& cx) { return float_unary(cx, "stablehlo.cosine"); }
V tan(Context& cx) { return float_unary(cx, "stablehlo.tan"); }
V tanh(Context& cx) { return float_unary(cx, "stablehlo.tanh"); }
V sigmoid(Context& cx) { return float_unary(cx, "stablehlo.logistic"); }
V erf(Context& cx) {
  refuse_complex_kernel(cx, {0}, "erf_vml_cpu");
  return float_unary(cx, "chlo.erf");
}
V erfc(Context& cx) {
  refuse_complex_kernel(cx, {0}, "erfc_vml_cpu");
  return float_unary(cx, "chlo.erfc");
}
V erfinv(Context& cx) {
  refuse_complex_kernel(cx, {0}, "erfinv_vml_cpu");
  return float_unary(cx, "chlo.erf_inv");
}
V acos(Context& cx) { return float_unary(cx, "chlo.acos"); }
V acosh(Context& cx) { return float_unary(cx, "chlo.acosh"); }
V asin(Context& cx) { return float_unary(cx, "chlo.asin"); }
V asinh(Context& cx) { return float_unary(cx, "chlo.asinh"); }
V atan(Context& cx) { return float_unary(cx, "chlo.atan"); }
V atanh(Context& cx) { return float_unary(cx, "chlo.atanh"); }
V cosh(Context& cx) { return float_unary(cx, "chlo.cosh"); }
V sinh(Context& cx) { return float_unary(cx, "chlo.sinh"); }
V lgamma(Context& cx) {
  refuse_complex_kernel(cx, {0}, "lgamma_vml_cpu");
  // ATen's lgamma is +inf at the poles 0, -1, -2, ...
  Value y = float_unary(cx, "chlo.lgamma")[0];
  auto& b = cx.b;
  DType t = y.dtype();
  Value x = b.convert(cx.tensor(0), t);
  Value pole = b.and_(b.compare(x, b.constant(0, t), "LE"), b.compare(b.unary("stablehlo.floor", x), x, "EQ"));
  // and exactly 0 at 1 and 2 (chlo.lgamma is a few ulps off there).
  Value one_two = b.or_(b.compare(x, b.constant(1, t), "EQ"), b.compare(x, b.constant(2, t), "EQ"));
  y = b.select(one_two, b.constant(0, t), y);
  return {b.select(pole, b.constant(INFINITY, t), y)};
}
V digamma(Context& cx) {
  refuse_complex_kernel(cx, {0}, "digamma");
  // chlo.digamma gives NaN at +-0, where ATen returns copysign(inf, -x) = -1/x.
  Value y = float_unary(cx, "chlo.digamma")[0];
  auto& b = cx.b;
  Value x = b.convert(cx.tensor(0), y.dtype());
  Value zero = b.constant(0, y.dtype());
  return {b.select(b.compare(x, zero, "EQ"), b.neg(b.div(b.constant(1, y.dtype()), x)), y)};
}
// log2, log10 and exp2 through natural log/exp with a constant factor.
// x * k for a real constant k; a complex x has its parts scaled (a product with
// the complex k + 0i would turn inf * 0 into NaN parts).
Value scaled(hlo::Builder& b, Value x, double k) {
  if (!hlo::is_complex(x.dtype())) return b.mul(x, b.constant(k, x.dtype()));
  DType rt = hlo::real_type(x.dtype());
  return b.complex(b.mul(b.real(x), b.constant(k, rt)), b.mul(b.imag(x), b.constant(k, rt)));
}
V scaled_log(Context& cx, double base) {
  auto [x, out] = float_arg(cx, 0);
  if (hlo::is_complex(x.dtype())) return {cx.b.convert(scaled(cx.b, cx.b.log(x), 1.0 / std::log(base)), out)};
  return {cx.b.convert(cx.b.div(cx.b.log(x), scalar_like(cx, std::log(base), x)), out)};
}
V log2(Context& cx) { return scaled_log(cx, 2.0); }
V log10(Context& cx) { return scaled_log(cx, 10.0); }
V exp2(Context& cx) {
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(cx.b.exp(scaled(cx.b, x, std::log(2.0))), out)};
}
V atan2(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "atan2_cpu");
  DType out = float_type(cx.result_type({0, 1}));
  DType t = hlo::opmath_type(out);
  return {cx.b.convert(cx.b.binary("stablehlo.atan2", cx.as(0, t), cx.as(1, t)), out)};
}
V floor(Context& cx) {
  refuse_complex(cx, {0}, "floor is not supported for complex inputs", ErrorKind::NotImplemented);
  if (cx.tensor(0).dtype() == DType::Bool) refuse_dtype(cx, DType::Bool, "floor_vml_cpu");
  return {hlo::is_floating(cx.tensor(0).dtype()) ? cx.b.unary("stablehlo.floor", cx.tensor(0)) : cx.tensor(0)};
}
V ceil(Context& cx) {
  refuse_complex(cx, {0}, "ceil is not supported for complex inputs", ErrorKind::NotImplemented);
  if (cx.tensor(0).dtype() == DType::Bool) refuse_dtype(cx, DType::Bool, "ceil_vml_cpu");
  return {hlo::is_floating(cx.tensor(0).dtype()) ? cx.b.unary("stablehlo.ceil", cx.tensor(0)) : cx.tensor(0)};
}
V round(Context& cx) {
  refuse_complex_kernel(cx, {0}, "round_vml_cpu");
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) refuse_dtype(cx, DType::Bool, "round_vml_cpu");
  return {hlo::is_floating(x.dtype()) ? cx.b.unary("stablehlo.round_nearest_even", x) : x};
}
V trunc(Context& cx) {
  refuse_complex(cx, {0}, "trunc is not supported for complex inputs", ErrorKind::NotImplemented);
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) refuse_dtype(cx, DType::Bool, "trunc_vml_cpu");
  if (!hlo::is_floating(x.dtype())) return {x};
  return {cx.b.mul(cx.b.unary("stablehlo.sign", x), cx.b.unary("stablehlo.floor", cx.b.abs(x)))};
}
V reciprocal(Context& cx) {
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(cx.b.div(cx.b.constant(1, x.dtype()), x), out)};
}
V relu(Context& cx) {
  refuse_complex(cx, {0}, kClampComplex, ErrorKind::NotImplemented);
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) cx.fail("Boolean inputs not supported for relu");
  return {nan_extremum(cx.b, x, scalar_like(cx, 0, x), true)};
}
V silu(Context& cx) {
  require_float_kernel(cx, cx.tensor(0).dtype(), "silu_cpu", true);
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(cx.b.mul(x, cx.b.unary("stablehlo.logistic", x)), out)};
}

// gelu(x) = x * Phi(x), exactly or with the tanh approximation. Phi(x) is
// ATen's 0.5 * (1 + erf(x / sqrt 2)), with erf saturated: the plugin's erf
// stops at +-(1 - 1.8e-7) from |z| = 3.7 on, which leaves x * 1e-7 far in
// the negative tail; past |z| = 3.9 float32's erf is +-1 within half an ulp.
// (erfc(-x / sqrt 2) is exact there too, but costs five erf in a fused
// program: exp, a division and two polynomials.)
Value std_normal_cdf(hlo::Builder& b, Value x) {
  auto c = [&](double v) { return b.constant(v, x.dtype()); };
  Value z = b.mul(x, c(M_SQRT1_2));
  Value e = b.unary("chlo.erf", z);
  e = b.select(b.compare(z, c(3.9), "GT"), c(1), e);
  e = b.select(b.compare(z, c(-3.9), "LT"), c(-1), e);
  return b.mul(c(0.5), b.add(c(1), e));
}
// ATen's get_gelutype_enum, checked before the kernel's dispatch.
bool gelu_tanh(Context& cx, size_t i) {
  std::string mode = cx.none(i) ? "none" : cx.str(i);
  if (mode != "none" && mode != "tanh") cx.fail("approximate argument must be either none or tanh.");
  return mode == "tanh";
}
V gelu(Context& cx) {
  bool tanh = gelu_tanh(cx, 1);
  require_float_kernel(cx, cx.tensor(0).dtype(), "GeluKernelImpl", false);
  auto [x, out] = float_arg(cx, 0);
  auto& b = cx.b;
  auto c = [&](double v) { return scalar_like(cx, v, x); };
  Value y;
  if (tanh) {
    Value inner = b.mul(c(std::sqrt(2.0 / M_PI)), b.add(x, b.mul(c(0.044715), b.mul(x, b.mul(x, x)))));
    y = b.mul(b.mul(c(0.5), x), b.add(c(1), b.tanh(inner)));
  } else {
    y = b.mul(x, std_normal_cdf(b, x));
  }
  return {b.convert(y, out)};
}

V gelu_backward(Context& cx) {
  bool tanh = gelu_tanh(cx, 2);
  DType out = cx.result_type({0, 1});
  require_float_kernel(cx, out, "GeluBackwardKernelImpl", false);
  DType t = hlo::opmath_type(out);
  Value g = cx.as(0, t), x = cx.as(1, t);
  auto& b = cx.b;
  auto c = [&](double v) { return b.constant(v, t); };
  Value d;
  if (tanh) {
    double k = std::sqrt(2.0 / M_PI), k3 = 0.044715;
    Value x2 = b.mul(x, x);
    Value th = b.tanh(b.mul(c(k), b.add(x, b.mul(c(k3), b.mul(x2, x)))));
    Value left = b.mul(c(0.5), x);
    Value dleft = b.mul(c(0.5), b.add(c(1), th));
    Value dinner = b.mul(c(k), b.add(c(1), b.mul(c(3 * k3), x2)));
    d = b.add(dleft, b.mul(left, b.mul(b.sub(c(1), b.mul(th, th)), dinner)));
  } else {
    Value cdf = std_normal_cdf(b, x);
    Value pdf = b.mul(c(1 / std::sqrt(2 * M_PI)), b.exp(b.mul(c(-0.5), b.mul(x, x))));
    d = b.add(cdf, b.mul(x, pdf));
  }
  return {b.convert(b.mul(g, d), out)};
}

// grad * (1 - y) * y, in opmath.
// The complex conjugate of a complex x (ATen's complex backward formulas
// multiply by the conjugate derivative); a real x is its own.
Value conj(hlo::Builder& b, Value x) {
  if (!hlo::is_complex(x.dtype())) return x;
  return b.complex(b.real(x), b.neg(b.imag(x)));
}
V sigmoid_backward(Context& cx) {
  DType t = cx.result_type({0, 1});
  require_float_kernel(cx, t, "sigmoid_backward_cpu", true);
  Value g = opmath_arg(cx, 0, t), y = opmath_arg(cx, 1, t);
  return {cx.b.convert(cx.b.mul(g, conj(cx.b, cx.b.mul(cx.b.sub(scalar_like(cx, 1, y), y), y))), t)};
}
// grad * (1 - y * y), in opmath.
V tanh_backward(Context& cx) {
  DType t = cx.result_type({0, 1});
  require_float_kernel(cx, t, "tanh_backward_cpu", true);
  Value g = opmath_arg(cx, 0, t), y = opmath_arg(cx, 1, t);
  return {cx.b.convert(cx.b.mul(g, conj(cx.b, cx.b.sub(scalar_like(cx, 1, y), cx.b.mul(y, y)))), t)};
}
V threshold_backward(Context& cx) {
  DType t = cx.result_type({0, 1});
  if (hlo::is_complex(t) || t == DType::Bool) refuse_dtype(cx, t, "threshold_cpu");
  check_scalar_fits(cx, 2, hlo::opmath_type(t));
  auto [g, x] = promote(cx, 0, 1);
  Value th = cx.as(2, x.dtype());
  return {cx.b.select(cx.b.compare(x, th, "LE"), scalar_like(cx, 0, g), g)};
}

// ---- more binary and unary math (ATen's CPU kernels, formula for formula)

// The signed integer dtype as wide as t, for looking at a float's bits.
DType int_of_width(DType t) {
  switch (hlo::byte_size(t)) {
    case 1:
      return DType::I8;
    case 2:
      return DType::I16;
    case 4:
      return DType::I32;
    default:
      return DType::I64;
  }
}

// True where x's sign bit is set: -0.0 and negative NaNs included for
// floats, x < 0 for integers (never for unsigned and bool).
Value sign_bit(hlo::Builder& b, Value x) {
  if (!hlo::is_floating(x.dtype())) return b.compare(x, b.constant(0, x.dtype()), "LT");
  DType it = int_of_width(x.dtype());
  Value bits = b.bitcast_convert(x, it);
  return b.compare(bits, b.constant(0, it), "LT");
}

// The largest finite value of float dtype t: the bit pattern just below +inf.
Value max_finite(hlo::Builder& b, DType t) {
  DType it = int_of_width(t);
  Value inf_bits = b.bitcast_convert(b.constant(INFINITY, t), it);
  return b.bitcast_convert(b.sub(inf_bits, b.constant(1, it)), t);
}

Value is_nan(hlo::Builder& b, Value x) { return b.compare(x, x, "NE"); }

// Ops whose CPU kernels dispatch over float or integral dtypes only; `kernel`
// is the CPU kernel's name, as PyTorch's refusal prints it.
void require_float(Context& cx, size_t i, const char* kernel) {
  if (!hlo::is_floating(cx.tensor(i).dtype())) refuse_dtype(cx, cx.tensor(i).dtype(), kernel);
}
void require_integral(Context& cx, DType t, const char* kernel) {
  if (!hlo::is_integral(t)) refuse_dtype(cx, t, kernel);
}

// ATen's kernels of some binary float functions take only float operands
// (after promotion): integer ones raise instead of promoting to float32.
void require_floating_operands(Context& cx, const char* kernel) {
  DType t = cx.result_type({0, 1});
  if (!hlo::is_floating(t)) refuse_dtype(cx, t, kernel);
}

// Both arguments in the opmath type of the float result dtype of a binary
// float function (ints promote to float32); `out` is that result dtype.
struct FloatArgs {
  Value a, b;
  DType out;
};
FloatArgs float_args(Context& cx, size_t i, size_t j) {
  DType out = float_type(cx.result_type({i, j}));
  DType m = hlo::opmath_type(out);
  return {cx.as(i, m), cx.as(j, m), out};
}

// |a| with the sign bit of s.
V copysign(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "copysign_cpu");
  DType out = float_type(cx.result_type({0, 1}));
  Value mag = cx.b.abs(cx.as(0, out));
  return {cx.b.select(sign_bit(cx.b, cx.as(1, out)), cx.b.neg(mag), mag)};
}

// fmax / fmin: like maximum / minimum, but a NaN loses to a number.
Value nan_ignoring_extremum(hlo::Builder& b, Value x, Value y, bool is_max) {
  Value m = is_max ? b.max(x, y) : b.min(x, y);
  if (!hlo::is_floating(m.dtype())) return m;
  m = b.select(is_nan(b, y), x, m);
  return b.select(is_nan(b, x), y, m);
}
V fmax(Context& cx) {
  refuse_complex(cx, {0, 1}, "fmax not implemented for complex tensors.");
  auto [a, b] = promote(cx, 0, 1);
  return {nan_ignoring_extremum(cx.b, a, b, true)};
}
V fmin(Context& cx) {
  refuse_complex(cx, {0, 1}, "fmin not implemented for complex tensors.");
  auto [a, b] = promote(cx, 0, 1);
  return {nan_ignoring_extremum(cx.b, a, b, false)};
}

// x - trunc(x).
V frac(Context& cx) {
  refuse_complex_kernel(cx, {0}, "frac_cpu");
  require_float(cx, 0, "frac_cpu");
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(cx.b.sub(x, float_trunc(cx.b, x)), out)};
}

// frexp: x = mantissa * 2^exponent with |mantissa| in [0.5, 1) and an int32
// exponent; zero, inf and NaN give (x, 0) as std::frexp does. Read from the
// bits of x in its opmath type (float16/bfloat16 widen exactly to float32),
// with integer ops only, since the CPU backend flushes subnormal operands of
// float arithmetic to zero: a subnormal's fraction bits, converted to a
// (normal) float, have the same mantissa and an exponent that is off by a
// constant. The mantissa gets the biased exponent of 0.5 and keeps its sign
// and fraction bits.
V frexp(Context& cx) {
  Value x0 = cx.tensor(0);
  if (!hlo::is_floating(x0.dtype())) cx.fail("torch.frexp() only supports floating-point dtypes");
  auto& b = cx.b;
  Value x = b.convert(x0, hlo::opmath_type(x0.dtype()));
  DType ft = x.dtype(), it = int_of_width(ft);
  bool wide = hlo::byte_size(ft) == 8;
  int mant = wide ? 52 : 23, bias = wide ? 1023 : 127;
  auto ci = [&](double v) { return b.constant(v, it); };
  auto exponent_field = [&](Value bits) {
    return b.and_(b.binary("stablehlo.shift_right_logical", bits, ci(mant)), ci(2 * bias + 1));
  };
  Value bits0 = b.bitcast_convert(x, it);
  Value e0 = exponent_field(bits0);
  Value frac0 = b.and_(bits0, ci(std::ldexp(1.0, mant) - 1));
  Value e0_zero = b.compare(e0, ci(0), "EQ");
  Value tiny = b.and_(e0_zero, b.compare(frac0, ci(0), "NE"));
  Value special = b.or_(b.and_(e0_zero, b.compare(frac0, ci(0), "EQ")), b.compare(e0, ci(2 * bias + 1), "EQ"));
  Value f = b.convert(frac0, ft);
  f = b.select(b.compare(bits0, ci(0), "LT"), b.neg(f), f);
  Value bits = b.select(tiny, b.bitcast_convert(f, it), bits0);
  Value e = exponent_field(bits);
  Value exponent = b.add(b.sub(e, ci(bias - 1)), b.select(tiny, ci(1 - bias - mant), ci(0)));
  Value m_bits = b.add(bits, b.binary("stablehlo.shift_left", b.sub(ci(bias - 1), e), ci(mant)));
  Value mantissa = b.select(special, x, b.bitcast_convert(m_bits, ft));
  exponent = b.select(special, ci(0), exponent);
  return {b.convert(mantissa, x0.dtype()), b.convert(exponent, DType::I32)};
}

// heaviside(x, values): values where x == 0, else x > 0.
V heaviside(Context& cx) {
  refuse_complex(cx, {0, 1}, "heaviside is not yet implemented for complex tensors.");
  Value x = cx.tensor(0), v = cx.tensor(1);
  if (x.dtype() != v.dtype()) cx.fail("heaviside is not yet implemented for tensors with different dtypes");
  auto& b = cx.b;
  Value zero = scalar_like(cx, 0, x);
  return {b.select(b.compare(x, zero, "EQ"), v, b.convert(b.compare(x, zero, "GT"), x.dtype()))};
}

Value int_abs(hlo::Builder& b, Value x) { return hlo::is_unsigned(x.dtype()) ? x : b.abs(x); }

// gcd by Euclid's algorithm on every element at once: a stablehlo.while
// runs (a, c) -> (c % a, a) where a != 0 until every a is 0; c is the gcd.
Value int_gcd(hlo::Builder& b, Value a, Value c) {
  Dims shape = hlo::broadcast_shapes(a.dims(), c.dims());
  a = int_abs(b, b.broadcast_to(a, shape));
  c = int_abs(b, b.broadcast_to(c, shape));
  TensorType t = a.type;
  Dims all;
  for (int64_t d = 0; d < a.rank(); ++d) all.push_back(d);
  auto cond = [all](hlo::Builder& b, const V& v) {
    Value nz = b.compare(v[0], b.constant(0, v[0].dtype()), "NE");
    if (!all.empty()) nz = b.reduce(nz, b.constant(0, DType::Bool), all, "stablehlo.or");
    return V{nz};
  };
  auto body = [](hlo::Builder& b, const V& v) {
    Value zero = b.constant(0, v[0].dtype());
    Value nz = b.compare(v[0], zero, "NE");
    Value safe = b.select(nz, v[0], b.constant(1, v[0].dtype()));
    Value r = b.binary("stablehlo.remainder", v[1], safe);
    return V{b.select(nz, r, v[0]), b.select(nz, v[0], v[1])};
  };
  return b.op_multi("stablehlo.while", {a, c}, {t, t}, {}, {{{t, t}, cond}, {{t, t}, body}})[1];
}
V gcd(Context& cx) {
  auto [a, c] = promote(cx, 0, 1);
  require_integral(cx, a.dtype(), "gcd_cpu");
  return {int_gcd(cx.b, a, c)};
}
// lcm = |a / gcd * c|, 0 when the gcd is.
V lcm(Context& cx) {
  auto [a, c] = promote(cx, 0, 1);
  require_integral(cx, a.dtype(), "lcm_cpu");
  auto& b = cx.b;
  Value g = int_gcd(b, a, c);
  Value zero = scalar_like(cx, 0, g);
  Value safe = b.select(b.compare(g, zero, "EQ"), scalar_like(cx, 1, g), g);
  return {b.select(b.compare(g, zero, "EQ"), zero, int_abs(b, b.mul(b.div(a, safe), c)))};
}

// sqrt(a^2 + b^2) without overflow: big * sqrt(1 + (small / big)^2); an
// infinite operand gives inf even with a NaN, as std::hypot does.
V hypot(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "hypot_cpu");
  require_floating_operands(cx, "hypot_cpu");
  auto [x, y, out] = float_args(cx, 0, 1);
  auto& b = cx.b;
  DType m = x.dtype();
  Value ax = b.abs(x), ay = b.abs(y);
  Value big = nan_extremum(b, ax, ay, true), small = nan_extremum(b, ax, ay, false);
  Value zero = b.constant(0, m), one = b.constant(1, m), inf = b.constant(INFINITY, m);
  Value safe = b.select(b.compare(big, zero, "EQ"), one, big);
  Value q = b.div(small, safe);
  Value r = b.mul(big, b.sqrt(b.add(one, b.mul(q, q))));
  r = b.select(b.compare(big, zero, "EQ"), zero, r);
  r = b.select(b.or_(b.compare(ax, inf, "EQ"), b.compare(ay, inf, "EQ")), inf, r);
  return {b.convert(r, out)};
}

// logaddexp(a, b) = max + log1p(exp(-|a - b|)), and a when both are the same
// infinity; logaddexp2 the same in base 2.
Value log_add_exp(Context& cx, bool base2) {
  decline_complex(cx, {0, 1});
  require_floating_operands(cx, base2 ? "logaddexp2_cpu" : "logaddexp_cpu");
  auto [x, y, out] = float_args(cx, 0, 1);
  auto& b = cx.b;
  DType m = x.dtype();
  Value mx = nan_extremum(b, x, y, true);
  Value d = b.neg(b.abs(b.sub(x, y)));
  Value l = base2 ? b.div(b.unary("stablehlo.log_plus_one", b.exp(b.mul(d, b.constant(std::log(2.0), m)))),
                          b.constant(std::log(2.0), m))
                  : b.unary("stablehlo.log_plus_one", b.exp(d));
  Value r = b.add(mx, l);
  Value same_inf = b.and_(b.compare(b.abs(x), b.constant(INFINITY, m), "EQ"), b.compare(x, y, "EQ"));
  return b.convert(b.select(same_inf, x, r), out);
}
V logaddexp(Context& cx) { return {log_add_exp(cx, false)}; }
V logaddexp2(Context& cx) { return {log_add_exp(cx, true)}; }

// nextafter(x, y): the next float after x toward y, by stepping x's bits
// (in x's own dtype: bfloat16 steps bfloat16 bits). NaN in either gives NaN,
// x == y gives y, and from zero the step is the smallest subnormal.
V nextafter(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "nextafter_cpu");
  auto [x, y] = promote(cx, 0, 1);
  if (!hlo::is_floating(x.dtype())) refuse_dtype(cx, x.dtype(), "nextafter_cpu");
  auto& b = cx.b;
  DType t = x.dtype(), it = int_of_width(t);
  Dims shape = hlo::broadcast_shapes(x.dims(), y.dims());
  x = b.broadcast_to(x, shape);
  Value zero = b.constant(0, t);
  Value bits = b.bitcast_convert(x, it);
  Value up = b.compare(b.compare(y, x, "GT"), b.compare(x, zero, "GT"), "EQ");
  Value stepped = b.bitcast_convert(b.add(bits, b.select(up, b.constant(1, it), b.constant(-1, it))), t);
  Value tiny = b.bitcast_convert(b.constant(1, it), t);
  Value from_zero = b.select(b.compare(y, zero, "LT"), b.neg(tiny), tiny);
  Value r = b.select(b.compare(x, zero, "EQ"), from_zero, stepped);
  r = b.select(b.compare(x, y, "EQ"), y, r);
  return {b.select(b.or_(is_nan(b, x), is_nan(b, y)), b.add(x, y), r)};
}

V signbit(Context& cx) {
  refuse_complex(cx, {0}, "signbit is not implemented for complex tensors.", ErrorKind::NotImplemented);
  return {sign_bit(cx.b, cx.tensor(0))};
}

// NaN, +inf and -inf replaced by `nan` (0), `posinf` (the largest finite
// value) and `neginf` (the lowest); integers pass through.
// A complex x has its real and imaginary parts replaced alike (as ATen does).
Value nan_to_num_real(Context& cx, Value x) {
  DType t = x.dtype();
  auto& b = cx.b;
  Value big = max_finite(b, t);
  Value nan = cx.none(1) ? b.constant(0, t) : cx.as(1, t);
  Value pos = cx.none(2) ? big : cx.as(2, t);
  Value neg = cx.none(3) ? b.neg(big) : cx.as(3, t);
  Value r = b.select(b.compare(x, b.constant(INFINITY, t), "EQ"), pos, x);
  r = b.select(b.compare(x, b.constant(-INFINITY, t), "EQ"), neg, r);
  return b.select(is_nan(b, x), nan, r);
}
V nan_to_num(Context& cx) {
  Value x = cx.tensor(0);
  if (hlo::is_complex(x.dtype()))
    return {cx.b.complex(nan_to_num_real(cx, cx.b.real(x)), nan_to_num_real(cx, cx.b.imag(x)))};
  if (!hlo::is_floating(x.dtype())) return {x};
  return {nan_to_num_real(cx, x)};
}

V floor_divide(Context& cx) {
  if (cx.result_type({0, 1}) == DType::Bool)
    cx.fail("\"div_floor_cpu\" not implemented for 'Bool'", ErrorKind::NotImplemented);
  return {divide(cx, "floor")};
}

// round(x, decimals): nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) *
// 10^-d for negative d, in opmath.
V round_decimals(Context& cx) {
  refuse_complex_kernel(cx, {0}, "round_cpu");
  Value x0 = cx.tensor(0);
  int64_t d = cx.integer(1);
  if (!hlo::is_floating(x0.dtype())) refuse_dtype(cx, x0.dtype(), "round_cpu");
  auto& b = cx.b;
  Value x = b.convert(x0, hlo::opmath_type(x0.dtype()));
  // Behind an optimization barrier, so XLA keeps the division by 10^d
  // instead of multiplying by its (inexact) reciprocal.
  Value p = b.constant(std::pow(10.0, static_cast<double>(d < 0 ? -d : d)), x.dtype());
  p = b.op("stablehlo.optimization_barrier", {p}, p.type);
  Value r = d < 0 ? b.mul(b.unary("stablehlo.round_nearest_even", b.div(x, p)), p)
                  : b.div(b.unary("stablehlo.round_nearest_even", b.mul(x, p)), p);
  return {b.convert(r, x0.dtype())};
}

// Shifts as ATen does them: a shift by a negative amount or by the width or
// more gives 0 to the left and the sign fill to the right.
V shift(Context& cx, bool left) {
  auto [a, s] = promote(cx, 0, 1);
  DType t = a.dtype();
  require_integral(cx, t, left ? "lshift_cpu" : "rshift_cpu");
  auto& b = cx.b;
  Dims shape = hlo::broadcast_shapes(a.dims(), s.dims());
  a = b.broadcast_to(a, shape);
  s = b.broadcast_to(s, shape);
  int64_t width = 8 * hlo::byte_size(t);
  bool is_unsigned = hlo::is_unsigned(t);
  int64_t max_shift = left || is_unsigned ? width : width - 1;
  Value zero = b.constant(0, t);
  Value bad = b.or_(b.compare(s, zero, "LT"), b.compare(s, b.constant(static_cast<double>(max_shift), t), "GE"));
  if (left) return {b.select(bad, zero, b.binary("stablehlo.shift_left", a, s))};
  if (is_unsigned) return {b.select(bad, zero, b.binary("stablehlo.shift_right_logical", a, s))};
  Value amount = b.select(bad, b.constant(static_cast<double>(max_shift), t), s);
  return {b.binary("stablehlo.shift_right_arithmetic", a, amount)};
}
V bitwise_left_shift(Context& cx) { return shift(cx, true); }
V bitwise_right_shift(Context& cx) { return shift(cx, false); }

// sinc(x) = sin(pi x) / (pi x), 1 at 0.
V sinc(Context& cx) {
  auto [x, out] = float_arg(cx, 0);
  auto& b = cx.b;
  Value px = b.mul(scalar_like(cx, M_PI, x), x);
  Value r = b.div(b.unary("stablehlo.sine", px), px);
  return {b.convert(b.select(b.compare(x, scalar_like(cx, 0, x), "EQ"), scalar_like(cx, 1, x), r), out)};
}

// entr(x) = -x log x for x > 0, 0 at 0, -inf below, NaN for NaN.
V special_entr(Context& cx) {
  refuse_complex_kernel(cx, {0}, "entr_cpu");
  auto [x, out] = float_arg(cx, 0);
  auto& b = cx.b;
  Value zero = scalar_like(cx, 0, x);
  Value r = b.select(b.compare(x, zero, "GT"), b.neg(b.mul(x, b.log(x))), scalar_like(cx, -INFINITY, x));
  r = b.select(b.compare(x, zero, "EQ"), zero, r);
  return {b.convert(b.select(is_nan(b, x), x, r), out)};
}

// xlogy(x, y) = x * log(y) and xlog1py(x, y) = x * log1p(y): NaN when y is
// NaN, else 0 when x is 0.
Value x_log(Context& cx, std::string_view log_op) {
  auto [x, y, out] = float_args(cx, 0, 1);
  auto& b = cx.b;
  Value zero = b.constant(0, x.dtype());
  Value r = b.select(b.compare(x, zero, "EQ"), zero, b.mul(x, b.unary(log_op, y)));
  return b.convert(b.select(is_nan(b, y), y, r), out);
}
V xlogy(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "xlogy_cpu");
  return {x_log(cx, "stablehlo.log")};
}
V special_xlog1py(Context& cx) {
  refuse_complex_kernel(cx, {0, 1}, "xlog1py_cpu");
  return {x_log(cx, "stablehlo.log_plus_one")};
}

// The clamp bounds of logit: eps and 1 - eps, each rounded to the result
// dtype as ATen's scalar_t arithmetic does, then widened to opmath.
std::pair<Value, Value> logit_bounds(Context& cx, size_t eps_arg, DType out, DType m) {
  auto& b = cx.b;
  Value lo = b.convert(cx.as(eps_arg, out), m);
  Value hi = b.convert(b.convert(b.sub(b.constant(1, m), lo), out), m);
  return {lo, hi};
}

// logit(x, eps) = log(z / (1 - z)), z = x clamped to [eps, 1 - eps] unless
// eps is None or negative.
V logit(Context& cx) {
  refuse_complex_kernel(cx, {0}, "logit_cpu");
  auto [x, out] = float_arg(cx, 0);
  auto& b = cx.b;
  DType m = x.dtype();
  check_scalar_fits(cx, 1, out);  // CPU: eps.to<scalar_t>()
  if (!cx.none(1)) {
    auto [lo, hi] = logit_bounds(cx, 1, out, m);
    Value z = b.select(b.compare(x, lo, "LT"), lo, b.select(b.compare(x, hi, "GT"), hi, x));
    x = b.select(b.compare(lo, b.constant(0, m), "LT"), x, z);
  }
  return {b.convert(b.log(b.div(x, b.sub(b.constant(1, m), x))), out)};
}

// dy / (x (1 - x)); outside [0, 1] that is NaN without eps, and outside
// [eps, 1 - eps] it is 0 with eps >= 0.
V logit_backward(Context& cx) {
  DType out = cx.result_type({0, 1});
  require_float_kernel(cx, out, "logit_backward_cpu", false);
  DType m = hlo::opmath_type(out);
  auto& b = cx.b;
  Value dy = cx.as(0, m), x = cx.as(1, m);
  Value zero = b.constant(0, m), one = b.constant(1, m);
  Value g = b.div(dy, b.mul(x, b.sub(one, x)));
  Value outside01 = b.or_(b.compare(x, zero, "LT"), b.compare(x, one, "GT"));
  Value no_eps = b.select(outside01, b.constant(NAN, m), g);
  if (cx.none(2)) return {b.convert(no_eps, out)};
  auto [lo, hi] = logit_bounds(cx, 2, out, m);
  Value with_eps = b.select(b.or_(b.compare(x, lo, "LT"), b.compare(x, hi, "GT")), zero, g);
  return {b.convert(b.select(b.compare(lo, zero, "LT"), no_eps, with_eps), out)};
}

// isin(elements, test_elements): every element compared with every test
// element in their common dtype, OR-reduced over the test elements.
V isin(Context& cx) {
  if (any_complex(cx, {0, 1})) cx.fail("Unsupported input type encountered for isin(): ComplexFloat");
  if (is_bool_arg(cx, 0) || is_bool_arg(cx, 1)) cx.fail("Unsupported input type encountered for isin(): Bool");
  DType t = cx.result_type({0, 1});
  auto& b = cx.b;
  Value e = cx.as(0, t), s = cx.as(1, t);
  int64_t n = s.type.numel(), r = e.rank();
  s = b.reshape(s, {n});
  Dims dims = e.dims(), keep;
  dims.push_back(n);
  for (int64_t d = 0; d < r; ++d) keep.push_back(d);
  Value eq = b.compare(b.broadcast_in_dim(e, dims, keep), b.broadcast_in_dim(s, dims, {r}), "EQ");
  Value found = b.reduce(eq, b.constant(0, DType::Bool), {r}, "stablehlo.or");
  return {cx.flag_or(3, false) ? b.not_(found) : found};
}

// ---- comparison and logic

V compare(Context& cx, std::string_view dir) {
  if (dir != "EQ" && dir != "NE") refuse_complex_kernel(cx, {0, 1}, std::string(cx.op().substr(6, 2)) + "_cpu");
  auto [a, b] = promote(cx, 0, 1);
  return {cx.b.compare(a, b, dir)};
}
V eq(Context& cx) { return compare(cx, "EQ"); }
V ne(Context& cx) { return compare(cx, "NE"); }
V lt(Context& cx) { return compare(cx, "LT"); }
V le(Context& cx) { return compare(cx, "LE"); }
V gt(Context& cx) { return compare(cx, "GT"); }
V ge(Context& cx) { return compare(cx, "GE"); }

V logical_and(Context& cx) { return {cx.b.and_(cx.as(0, DType::Bool), cx.as(1, DType::Bool))}; }
V logical_or(Context& cx) { return {cx.b.or_(cx.as(0, DType::Bool), cx.as(1, DType::Bool))}; }
V logical_xor(Context& cx) { return {cx.b.binary("stablehlo.xor", cx.as(0, DType::Bool), cx.as(1, DType::Bool))}; }
V logical_not(Context& cx) { return {cx.b.not_(cx.as(0, DType::Bool))}; }
// Bitwise ops take bool and integer dtypes only (after promotion).
std::pair<Value, Value> bitwise_operands(Context& cx, const char* kernel) {
  auto [a, b] = promote(cx, 0, 1);
  if (hlo::is_floating(a.dtype()) || hlo::is_complex(a.dtype())) refuse_dtype(cx, a.dtype(), kernel);
  return {a, b};
}
V bitwise_and(Context& cx) {
  auto [a, b] = bitwise_operands(cx, "bitwise_and_cpu");
  return {cx.b.and_(a, b)};
}
V bitwise_or(Context& cx) {
  auto [a, b] = bitwise_operands(cx, "bitwise_or_cpu");
  return {cx.b.or_(a, b)};
}
V bitwise_xor(Context& cx) {
  auto [a, b] = bitwise_operands(cx, "bitwise_xor_cpu");
  return {cx.b.binary("stablehlo.xor", a, b)};
}
V bitwise_not(Context& cx) {
  DType t = cx.tensor(0).dtype();
  if (hlo::is_floating(t) || hlo::is_complex(t)) refuse_dtype(cx, t, "bitwise_not_cpu");
  return {cx.b.not_(cx.tensor(0))};
}
V isnan(Context& cx) {
  Value x = cx.tensor(0);
  return {cx.b.compare(x, x, "NE")};
}
// isposinf / isneginf: x == +inf / -inf (always false for integers).
Value equals_infinity(Context& cx, double inf) {
  refuse_complex(cx, {0}, std::string(inf > 0 ? "isposinf" : "isneginf") + " does not support complex inputs.");
  Value x = cx.tensor(0);
  if (!hlo::is_floating(x.dtype())) return cx.b.compare(x, x, "NE");  // false, with x's (bucketed) dims
  return cx.b.compare(x, scalar_like(cx, inf, x), "EQ");
}
V isposinf(Context& cx) { return {equals_infinity(cx, INFINITY)}; }
V isneginf(Context& cx) { return {equals_infinity(cx, -INFINITY)}; }

V where(Context& cx) {
  DType t = cx.result_type({1, 2});
  return {cx.b.select(cx.as(0, DType::Bool), cx.as(1, t), cx.as(2, t))};
}
V masked_fill(Context& cx) {
  Value x = cx.tensor(0);
  if (cx.arg(2).kind == Arg::Kind::Tensor && cx.tensor(2).rank() != 0)
    cx.fail("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with " +
            std::to_string(cx.tensor(2).rank()) + " dimension(s).");
  if (cx.tensor(1).dtype() != DType::Bool)
    cx.fail("masked_fill_ only supports boolean masks, but got mask with dtype " +
            std::string(hlo::cpp_type_name(cx.tensor(1).dtype())));
  check_scalar_fits(cx, 2, x.dtype());
  Value mask = cx.as(1, DType::Bool);
  // self and mask broadcast together, as on CPU (masked_fill_ then needs the
  // result to keep self's shape, which the write into self checks).
  return {cx.b.select(mask, cx.as(2, x.dtype()), x)};
}

// ---- fills and copies

V fill(Context& cx) {
  Value x = cx.tensor(0);
  if (cx.arg(1).kind == Arg::Kind::Tensor && cx.tensor(1).rank() != 0)
    cx.fail("fill_ only supports 0-dimension value tensor but got tensor with " + std::to_string(cx.tensor(1).rank()) +
            " dimensions.");
  check_scalar_fits(cx, 1, x.dtype());
  Value r = cx.b.broadcast_to(cx.as(1, x.dtype()), x.dims());
  for (int64_t d = 0; d < x.rank(); ++d)  // a shape-bucketed target: the same true sizes
    if (x.type.is_dynamic(d)) r = cx.b.set_dimension_size(r, cx.b.dimension_size(x, d), d);
  return {r};
}
V zero(Context& cx) {
  Value x = cx.tensor(0);
  Value r = cx.b.full(0, x.type);
  for (int64_t d = 0; d < x.rank(); ++d)  // a shape-bucketed target: the same true sizes
    if (x.type.is_dynamic(d)) r = cx.b.set_dimension_size(r, cx.b.dimension_size(x, d), d);
  return {r};
}
// x as dtype `to`, as CPU's copy casts it: float to a narrow integer wraps
// on CPU (through int32, or int64 for uint32); XLA's convert saturates.
Value cast_as_cpu(hlo::Builder& b, Value x, DType to) {
  return b.convert(b.convert(x, hlo::cpu_cast_via(x.dtype(), to)), to);
}
// aten::copy(self, src): src converted to self's dtype, broadcast to its shape.
V copy(Context& cx) {
  Value self = cx.tensor(0);
  return {cx.b.broadcast_to(cast_as_cpu(cx.b, cx.tensor(1), self.dtype()), self.dims())};
}
// aten::_to_copy(self, dtype) as the glue calls it (same device, a fresh
// contiguous result; storage_kernels.cc). _to_copy.out has no dtype: the
// out tensor's dtype applies.
V to_copy(Context& cx) {
  Value x = cx.tensor(0);
  return {cx.arg(1).kind == Arg::Kind::DType ? cast_as_cpu(cx.b, x, cx.dtype(1)) : x};
}
V clone(Context& cx) { return {cx.tensor(0)}; }

// Whether the real rank-0 v lies outside what c10::overflows lets dtype t
// hold; nullopt where no value of v's dtype can (nothing to check).
// The type name c10's checked_convert prints (its own names for the integers).
std::string checked_type_name(DType t) {
  switch (t) {
    case DType::U8:
      return "uint8_t";
    case DType::I8:
      return "int8_t";
    case DType::I16:
      return "int16_t";
    case DType::I64:
      return "int64_t";
    default:
      return std::string(hlo::cpp_type_name(t));
  }
}

}  // namespace

bool scalar_overflows(const uint8_t* bytes, DType from, DType to) {
  if (from == DType::I64) {
    int64_t v;
    std::memcpy(&v, bytes, 8);
    return !hlo::fits_without_overflow(v, to);
  }
  if (from == DType::F64) {
    double v;
    std::memcpy(&v, bytes, 8);
    return !hlo::fits_without_overflow(v, to);
  }
  if (from == DType::C128) {  // a complex number fits a real dtype only without an imaginary part
    double parts[2];
    std::memcpy(parts, bytes, 16);
    if (!hlo::fits_without_overflow(parts[0], to)) return true;
    return hlo::is_complex(to) ? !hlo::fits_without_overflow(parts[1], to) : parts[1] != 0 && to != DType::Bool;
  }
  return false;  // bool, and zero-dim host tensors (they keep their own dtype: no Python-number rule)
}

void check_scalar_fits(Context& cx, size_t i, DType t) {
  if (cx.none(i) || cx.arg(i).kind != Arg::Kind::Scalar || t == DType::Bool) return;
  cx.check_scalar(i, t, "value cannot be converted to type " + checked_type_name(t) + " without overflow");
}

std::vector<Entry> elementwise_lowerings() {
  return {
      {"aten::add.Tensor", add_tensor, Traits().set_shape_generic()},
      {"aten::add.Scalar", add_tensor, Traits().set_shape_generic()},
      {"aten::sub.Tensor", sub_tensor, Traits().set_shape_generic()},
      {"aten::sub.Scalar", sub_tensor, Traits().set_shape_generic()},
      {"aten::rsub.Tensor", rsub_tensor, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::rsub.Scalar", rsub_tensor, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::mul.Tensor", mul_tensor, Traits().set_shape_generic()},
      {"aten::mul.Scalar", mul_tensor, Traits().set_shape_generic()},
      {"aten::div.Tensor", div_tensor, Traits().set_shape_generic()},
      {"aten::div.Scalar", div_tensor, Traits().set_shape_generic()},
      {"aten::div.Tensor_mode", div_tensor_mode, Traits().set_shape_generic()},
      {"aten::div.Scalar_mode", div_tensor_mode, Traits().set_shape_generic()},
      {"aten::remainder.Tensor", remainder_tensor, Traits().set_shape_generic()},
      {"aten::remainder.Scalar", remainder_tensor, Traits().set_shape_generic()},
      {"aten::fmod.Tensor", fmod_tensor, Traits().set_shape_generic()},
      {"aten::fmod.Scalar", fmod_tensor, Traits().set_shape_generic()},
      {"aten::pow.Tensor_Tensor", pow_tensor_tensor, Traits().set_shape_generic()},
      {"aten::pow.Tensor_Scalar", pow_tensor_scalar, Traits().set_shape_generic().set_fixed(1, kPowFixedExponents)},
      {"aten::pow.Scalar", pow_scalar_base, Traits().set_shape_generic()},
      {"aten::maximum", maximum, Traits().set_shape_generic()},
      {"aten::minimum", minimum, Traits().set_shape_generic()},
      {"aten::clamp", clamp, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::clamp.Tensor", clamp, Traits().set_shape_generic()},
      {"aten::clamp_min", clamp_min, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::clamp_min.Tensor", clamp_min, Traits().set_shape_generic()},
      {"aten::clamp_max", clamp_max, Traits().set_shape_generic()},
      {"aten::clamp_max.Tensor", clamp_max, Traits().set_shape_generic()},
      {"aten::lerp.Scalar", lerp, Traits().set_shape_generic()},
      {"aten::lerp.Tensor", lerp, Traits().set_shape_generic()},
      {"aten::addcmul", addcmul, Traits().set_shape_generic()},
      {"aten::addcdiv", addcdiv, Traits().set_shape_generic()},
      {"aten::neg", neg, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::abs", abs,
       Traits().set_out_same_dtype().set_shape_generic().set_in_place_refuses_complex(kAbsInPlaceOfComplex)},
      {"aten::sign", sign, Traits().set_shape_generic()},
      {"aten::exp", exp, Traits().set_shape_generic()},
      {"aten::expm1", expm1, Traits().set_shape_generic()},
      {"aten::log", log, Traits().set_shape_generic()},
      {"aten::log1p", log1p, Traits().set_shape_generic()},
      {"aten::sqrt", sqrt, Traits().set_shape_generic()},
      {"aten::rsqrt", rsqrt, Traits().set_shape_generic()},
      {"aten::sin", sin, Traits().set_shape_generic()},
      {"aten::cos", cos, Traits().set_shape_generic()},
      {"aten::tan", tan, Traits().set_shape_generic()},
      {"aten::tanh", tanh, Traits().set_shape_generic()},
      {"aten::sigmoid", sigmoid, Traits().set_shape_generic()},
      {"aten::erf", erf, Traits().set_shape_generic()},
      {"aten::erfc", erfc, Traits().set_shape_generic()},
      {"aten::erfinv", erfinv, Traits().set_shape_generic()},
      {"aten::acos", acos, Traits().set_shape_generic()},
      {"aten::acosh", acosh, Traits().set_shape_generic()},
      {"aten::asin", asin, Traits().set_shape_generic()},
      {"aten::asinh", asinh, Traits().set_shape_generic()},
      {"aten::atan", atan, Traits().set_shape_generic()},
      {"aten::atanh", atanh, Traits().set_shape_generic()},
      {"aten::cosh", cosh, Traits().set_shape_generic()},
      {"aten::sinh", sinh, Traits().set_shape_generic()},
      {"aten::lgamma", lgamma},
      {"aten::digamma", digamma},
      {"aten::log2", log2, Traits().set_shape_generic()},
      {"aten::log10", log10, Traits().set_shape_generic()},
      {"aten::exp2", exp2, Traits().set_shape_generic()},
      {"aten::atan2", atan2, Traits().set_shape_generic()},
      {"aten::sgn", sgn, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::floor", floor, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::ceil", ceil, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::round", round, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::trunc", trunc, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::reciprocal", reciprocal, Traits().set_shape_generic()},
      {"aten::relu", relu, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::silu", silu, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::gelu", gelu, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::gelu_backward", gelu_backward, Traits().set_shape_generic()},
      {"aten::sigmoid_backward", sigmoid_backward, Traits().set_shape_generic()},
      {"aten::tanh_backward", tanh_backward, Traits().set_shape_generic()},
      {"aten::threshold_backward", threshold_backward, Traits().set_shape_generic()},
      {"aten::copysign.Tensor", copysign, Traits().set_shape_generic()},
      {"aten::copysign.Scalar", copysign, Traits().set_shape_generic()},
      {"aten::fmax", fmax, Traits().set_shape_generic()},
      {"aten::fmin", fmin, Traits().set_shape_generic()},
      {"aten::frac", frac, Traits().set_shape_generic()},
      {"aten::frexp.Tensor", frexp, Traits().set_out_same_dtype()},
      {"aten::heaviside", heaviside},
      {"aten::gcd", gcd},
      {"aten::lcm", lcm},
      {"aten::hypot", hypot, Traits().set_shape_generic()},
      {"aten::logaddexp", logaddexp, Traits().set_shape_generic()},
      {"aten::logaddexp2", logaddexp2, Traits().set_shape_generic()},
      {"aten::nextafter", nextafter},
      {"aten::signbit", signbit, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::nan_to_num", nan_to_num, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::floor_divide", floor_divide, Traits().set_shape_generic()},
      {"aten::floor_divide.Scalar", floor_divide, Traits().set_shape_generic()},
      {"aten::round.decimals", round_decimals, Traits().set_out_same_dtype()},
      {"aten::bitwise_left_shift.Tensor", bitwise_left_shift},
      {"aten::bitwise_left_shift.Tensor_Scalar", bitwise_left_shift},
      {"aten::bitwise_left_shift.Scalar_Tensor", bitwise_left_shift},
      {"aten::bitwise_right_shift.Tensor", bitwise_right_shift},
      {"aten::bitwise_right_shift.Tensor_Scalar", bitwise_right_shift},
      {"aten::bitwise_right_shift.Scalar_Tensor", bitwise_right_shift},
      {"aten::__lshift__.Tensor", bitwise_left_shift},
      {"aten::__lshift__.Scalar", bitwise_left_shift},
      {"aten::__rshift__.Tensor", bitwise_right_shift},
      {"aten::__rshift__.Scalar", bitwise_right_shift},
      {"aten::sinc", sinc},
      {"aten::special_entr", special_entr},
      {"aten::xlogy.Tensor", xlogy},
      {"aten::xlogy.Scalar_Self", xlogy},
      {"aten::xlogy.Scalar_Other", xlogy},
      {"aten::special_xlog1py", special_xlog1py},
      {"aten::special_xlog1py.self_scalar", special_xlog1py},
      {"aten::special_xlog1py.other_scalar", special_xlog1py},
      {"aten::logit", logit},
      {"aten::logit_backward", logit_backward},
      {"aten::isin.Tensor_Tensor", isin, Traits().set_out_same_dtype()},
      {"aten::isin.Tensor_Scalar", isin, Traits().set_out_same_dtype()},
      {"aten::isin.Scalar_Tensor", isin, Traits().set_out_same_dtype()},
      {"aten::eq.Tensor", eq, Traits().set_shape_generic()},
      {"aten::eq.Scalar", eq, Traits().set_shape_generic()},
      {"aten::ne.Tensor", ne, Traits().set_shape_generic()},
      {"aten::ne.Scalar", ne, Traits().set_shape_generic()},
      {"aten::lt.Tensor", lt, Traits().set_shape_generic()},
      {"aten::lt.Scalar", lt, Traits().set_shape_generic()},
      {"aten::le.Tensor", le, Traits().set_shape_generic()},
      {"aten::le.Scalar", le, Traits().set_shape_generic()},
      {"aten::gt.Tensor", gt, Traits().set_shape_generic()},
      {"aten::gt.Scalar", gt, Traits().set_shape_generic()},
      {"aten::ge.Tensor", ge, Traits().set_shape_generic()},
      {"aten::ge.Scalar", ge, Traits().set_shape_generic()},
      {"aten::logical_and", logical_and, Traits().set_shape_generic()},
      {"aten::logical_or", logical_or, Traits().set_shape_generic()},
      {"aten::logical_xor", logical_xor, Traits().set_shape_generic()},
      {"aten::logical_not", logical_not, Traits().set_shape_generic()},
      {"aten::bitwise_and.Tensor", bitwise_and, Traits().set_shape_generic()},
      {"aten::bitwise_and.Scalar", bitwise_and, Traits().set_shape_generic()},
      {"aten::bitwise_or.Tensor", bitwise_or, Traits().set_shape_generic()},
      {"aten::bitwise_or.Scalar", bitwise_or, Traits().set_shape_generic()},
      {"aten::bitwise_xor.Tensor", bitwise_xor, Traits().set_shape_generic()},
      {"aten::bitwise_xor.Scalar", bitwise_xor, Traits().set_shape_generic()},
      {"aten::bitwise_not", bitwise_not, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::isnan", isnan, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::isposinf", isposinf, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::isneginf", isneginf, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::where.self", where, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::masked_fill.Scalar", masked_fill, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::masked_fill.Tensor", masked_fill, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::fill.Scalar", fill, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::fill.Tensor", fill, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::zero", zero, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::copy", copy, Traits().set_own_kernel().set_shape_generic()},
      {"aten::_to_copy", to_copy, Traits().set_own_kernel().set_shape_generic()},
      {"aten::clone", clone, Traits().set_out_same_dtype().set_partial_overlap_allowed().set_shape_generic()},
  };
}

}  // namespace torch_pjrt::lowering
