// Activations: softmax and log_softmax, leaky_relu, hardtanh, elu, the
// others of ATen/native/cpu/Activation.cpp (hardswish, hardsigmoid, glu,
// prelu, log_sigmoid, mish, softplus, threshold, softshrink, hardshrink) and
// rrelu, with their backward passes. Float16/bfloat16 compute in float32
// (hlo::opmath_type) and round once at the end, as PyTorch does.
#include <cmath>
#include <cstdio>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// The maximum of x over dims.
Value max_over(hlo::Builder& b, Value x, const Dims& dims) {
  return b.reduce(x, b.constant(-INFINITY, x.dtype()), dims, "stablehlo.maximum");
}

// ---- softmax

// The softmax dim of x, with rank-0 inputs viewed as [1].
struct SoftmaxIn {
  Value x;
  int64_t dim;
  Dims orig;
};
SoftmaxIn softmax_input(Context& cx, Value x, int64_t dim_arg) {
  int64_t d = cx.dim(dim_arg, x.rank());
  Dims orig = x.dims();
  if (x.rank() == 0) x = cx.b.reshape(x, {1});
  return {x, d, orig};
}

// CPU's softmax kernels: the dim first (IndexError), then half_to_float
// (which CPU refuses for every input; we take it for float16 and bfloat16
// inputs, as CUDA does for float16), nothing more for an empty input, then
// the dtype, named by the kernel the dim picks.
void softmax_checks(Context& cx, const Value& in, int64_t dim_arg, bool half_to_float, const char* name) {
  int64_t d = cx.dim(dim_arg, in.rank());
  if (half_to_float && in.dtype() != DType::F16 && in.dtype() != DType::BF16)
    cx.fail("softmax with half to float conversion is not supported on CPU");
  if (in.type.numel() == 0) return;
  bool last = in.rank() == 0 || d == in.rank() - 1;
  floating_kernel(cx, in.dtype(), std::string(name) + (last ? "_lastdim_kernel_impl" : "_kernel_impl"));
}

Value softmax_impl(Context& cx, bool log) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  softmax_checks(cx, in, cx.integer(1), cx.flag(2), log ? "log_softmax" : "softmax");
  DType out = cx.flag(2) ? DType::F32 : float_type(in.dtype());  // half_to_float
  auto [x, d, orig] = softmax_input(cx, b.convert(in, hlo::opmath_type(float_type(in.dtype()))), cx.integer(1));
  Dims red{d};
  Value shifted = b.sub(x, unreduce(b, max_over(b, x, red), x.dims(), red));
  Value e = b.exp(shifted);
  Value s = unreduce(b, sum_over(b, e, red), x.dims(), red);
  Value y = log ? b.sub(shifted, b.log(s)) : b.div(e, s);
  return b.convert(b.reshape(y, orig), out);
}
V softmax(Context& cx) { return {softmax_impl(cx, false)}; }
V log_softmax(Context& cx) { return {softmax_impl(cx, true)}; }

// _softmax_backward_data(grad_output, output, dim, input_dtype):
//   softmax:     y * (g - sum(g * y))
//   log_softmax: g - exp(y) * sum(g)
// As CPU: softmax's backward checks that grad and output have one size
// (log_softmax's does not), wraps the dim, returns at once for an empty
// output, dispatches on grad's dtype and reads output as that dtype. The
// result has grad's dtype, float16 for a float32 grad of a float16 input.
Value softmax_backward_impl(Context& cx, bool log) {
  auto& b = cx.b;
  Value grad = cx.tensor(0), output = cx.tensor(1);
  if (!log && grad.dims() != output.dims())
    cx.fail("Expected tensor for argument #1 'grad' to have same size as tensor for argument #2 'output'; but " +
            dims_str(grad.dims()) + " does not equal " + dims_str(output.dims()) +
            " (while checking arguments for softmax_backward)");
  int64_t dim = cx.dim(cx.integer(2), grad.rank());
  DType out = grad.dtype() == DType::F32 && cx.dtype(3) == DType::F16 ? DType::F16 : grad.dtype();
  if (output.type.numel() != 0) {
    bool last = grad.rank() == 0 || dim == grad.rank() - 1;
    floating_kernel(cx, grad.dtype(),
                    std::string(log ? "log_softmax" : "softmax") +
                        (last ? "_backward_lastdim_kernel_impl" : "_backward_kernel_impl"));
    if (output.dtype() != grad.dtype())
      cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(grad.dtype())) + " but found " +
              std::string(hlo::scalar_type_name(output.dtype())));
  }
  DType t = hlo::opmath_type(float_type(cx.result_type({0, 1})));
  auto [g, d, orig] = softmax_input(cx, cx.as(0, t), cx.integer(2));
  Value y = b.reshape(cx.as(1, t), g.dims());
  Dims red{d};
  Value r;
  if (log) {
    r = b.sub(g, b.mul(b.exp(y), unreduce(b, sum_over(b, g, red), g.dims(), red)));
  } else {
    r = b.mul(y, b.sub(g, unreduce(b, sum_over(b, b.mul(g, y), red), g.dims(), red)));
  }
  return b.convert(b.reshape(r, orig), out);
}
V softmax_backward(Context& cx) { return {softmax_backward_impl(cx, false)}; }
V log_softmax_backward(Context& cx) { return {softmax_backward_impl(cx, true)}; }

// ---- leaky_relu, hardtanh, elu

// The backward of an in-place leaky_relu/elu with a negative slope: CPU
// refuses it (RuntimeError). The slope (argument i) arrives at run time.
const char* const kLeakyReluInPlace =
    "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This is "
    "caused by calling in-place forward function with a negative slope, please call out-of-place version instead. "
    "File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu backward "
    "calculation with negative slope";
const char* const kEluInPlace =
    "In-place elu backward calculation is triggered with a negative slope which is not supported. This is caused by "
    "calling in-place forward function with a negative slope, please call out-of-place version instead.";
// CPU's Scalar::to<T> of the Scalar arguments `idx` in the dtype t its
// kernel computes in: "value cannot be converted to type T without overflow".
void fits(Context& cx, std::initializer_list<size_t> idx, DType t) {
  for (size_t i : idx) check_scalar_fits(cx, i, t);
}

void negative_slope_check(Context& cx, size_t i, const char* message) {
  Value v = cx.as(i, DType::F64);
  cx.check(cx.b.compare(v, cx.b.constant(0, DType::F64), "LT"), message, ErrorKind::Runtime);
}

// leaky_relu(self, negative_slope) = x > 0 ? x : x * slope
V leaky_relu(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  floating_kernel(cx, self.dtype(), "leaky_relu_cpu");
  DType t = hlo::opmath_type(self.dtype());
  fits(cx, {1}, t);
  Value x = b.convert(self, t);
  Value r = b.select(b.compare(x, b.constant(0, t), "GT"), x, b.mul(x, cx.as(1, t)));
  return {b.convert(r, self.dtype())};
}

// leaky_relu_backward(grad_output, self, negative_slope, self_is_result)
V leaky_relu_backward(Context& cx) {
  auto& b = cx.b;
  if (cx.flag(3)) negative_slope_check(cx, 2, kLeakyReluInPlace);
  DType out = floating_kernel(cx, cx.result_type({0, 1}), "leaky_relu_backward_cpu"), t = hlo::opmath_type(out);
  fits(cx, {2}, t);
  Value g = cx.as(0, t), x = cx.as(1, t);
  Value r = b.select(b.compare(x, b.constant(0, t), "GT"), g, b.mul(g, cx.as(2, t)));
  return {b.convert(r, out)};
}

// hardtanh(self, min_val, max_val) = clamp(x, min, max)
V hardtanh(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  if (self.dtype() == DType::Bool) cx.fail("Bool inputs not supported for hardtanh");
  if (hlo::is_complex(self.dtype())) cx.fail("clamp is not supported for complex types", ErrorKind::NotImplemented);
  if (self.dtype() == DType::U8) {  // CPU truncates the limits to integers first
    Value lo = cx.as(1, DType::I64), hi = cx.as(2, DType::I64), zero = b.constant(0, DType::I64);
    cx.check(b.or_(b.compare(lo, zero, "LT"), b.compare(hi, zero, "LT")),
             "cannot do hardtanh on an unsigned type with negative limits", ErrorKind::Runtime);
  }
  // CPU's clamp reads the limits as double, then as self's dtype (integral
  // ones as int64 first).
  if (hlo::is_floating(self.dtype())) {
    fits(cx, {1, 2}, DType::F64);
    fits(cx, {1, 2}, self.dtype());
  } else {
    fits(cx, {1, 2}, DType::I64);
    fits(cx, {1, 2}, self.dtype());
  }
  DType t = hlo::opmath_type(self.dtype());
  Value lo = cx.as(1, t), hi = cx.as(2, t);
  Value r = at_most(b, at_least(b, b.convert(self, t), lo), hi);
  if (hlo::is_floating(t)) {  // CPU's clamp fills NaN when a limit is NaN
    Value nan_limit = b.or_(b.compare(lo, lo, "NE"), b.compare(hi, hi, "NE"));
    r = b.select(b.broadcast_to(nan_limit, r.dims()), b.full(NAN, r.type), r);
  }
  return {b.convert(r, self.dtype())};
}

// hardtanh_backward(grad_output, self, min_val, max_val): grad where
// min < x < max, else 0.
V hardtanh_backward(Context& cx) {
  auto& b = cx.b;
  DType out = floating_kernel(cx, cx.result_type({0, 1}), "hardshrink_backward_cpu"), t = hlo::opmath_type(out);
  fits(cx, {2, 3}, t);
  Value g = cx.as(0, t), x = cx.as(1, t);
  Value outside = b.or_(b.compare(x, cx.as(2, t), "LE"), b.compare(x, cx.as(3, t), "GE"));
  return {b.convert(b.select(outside, b.constant(0, t), g), out)};
}

// elu(self, alpha, scale, input_scale) =
//   x > 0 ? x * scale : (exp(x * input_scale) - 1) * alpha * scale
V elu(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  floating_kernel(cx, self.dtype(), "elu_cpu");
  DType t = hlo::opmath_type(self.dtype());
  fits(cx, {1, 2, 3}, t);
  Value x = b.convert(self, t);
  Value alpha = cx.as(1, t), scale = cx.as(2, t), input_scale = cx.as(3, t);
  Value neg = b.mul(b.unary("stablehlo.exponential_minus_one", b.mul(x, input_scale)), b.mul(alpha, scale));
  Value r = b.select(b.compare(x, b.constant(0, t), "LE"), neg, b.mul(x, scale));
  return {b.convert(r, self.dtype())};
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
V elu_backward(Context& cx) {
  auto& b = cx.b;
  if (cx.flag(4)) negative_slope_check(cx, 1, kEluInPlace);
  DType out = floating_kernel(cx, cx.result_type({0, 5}), "elu_backward_cpu"), t = hlo::opmath_type(out);
  fits(cx, {1, 2, 3}, t);
  Value g = cx.as(0, t), v = cx.as(5, t);
  Value alpha = cx.as(1, t), scale = cx.as(2, t), input_scale = cx.as(3, t);
  Value negcoef = b.mul(alpha, scale);
  Value neg = cx.flag(4) ? b.mul(b.mul(g, input_scale), b.add(v, negcoef))
                         : b.mul(b.mul(g, b.mul(input_scale, negcoef)), b.exp(b.mul(v, input_scale)));
  Value r = b.select(b.compare(v, b.constant(0, t), "LE"), neg, b.mul(g, scale));
  return {b.convert(r, out)};
}

// ---- more activations (CPU kernels in ATen/native/cpu/Activation.cpp)

// The input at i in its compute dtype, and the dtype to round back to.
struct Unary {
  Value x;
  DType out;
};
Unary opmath_in(Context& cx, size_t i, const char* kernel = nullptr) {
  Value self = cx.tensor(i);
  if (kernel) floating_kernel(cx, self.dtype(), kernel);
  return {cx.b.convert(self, hlo::opmath_type(self.dtype())), self.dtype()};
}
// grad_output (gi) and self (xi) promoted, in compute dtype.
struct Binary {
  Value g, x;
  DType out;
};
Binary opmath_grad(Context& cx, size_t gi, size_t xi, const char* kernel = nullptr) {
  DType out = cx.result_type({gi, xi}), t = hlo::opmath_type(out);
  if (kernel) floating_kernel(cx, out, kernel);
  return {cx.as(gi, t), cx.as(xi, t), out};
}

Value k(hlo::Builder& b, double v, const Value& like) { return b.constant(v, like.dtype()); }

// hardswish(x) = x * min(max(x + 3, 0), 6) / 6
V hardswish(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "hardswish_cpu");
  Value r = b.div(b.mul(x, at_most(b, at_least(b, b.add(x, k(b, 3, x)), k(b, 0, x)), k(b, 6, x))), k(b, 6, x));
  return {b.convert(r, out)};
}

// hardswish_backward: 0 below -3, g * (x / 3 + 0.5) up to 3, g above.
V hardswish_backward(Context& cx) {
  auto& b = cx.b;
  auto [g, x, out] = opmath_grad(cx, 0, 1, "hardswish_backward_cpu");
  Value mid = b.mul(g, b.add(b.div(x, k(b, 3, x)), k(b, 0.5, x)));
  Value r = b.select(b.compare(x, k(b, -3, x), "LT"), k(b, 0, x), b.select(b.compare(x, k(b, 3, x), "LE"), mid, g));
  return {b.convert(r, out)};
}

// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6
V hardsigmoid(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "hardsigmoid_cpu");
  Value r = b.div(at_most(b, at_least(b, b.add(x, k(b, 3, x)), k(b, 0, x)), k(b, 6, x)), k(b, 6, x));
  return {b.convert(r, out)};
}

// hardsigmoid_backward: g / 6 where -3 < x < 3, else 0.
V hardsigmoid_backward(Context& cx) {
  auto& b = cx.b;
  auto [g, x, out] = opmath_grad(cx, 0, 1, "hardsigmoid_backward");
  Value inside = b.and_(b.compare(x, k(b, -3, x), "GT"), b.compare(x, k(b, 3, x), "LT"));
  Value r = b.select(inside, b.mul(g, k(b, 1.0 / 6.0, x)), k(b, 0, x));
  return {b.convert(r, out)};
}

// 1 / (1 + exp(-x)), as the CPU kernels spell the sigmoid.
Value sigmoid_of(hlo::Builder& b, Value x) { return b.div(k(b, 1, x), b.add(k(b, 1, x), b.exp(b.neg(x)))); }

// The two halves of x along dim (glu's a and b).
std::pair<Value, Value> halves(Context& cx, Value x, int64_t dim) {
  if (x.rank() == 0) cx.fail("glu does not support scalars because halving size must be even");
  int64_t n = x.dims()[dim];
  if (n % 2)
    cx.fail("Halving dimension must be even, but dimension " + std::to_string(dim) + " is size " + std::to_string(n));
  Dims start(x.rank(), 0), mid = x.dims(), step(x.rank(), 1);
  mid[dim] = n / 2;
  Dims start2 = start;
  start2[dim] = n / 2;
  return {cx.b.slice(x, start, mid, step), cx.b.slice(x, start2, x.dims(), step)};
}

// glu(self, dim) = a * sigmoid(b) for the halves a, b of self along dim
V glu(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0);
  auto [a, c] = halves(cx, x, x.rank() == 0 ? 0 : cx.dim(cx.integer(1), x.rank()));
  floating_kernel(cx, out, "glu_cpu");  // CPU checks the shape first
  return {b.convert(b.mul(a, sigmoid_of(b, c)), out)};
}

// glu_backward(grad_output, self, dim) = cat(g * s, g * a * s * (1 - s))
V glu_backward(Context& cx) {
  auto& b = cx.b;
  auto [g, x, out] = opmath_grad(cx, 0, 1);
  int64_t dim = x.rank() == 0 ? 0 : cx.dim(cx.integer(2), x.rank());
  auto [a, c] = halves(cx, x, dim);
  Value s = sigmoid_of(b, c);
  Value ga = b.mul(s, g);
  Value gb = b.mul(b.mul(b.mul(b.sub(k(b, 1, s), s), s), a), g);
  return {b.convert(b.concatenate({ga, gb}, dim), out)};
}

// _prelu_kernel(self, weight) = x > 0 ? x : w * x (weight broadcasts)
V prelu_kernel(Context& cx) {
  auto& b = cx.b;
  same_dtypes(cx, {0, 1});
  DType out = floating_kernel(cx, cx.tensor(0).dtype(), "prelu_cpu"), t = hlo::opmath_type(out);
  Value x = cx.as(0, t), w = cx.as(1, t);
  Dims shape = hlo::broadcast_shapes(x.dims(), w.dims());
  x = b.broadcast_to(x, shape);
  Value r = b.select(b.compare(x, k(b, 0, x), "GT"), x, b.mul(b.broadcast_to(w, shape), x));
  return {b.convert(r, out)};
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight),
// both of the broadcast shape (autograd sums grad_weight down).
V prelu_kernel_backward(Context& cx) {
  auto& b = cx.b;
  same_dtypes(cx, {1, 2, 0});
  DType out = floating_kernel(cx, cx.tensor(1).dtype(), "prelu_backward_cpu"), t = hlo::opmath_type(out);
  Value g = cx.as(0, t), x = cx.as(1, t), w = cx.as(2, t);
  Dims shape = hlo::broadcast_shapes(hlo::broadcast_shapes(x.dims(), w.dims()), g.dims());
  g = b.broadcast_to(g, shape);
  x = b.broadcast_to(x, shape);
  w = b.broadcast_to(w, shape);
  Value pos = b.compare(x, k(b, 0, x), "GT");
  Value gi = b.select(pos, g, b.mul(w, g));
  Value gw = b.select(pos, k(b, 0, x), b.mul(x, g));
  return {b.convert(gi, cx.tensor(1).dtype()), b.convert(gw, cx.tensor(2).dtype())};
}

// log_sigmoid_forward(self) -> (min(x, 0) - log1p(exp(-|x|)), exp(-|x|))
V log_sigmoid_forward(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "log_sigmoid_cpu");
  Value z = b.exp(b.neg(b.abs(x)));
  Value lo = b.select(b.compare(x, k(b, 0, x), "LT"), x, k(b, 0, x));
  Value r = b.sub(lo, b.unary("stablehlo.log_plus_one", z));
  return {b.convert(r, out), b.convert(z, out)};
}

// log_sigmoid_backward(grad_output, self, buffer) =
//   g * (max_deriv - sign * z / (1 + z)), z = exp(-|x|); x < 0: (1, 1), else (0, -1)
V log_sigmoid_backward(Context& cx) {
  auto& b = cx.b;
  same_dtypes(cx, {1, 0, 2});
  auto [g, x, out] = opmath_grad(cx, 0, 1, "log_sigmoid_backward_cpu");
  Value z = cx.as(2, x.dtype());  // CPU reads z = exp(-|x|) from the buffer
  Dims shape = hlo::broadcast_shapes(hlo::broadcast_shapes(g.dims(), x.dims()), z.dims());
  g = b.broadcast_to(g, shape);
  x = b.broadcast_to(x, shape);
  z = b.broadcast_to(z, shape);
  Value q = b.div(z, b.add(k(b, 1, z), z));
  Value r = b.select(b.compare(x, k(b, 0, x), "LT"), b.mul(g, b.sub(k(b, 1, q), q)), b.mul(g, q));
  return {b.convert(r, out)};
}

// mish(x) = x * tanh(log1p(exp(x)))
V mish(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "mish_cpu");
  Value r = b.mul(x, b.tanh(b.unary("stablehlo.log_plus_one", b.exp(x))));
  return {b.convert(r, out)};
}

// softplus(self, beta, threshold) = x * beta > threshold ? x : log1p(exp(x * beta)) / beta
V softplus(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "softplus_cpu");
  fits(cx, {1, 2}, x.dtype());
  Value beta = cx.as(1, x.dtype()), th = cx.as(2, x.dtype());
  Value xb = b.mul(x, beta);
  Value soft = b.div(b.unary("stablehlo.log_plus_one", b.exp(xb)), beta);
  return {b.convert(b.select(b.compare(xb, th, "GT"), x, soft), out)};
}

// softplus_backward(grad_output, self, beta, threshold):
//   x * beta > threshold ? g : g * z / (z + 1), z = exp(x * beta)
V softplus_backward(Context& cx) {
  auto& b = cx.b;
  auto [g, x, out] = opmath_grad(cx, 0, 1, "softplus_backward_cpu");
  fits(cx, {2, 3}, x.dtype());
  Value xb = b.mul(x, cx.as(2, x.dtype()));
  Value z = b.exp(xb);
  Value soft = b.div(b.mul(g, z), b.add(z, k(b, 1, z)));
  return {b.convert(b.select(b.compare(xb, cx.as(3, x.dtype()), "GT"), g, soft), out)};
}

// threshold(self, threshold, value) = x <= threshold ? value : x
V threshold(Context& cx) {
  auto& b = cx.b;
  DType dt = cx.tensor(0).dtype();
  if (dt == DType::Bool || hlo::is_complex(dt)) refuse_dtype(cx, dt, "threshold_cpu");
  auto [x, out] = opmath_in(cx, 0);
  fits(cx, {1, 2}, x.dtype());
  Value r = b.select(b.compare(x, cx.as(1, x.dtype()), "LE"), b.broadcast_to(cx.as(2, x.dtype()), x.dims()), x);
  return {b.convert(r, out)};
}

// softshrink(self, lambd) = x > l ? x - l : x < -l ? x + l : x * 0 (NaN stays NaN)
V softshrink(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "softshrink_check");
  check_scalar_fits(cx, 1, DType::F64);  // CPU checks lambd.to<double>() against the range
  {                                      // CPU: 0 <= lambd <= the largest value of the input dtype (NaN fails)
    const double hi = hlo::max_finite(out);
    char hs[32];
    std::snprintf(hs, sizeof hs, "%g", hi);  // as c10 prints it: 65504, 3.40282e+38
    Value lv = cx.as(1, DType::F64);
    Value ok = b.and_(b.compare(lv, b.constant(0, DType::F64), "GE"), b.compare(lv, b.constant(hi, DType::F64), "LE"));
    cx.check(b.not_(ok),
             std::string("lambda must be in range [0, ") + hs + "] for input dtype " +
                 std::string(hlo::scalar_type_name(out)),
             ErrorKind::Runtime);
  }
  Value l = cx.as(1, x.dtype()), nl = b.neg(l);
  Value r =
      b.select(b.compare(x, l, "GT"), b.sub(x, l), b.select(b.compare(x, nl, "LT"), b.add(x, l), b.mul(x, k(b, 0, x))));
  return {b.convert(r, out)};
}

// -l <= x <= l
Value within(hlo::Builder& b, Value x, Value l) {
  Value above = b.compare(x, b.neg(l), "GE");
  Value below = b.compare(x, l, "LE");
  return b.and_(above, below);
}

// softshrink_backward / hardshrink_backward(grad_out, self, lambd) = -l <= x <= l ? 0 : g
V shrink_backward(Context& cx) {
  auto& b = cx.b;
  auto [g, x, out] = opmath_grad(cx, 0, 1, "shrink_backward_cpu");
  check_scalar_fits(cx, 2, out);  // CPU: lambd.to<scalar_t>()
  Value r = b.select(within(b, x, cx.as(2, x.dtype())), k(b, 0, g), g);
  return {b.convert(r, out)};
}

// hardshrink(self, lambd) = -l <= x <= l ? 0 : x
V hardshrink(Context& cx) {
  auto& b = cx.b;
  auto [x, out] = opmath_in(cx, 0, "hardshrink_cpu");
  check_scalar_fits(cx, 1, out);  // CPU: lambd.to<scalar_t>()
  Value inside = within(b, x, cx.as(1, x.dtype()));
  return {b.convert(b.select(inside, k(b, 0, x), x), out)};
}

// ---- rrelu

// rrelu_with_noise(self, noise!, lower, upper, training, generator?) ->
// result, then the new noise. Training: x <= 0 gets a slope r ~ U(lower,
// upper) (recorded in noise), x > 0 noise 1; eval: leaky_relu with slope
// (lower + upper) / 2 and noise unchanged.
V rrelu_with_noise(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0), noise_in = cx.tensor(1);
  if (self.dims() != noise_in.dims())
    cx.fail("noise tensor shape must match self tensor shape. Got self.shape = " + dims_str(self.dims()) +
            " noise.shape = " + dims_str(noise_in.dims()));
  auto [x, out] = opmath_in(cx, 0, cx.flag(4) ? "rrelu_with_noise_out_cpu" : "leaky_relu_cpu");
  if (cx.flag(4) && noise_in.dtype() != out)  // the training kernel writes noise as self's dtype
    cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(out)) + " but found " +
            std::string(hlo::scalar_type_name(noise_in.dtype())));
  DType t = x.dtype();
  fits(cx, {2, 3}, t);
  Value lo = cx.as(2, t), hi = cx.as(3, t);
  Value nonpos = b.compare(x, k(b, 0, x), "LE");
  if (cx.flag(4))  // a slope is drawn from U(lower, upper) for each x <= 0
    cx.check(b.and_(any_true(b, nonpos), b.compare(cx.as(2, DType::F64), cx.as(3, DType::F64), "GT")),
             "Expected from <= to to be true, but got false.  (Could this error message be improved?  If so, please "
             "report an enhancement request to PyTorch.)",
             ErrorKind::Runtime);
  if (!cx.flag(4)) {
    Value slope = b.div(b.add(lo, hi), b.constant(2, t));
    return {b.convert(b.select(nonpos, b.mul(x, slope), x), out), cx.tensor(1)};
  }
  Value state = cx.rng(5);
  Value r = b.add(lo, b.mul(b.sub(hi, lo), uniform01(b, state, x.dims(), t, float_digits(t))));
  Value noise = b.select(nonpos, r, b.full(1, x.type));
  Value y = b.select(nonpos, b.mul(x, r), x);
  return {b.convert(y, out), b.convert(noise, cx.tensor(1).dtype())};
}

// rrelu_with_noise_backward(grad_output, self, noise, lower, upper, training,
//   self_is_result): g * noise when training with upper - lower > 1e-6, else
//   leaky_relu's backward with slope (lower + upper) / 2.
V rrelu_with_noise_backward(Context& cx) {
  auto& b = cx.b;
  // leaky_relu's backward unless training with upper - lower > 1e-6 (then
  // grad * noise, which takes any dtype)
  auto [g, x, out] = opmath_grad(cx, 0, 1, cx.flag(5) ? nullptr : "leaky_relu_backward_cpu");
  DType t = x.dtype();
  Value lo = cx.as(3, t), hi = cx.as(4, t);
  Value slope = b.div(b.add(lo, hi), b.constant(2, t));
  if (cx.flag(6)) {
    Value lo64 = cx.as(3, DType::F64), hi64 = cx.as(4, DType::F64);
    Value neg = b.compare(b.add(lo64, hi64), b.constant(0, DType::F64), "LT");
    if (cx.flag(5)) neg = b.and_(neg, b.not_(b.compare(b.sub(hi64, lo64), b.constant(1e-6, DType::F64), "GT")));
    cx.check(neg, kLeakyReluInPlace, ErrorKind::Runtime);
  }
  Value leaky = b.select(b.compare(x, k(b, 0, x), "GT"), g, b.mul(g, slope));
  if (!cx.flag(5)) return {b.convert(leaky, out)};
  Value random = b.compare(b.sub(hi, lo), b.constant(1e-6, t), "GT");
  Value noisy = b.mul(g, cx.as(2, t));
  return {b.convert(b.select(b.broadcast_to(random, noisy.dims()), noisy, leaky), out)};
}

}  // namespace

std::vector<Entry> activation_lowerings() {
  return {
      {"aten::_softmax", softmax, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::_log_softmax", log_softmax, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::_softmax_backward_data", softmax_backward},
      {"aten::_log_softmax_backward_data", log_softmax_backward},
      {"aten::leaky_relu", leaky_relu},
      {"aten::leaky_relu_backward", leaky_relu_backward},
      {"aten::hardtanh", hardtanh},
      {"aten::hardtanh_backward", hardtanh_backward},
      {"aten::elu", elu},
      {"aten::elu_backward", elu_backward},
      {"aten::hardswish", hardswish},
      {"aten::hardswish_backward", hardswish_backward, Traits().set_out_same_dtype().set_partial_overlap_allowed()},
      {"aten::hardsigmoid", hardsigmoid, Traits().set_out_same_dtype()},
      {"aten::hardsigmoid_backward", hardsigmoid_backward},
      {"aten::glu", glu},
      {"aten::glu_backward", glu_backward},
      {"aten::_prelu_kernel", prelu_kernel},
      {"aten::_prelu_kernel_backward", prelu_kernel_backward},
      {"aten::log_sigmoid_forward", log_sigmoid_forward},
      {"aten::log_sigmoid_backward", log_sigmoid_backward},
      {"aten::mish", mish},
      {"aten::softplus", softplus},
      {"aten::softplus_backward", softplus_backward},
      {"aten::threshold", threshold},
      {"aten::softshrink", softshrink},
      {"aten::softshrink_backward", shrink_backward},
      {"aten::hardshrink", hardshrink},
      {"aten::hardshrink_backward", shrink_backward},
      {"aten::rrelu_with_noise", rrelu_with_noise},
      {"aten::rrelu_with_noise_backward", rrelu_with_noise_backward},
  };
}

}  // namespace torch_pjrt::lowering
