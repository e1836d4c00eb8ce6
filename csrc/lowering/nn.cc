// Neural-network ops: softmax, normalisation, losses, activations and their
// backward passes. Float16/bfloat16 compute in float32 (hlo::opmath_type) and
// round once at the end, as PyTorch does.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// ---- helpers

Value sum_all(hlo::Builder& b, Value x) { return sum_over(b, x, iota_dims(x.rank())); }

Value max_over(hlo::Builder& b, Value x, const Dims& dims) {
  return b.reduce(x, b.constant(-INFINITY, x.dtype()), dims, "stablehlo.maximum");
}

// Elementwise loss reduced as PyTorch's `reduction` argument says (none, mean
// over all elements, or sum), in the compute dtype.
Value reduce_loss(hlo::Builder& b, Value loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  Value s = sum_all(b, loss);
  if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(loss.type.numel()), s.dtype()));
  return s;
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

// ---- nll_loss

// An [N, C] / [C] / [N, C, d1, ...] input flattened to [M, C] rows, and the
// target flattened to [M].
struct NllRows {
  Value x;       // [M, C] in compute dtype
  Value target;  // [M] i64
  Value weight;  // [M] weight of each row's target, 0 where ignored
  Value valid;   // [M] i1: target != ignore_index
  int64_t classes;
};

// Moves dim 1 (classes) of x last and flattens the rest: [N, C, ...] -> [M, C].
Value classes_last(hlo::Builder& b, Value x) {
  if (x.rank() == 1) return b.reshape(x, {1, x.dims()[0]});
  Dims perm{0};
  for (int64_t i = 2; i < x.rank(); ++i) perm.push_back(i);
  perm.push_back(1);
  Value y = b.transpose(x, perm);
  int64_t c = x.dims()[1];
  return b.reshape(y, {x.type.numel() / std::max<int64_t>(c, 1), c});
}

// Inverse of classes_last for an [M, C] value and the original dims.
Value classes_back(hlo::Builder& b, Value y, const Dims& orig) {
  if (orig.size() == 1) return b.reshape(y, orig);
  Dims moved{orig[0]};
  for (size_t i = 2; i < orig.size(); ++i) moved.push_back(orig[i]);
  moved.push_back(orig[1]);
  Value z = b.reshape(y, moved);
  Dims perm{0, static_cast<int64_t>(orig.size()) - 1};
  for (size_t i = 1; i + 1 < orig.size(); ++i) perm.push_back(static_cast<int64_t>(i));
  return b.transpose(z, perm);
}

// Reads (self, target, weight?) at positions (xi, xi+1, wi) and ignore_index
// at ii; registers the out-of-bounds check.
NllRows nll_rows(Context& cx, size_t xi, size_t wi, size_t ii, DType t) {
  auto& b = cx.b;
  Value self = cx.tensor(xi);
  Value target = cx.as(xi + 1, DType::I64);
  if (self.rank() < 1) cx.fail("input must have at least 1 dim");
  int64_t c = self.rank() == 1 ? self.dims()[0] : self.dims()[1];
  Value x = classes_last(b, b.convert(self, t));
  int64_t m = x.dims()[0];
  if (target.type.numel() != m) cx.fail("target does not match the input's batch shape");
  target = b.reshape(target, {m});
  Value ignore = b.constant(static_cast<double>(cx.integer(ii)), DType::I64);
  Value valid = b.compare(target, ignore, "NE");
  Value zero = b.constant(0, DType::I64);
  Value out_of_range =
      b.or_(b.compare(target, zero, "LT"), b.compare(target, b.constant(static_cast<double>(c), DType::I64), "GE"));
  cx.check(any_true(b, b.and_(valid, out_of_range)), "Target is out of bounds.");
  Value safe = b.clamp(zero, target, b.constant(static_cast<double>(std::max<int64_t>(c - 1, 0)), DType::I64));
  // No rows (an empty batch) or no classes: nothing to gather from.
  bool empty = m == 0 || c == 0;
  Value w = cx.none(wi) ? b.full(1, {t, {m}}) : empty ? b.full(0, {t, {m}}) : b.take_along(cx.as(wi, t), safe, 0);
  w = b.select(valid, w, b.constant(0, t));
  return {x, safe, w, valid, c};
}

// x[m, target[m]] for each row m of an [M, C] x.
Value pick(hlo::Builder& b, Value x, Value target) {
  int64_t m = x.dims()[0];
  if (m == 0 || x.dims()[1] == 0) return b.full(0, {x.dtype(), {m}});
  Value rows = b.iota({DType::I64, {m, 1}}, 0);
  Value idx = b.concatenate({rows, b.reshape(target, {m, 1})}, 1);
  return b.gather(x, idx, {}, {0, 1}, {0, 1}, {1, 1}, {m});
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction,
//   ignore_index) -> (output, total_weight)
V nll_loss_forward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  int64_t reduction = cx.integer(3);
  NllRows r = nll_rows(cx, 0, 2, 4, t);
  Value loss = b.select(r.valid, b.neg(b.mul(pick(b, r.x, r.target), r.weight)), b.constant(0, t));
  if (reduction == kNone && self.rank() >= 2) {
    return {b.convert(b.reshape(loss, cx.tensor(1).dims()), out), b.full(0, {out, {}})};
  }
  Value total = sum_all(b, r.weight);
  Value s = sum_all(b, loss);
  if (reduction == kMean) s = b.div(s, total);
  return {b.convert(s, out), b.convert(total, out)};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?,
//   reduction, ignore_index, total_weight) -> grad_input
V nll_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  int64_t reduction = cx.integer(4);
  NllRows r = nll_rows(cx, 1, 3, 5, t);
  int64_t m = r.x.dims()[0];
  Value g = cx.as(0, t);
  if (reduction == kNone && self.rank() >= 2) {
    g = b.reshape(g, {m});
  } else {
    g = b.reshape(g, {});
    if (reduction == kMean) g = b.div(g, b.reshape(cx.as(6, t), {}));
  }
  Value coef = b.neg(b.mul(r.weight, g));  // [M]
  Value cls = b.iota({DType::I64, {m, r.classes}}, 1);
  Value hit = b.and_(b.compare(cls, b.broadcast_in_dim(r.target, {m, r.classes}, {0}), "EQ"),
                     b.broadcast_in_dim(r.valid, {m, r.classes}, {0}));
  Value grad = b.select(hit, b.broadcast_in_dim(coef, {m, r.classes}, {0}), b.constant(0, t));
  return {b.convert(classes_back(b, grad, self.dims()), out)};
}

// ---- mse and binary cross entropy

// An in-place op on a tensor of shape `out` with an operand of shape
// `other` (loss.mul_(weight)): TensorIterator's broadcast checks.
void broadcast_into(const Context& cx, const Dims& out, const Dims& other) {
  size_t n = std::max(out.size(), other.size());
  Dims full(n);
  for (size_t i = 0; i < n; ++i) {  // aligned from the right
    int64_t a = i < out.size() ? out[out.size() - 1 - i] : 1, o = i < other.size() ? other[other.size() - 1 - i] : 1;
    if (a != o && a != 1 && o != 1)
      cx.fail("The size of tensor a (" + std::to_string(a) + ") must match the size of tensor b (" + std::to_string(o) +
              ") at non-singleton dimension " + std::to_string(n - 1 - i));
    full[n - 1 - i] = a == 1 ? o : a;
  }
  if (full != out)
    cx.fail("output with shape " + dims_str(out) + " doesn't match the broadcast shape " + dims_str(full));
}

// The loss backward ops write into a grad_input shaped and typed like self
// (argument 1), computing in the common dtype of (grad, self, target):
// that must cast to self's dtype.
DType loss_grad_type(Context& cx, DType common) {
  DType self = cx.tensor(1).dtype();
  if (!hlo::can_cast(common, self))
    cx.fail("result type " + std::string(hlo::scalar_type_name(common)) + " can't be cast to the desired output type " +
            std::string(hlo::scalar_type_name(self)));
  return self;
}

V mse_loss(Context& cx) {
  auto& b = cx.b;
  DType out = floating_kernel(cx, cx.result_type({0, 1}), "mse_cpu"), t = hlo::opmath_type(out);
  Value d = b.sub(cx.as(0, t), cx.as(1, t));
  return {b.convert(reduce_loss(b, b.mul(d, d), cx.integer(2)), out)};
}

// mse_loss_backward(grad_output, self, target, reduction) = norm * (self - target) * grad
V mse_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType common = cx.result_type({0, 1, 2}), t = hlo::opmath_type(common);
  if (common == DType::Bool || hlo::is_complex(common)) refuse_dtype(cx, common, "mse_backward_cpu_out");
  DType out = loss_grad_type(cx, common);
  double norm = cx.integer(3) == kMean ? 2.0 / static_cast<double>(self.type.numel()) : 2.0;
  Value r = b.mul(b.mul(b.constant(norm, t), b.sub(cx.as(1, t), cx.as(2, t))), cx.as(0, t));
  return {b.convert(b.broadcast_to(r, self.dims()), out)};
}

// binary_cross_entropy(self, target, weight?, reduction):
//   -w * (t * max(log(x), -100) + (1 - t) * max(log(1 - x), -100))
V binary_cross_entropy(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  same_dtypes(cx, {0, 1});
  DType out = floating_kernel(cx, self.dtype(), "binary_cross_entropy"), t = hlo::opmath_type(float_type(out));
  Value x = b.convert(self, t), y = cx.as(1, t);
  // CPU: every input in [0, 1] (NaN fails)
  Value in01 = b.and_(b.compare(x, b.constant(0, t), "GE"), b.compare(x, b.constant(1, t), "LE"));
  cx.check(any_true(b, b.not_(in01)), "all elements of input should be between 0 and 1", ErrorKind::Runtime);
  Value one = b.constant(1, t), floor = b.constant(-100, t);
  Value lx = at_least(b, b.log(x), floor), l1x = at_least(b, b.log(b.sub(one, x)), floor);
  Value loss = b.neg(b.add(b.mul(y, lx), b.mul(b.sub(one, y), l1x)));
  if (!cx.none(2)) {  // CPU: loss.mul_(weight)
    broadcast_into(cx, self.dims(), cx.tensor(2).dims());
    loss = b.mul(loss, cx.as(2, t));
  }
  return {b.convert(reduce_loss(b, loss, cx.integer(3)), out)};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction):
//   grad * (x - t) / max((1 - x) * x, 1e-12) * w
V binary_cross_entropy_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  same_dtypes(cx, {0, 1, 2});
  floating_kernel(cx, cx.tensor(0).dtype(), "binary_cross_entropy_backward");
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  Value x = b.convert(self, t), y = cx.as(2, t);
  Value denom = at_least(b, b.mul(b.sub(b.constant(1, t), x), x), b.constant(1e-12, t));
  Value r = b.mul(b.div(b.sub(x, y), denom), cx.as(0, t));
  if (!cx.none(3)) r = b.mul(r, cx.as(3, t));
  if (cx.integer(4) == kMean) r = b.div(r, b.constant(static_cast<double>(self.type.numel()), t));
  return {b.convert(b.broadcast_to(r, self.dims()), out)};
}

// ---- dropout and activations

// native_dropout_backward(grad_output, mask, scale) = grad * mask * scale
V native_dropout_backward(Context& cx) {
  auto& b = cx.b;
  Value g = cx.tensor(0);
  DType t = hlo::opmath_type(g.dtype());
  Value r = b.mul(b.mul(b.convert(g, t), cx.as(1, t)), cx.as(2, t));
  return {b.convert(r, g.dtype())};
}

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

// ---- huber and smooth L1

// huber_loss(self, target, reduction, delta):
//   z = |x - y|; z < delta ? 0.5 * z * z : delta * (z - 0.5 * delta)
V huber_loss(Context& cx) {
  auto& b = cx.b;
  DType out = floating_kernel(cx, cx.result_type({0, 1}), "huber_cpu"), t = hlo::opmath_type(out);
  cx.check(b.compare(cx.as(3, DType::F64), b.constant(0, DType::F64), "LE"),
           "huber_loss does not support non-positive values for delta.", ErrorKind::Runtime);
  Value z = b.abs(b.sub(cx.as(0, t), cx.as(1, t)));
  Value d = cx.as(3, t), half = b.constant(0.5, t);
  Value loss = b.select(b.compare(z, d, "LT"), b.mul(b.mul(half, z), z), b.mul(d, b.sub(z, b.mul(half, d))));
  return {b.convert(reduce_loss(b, loss, cx.integer(2)), out)};
}

// 1 / numel for mean reduction, else 1.
Value loss_norm(Context& cx, const Value& self, int64_t reduction, DType t) {
  double n = static_cast<double>(self.type.numel());
  return cx.b.constant(reduction == kMean ? 1.0 / n : 1.0, t);
}

// huber_loss_backward(grad_output, self, target, reduction, delta):
//   x = self - target; x < -delta: -norm * g * delta; x > delta: norm * g * delta; else norm * x * g
V huber_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType common = floating_kernel(cx, cx.result_type({0, 1, 2}), "huber_backward_cpu_out"), t = hlo::opmath_type(common);
  DType out = loss_grad_type(cx, common);
  Value x = b.sub(cx.as(1, t), cx.as(2, t)), g = cx.as(0, t), d = cx.as(4, t);
  Value norm = loss_norm(cx, self, cx.integer(3), t);
  Value ng = b.mul(norm, g);
  Value r = b.select(b.compare(x, b.neg(d), "LT"), b.neg(b.mul(ng, d)),
                     b.select(b.compare(x, d, "GT"), b.mul(ng, d), b.mul(b.mul(norm, x), g)));
  return {b.convert(b.broadcast_to(r, hlo::broadcast_shapes(x.dims(), self.dims())), out)};
}

// smooth_l1_loss(self, target, reduction, beta):
//   z = |x - y|; z < beta ? 0.5 * z * z / beta : z - 0.5 * beta (beta = 0: z)
V smooth_l1_loss(Context& cx) {
  auto& b = cx.b;
  DType out = floating_kernel(cx, cx.result_type({0, 1}), "smooth_l1_cpu"), t = hlo::opmath_type(out);
  cx.check(b.compare(cx.as(3, DType::F64), b.constant(0, DType::F64), "LT"),
           "smooth_l1_loss does not support negative values for beta.", ErrorKind::Runtime);
  Value z = b.abs(b.sub(cx.as(0, t), cx.as(1, t)));
  Value beta = cx.as(3, t), half = b.constant(0.5, t);
  Value loss = b.select(b.compare(z, beta, "LT"), b.div(b.mul(b.mul(half, z), z), beta), b.sub(z, b.mul(half, beta)));
  return {b.convert(reduce_loss(b, loss, cx.integer(2)), out)};
}

// smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
//   x < -beta: -norm * g; x > beta: norm * g; else norm * x * g / beta
//   (beta = 0 is l1_loss's backward: norm * sign(x) * g)
V smooth_l1_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType common = cx.result_type({0, 1, 2}), t = hlo::opmath_type(common);
  if (common == DType::Bool || hlo::is_complex(common)) refuse_dtype(cx, common, "smooth_l1_backward_cpu_out");
  DType out = loss_grad_type(cx, common);
  Value x = b.sub(cx.as(1, t), cx.as(2, t)), g = cx.as(0, t), beta = cx.as(4, t);
  Value norm = loss_norm(cx, self, cx.integer(3), t);
  Value ng = b.mul(norm, g), zero = b.constant(0, t);
  Value inner = b.select(b.compare(beta, zero, "EQ"), b.mul(x, zero), b.div(b.mul(b.mul(norm, x), g), beta));
  Value r = b.select(b.compare(x, b.neg(beta), "LT"), b.neg(ng), b.select(b.compare(x, beta, "GT"), ng, inner));
  return {b.convert(b.broadcast_to(r, hlo::broadcast_shapes(x.dims(), self.dims())), out)};
}

// channel_shuffle(self, groups): [N, C, *] viewed as [N, g, C / g, *],
// groups and channels-per-group swapped.
V channel_shuffle(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t g = cx.integer(1);
  if (x.rank() <= 2) cx.fail("channel_shuffle expects input to have at least 3 dimensions");
  if (g <= 0) cx.fail("Number of groups to divide channels in must be positive. Value of groups:" + std::to_string(g));
  int64_t c = x.dims()[1];
  if (c % g)
    cx.fail("Number of channels must be divisible by groups. Got " + std::to_string(c) + " channels and " +
            std::to_string(g) + " groups.");
  Dims split{x.dims()[0], g, c / g};
  Dims perm{0, 2, 1};
  for (int64_t i = 2; i < x.rank(); ++i) {
    split.push_back(x.dims()[i]);
    perm.push_back(i + 1);
  }
  return {b.reshape(b.transpose(b.reshape(x, split), perm), x.dims())};
}

// ---- multi-class margin losses (ATen/native/LossMultiMargin.cpp,
// LossMultiLabelMargin.cpp)

// An [N, C] or [C] input as [N, C] rows in dtype t, and its target as [N] or
// [N, C] i64 rows.
struct MarginRows {
  Value x, target;
  int64_t n, c;
};
MarginRows margin_rows(Context& cx, size_t xi, size_t ti, DType t, bool per_class_target) {
  auto& b = cx.b;
  Value self = cx.tensor(xi), target = cx.as(ti, DType::I64);
  if (self.rank() > 2)
    cx.fail("Expected non-empty vector or matrix with optional 0-dim batch size, but got: rank " +
            std::to_string(self.rank()));
  int64_t c = self.rank() == 0 ? 1 : self.dims().back();
  int64_t n = self.rank() == 2 ? self.dims()[0] : 1;
  if (per_class_target ? target.dims() != self.dims() : (target.rank() > 1 || target.type.numel() != n))
    cx.fail("inconsistent target size");
  Value x = b.reshape(b.convert(self, t), {n, c});
  return {x, b.reshape(target, per_class_target ? Dims{n, c} : Dims{n}), n, c};
}

// Shape of the per-sample loss for reduction=none.
Dims margin_none_dims(const Value& self, const Value& target, bool per_class_target) {
  if (per_class_target) return self.rank() == 2 ? Dims{self.dims()[0]} : Dims{};
  return target.rank() == 0 ? Dims{} : Dims{target.dims()[0]};
}

// The [N, C] hinge terms of multi_margin_loss before the 1/C and the
// reduction: max(0, margin - x[y] + x[d])^p (p = 1 or 2) times weight[y], 0
// at d = y. Also returns z and the active mask for the backward.
struct MultiMargin {
  Value h, z, active, wy, is_p1;
};
MultiMargin multi_margin_terms(Context& cx, const MarginRows& r, size_t p_i, size_t m_i, size_t w_i, DType t) {
  auto& b = cx.b;
  Value zero64 = b.constant(0, DType::I64);
  Value bad = b.or_(b.compare(r.target, zero64, "LT"),
                    b.compare(r.target, b.constant(static_cast<double>(r.c), DType::I64), "GE"));
  cx.check(any_true(b, bad), "target out of range", ErrorKind::Runtime);
  Value safe = b.clamp(zero64, r.target, b.constant(static_cast<double>(r.c - 1), DType::I64));
  Dims nc{r.n, r.c};
  Value xy = b.broadcast_in_dim(pick(b, r.x, safe), nc, {0});
  Value z = b.add(b.sub(b.broadcast_to(cx.as(m_i, t), nc), xy), r.x);
  Value not_target = b.compare(b.iota({DType::I64, nc}, 1), b.broadcast_in_dim(safe, nc, {0}), "NE");
  Value active = b.and_(not_target, b.compare(z, b.constant(0, t), "GT"));
  Value is_p1 = b.compare(cx.as(p_i, t), b.constant(1, t), "EQ");
  Value h = b.select(b.broadcast_to(is_p1, nc), z, b.mul(z, z));
  Value wy;
  if (!cx.none(w_i)) {
    wy = b.broadcast_in_dim(b.take_along(cx.as(w_i, t), safe, 0), nc, {0});
    h = b.mul(h, wy);
  }
  h = b.select(active, h, b.constant(0, t));
  return {h, z, active, wy, is_p1};
}

// multi_margin_loss(self, target, p, margin, weight?, reduction)
V multi_margin_loss(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  MarginRows r = margin_rows(cx, 0, 1, t, false);
  MultiMargin m = multi_margin_terms(cx, r, 2, 3, 4, t);
  Value loss = b.div(sum_over(b, m.h, {1}), b.constant(static_cast<double>(r.c), t));
  int64_t reduction = cx.integer(5);
  if (reduction == kNone) return {b.convert(b.reshape(loss, margin_none_dims(self, cx.tensor(1), false)), out)};
  return {b.convert(reduce_loss(b, loss, reduction), out)};
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?,
//   reduction): each active d gets h = g (p = 1) or 2 g z (p = 2), times
//   weight[y]; the target column gets minus their sum; g = 1 / C (and / N
//   for mean), then times grad_output.
V multi_margin_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  MarginRows r = margin_rows(cx, 1, 2, t, false);
  MultiMargin m = multi_margin_terms(cx, r, 3, 4, 5, t);
  int64_t reduction = cx.integer(6);
  Dims nc{r.n, r.c};
  double g = reduction == kMean ? 1.0 / static_cast<double>(r.n * r.c) : 1.0 / static_cast<double>(r.c);
  Value gv = b.constant(g, t);
  Value h = b.select(b.broadcast_to(m.is_p1, nc), b.full(g, {t, nc}), b.mul(b.mul(b.constant(2, t), gv), m.z));
  if (!cx.none(5)) h = b.mul(h, m.wy);
  h = b.select(m.active, h, b.constant(0, t));
  Value is_target = b.compare(
      b.iota({DType::I64, nc}, 1),
      b.broadcast_in_dim(
          b.clamp(b.constant(0, DType::I64), r.target, b.constant(static_cast<double>(r.c - 1), DType::I64)), nc, {0}),
      "EQ");
  Value grad = b.select(is_target, b.broadcast_in_dim(b.neg(sum_over(b, h, {1})), nc, {0}), h);
  Value go = cx.as(0, t);
  if (reduction == kNone && go.rank() > 0) {
    grad = b.mul(grad, b.broadcast_in_dim(b.reshape(go, {r.n}), nc, {0}));
  } else {
    grad = b.mul(grad, b.reshape(go, {}));
  }
  return {b.convert(b.reshape(grad, self.dims()), out)};
}

// The pieces of multilabel_margin_loss for [N, C] rows: valid[n, j] (target
// j comes before the first -1), is_target[n, c], and the [N, J, C] hinge
// z = 1 - x[y_j] + x[c] with its active mask (valid j, non-target c, z > 0).
struct MultiLabel {
  Value valid, onehot, is_target, z, active;
};
MultiLabel multilabel_terms(Context& cx, const MarginRows& r, DType t) {
  auto& b = cx.b;
  int64_t n = r.n, c = r.c;
  Dims nc{n, c}, njc{n, c, c};
  // negatives up to and including j: [N, C] x [C, C] upper-triangular ones
  Value neg = b.convert(b.compare(r.target, b.constant(0, DType::I64), "LT"), DType::F32);
  Value tri = b.convert(b.compare(b.iota({DType::I64, {c, c}}, 0), b.iota({DType::I64, {c, c}}, 1), "LE"), DType::F32);
  Value seen = b.dot_general(neg, tri, {}, {}, {1}, {0}, DType::F32);
  Value valid = b.compare(seen, b.constant(0, DType::F32), "EQ");
  Value oob = b.and_(valid, b.compare(r.target, b.constant(static_cast<double>(c), DType::I64), "GE"));
  cx.check(any_true(b, oob), "target index is out of bounds", ErrorKind::Runtime);
  Value safe = b.clamp(b.constant(0, DType::I64), r.target, b.constant(static_cast<double>(c - 1), DType::I64));
  Value cls = b.iota({DType::I64, njc}, 2);
  Value onehot =
      b.and_(b.compare(b.broadcast_in_dim(safe, njc, {0, 1}), cls, "EQ"), b.broadcast_in_dim(valid, njc, {0, 1}));
  Value is_target = b.reduce(onehot, b.constant(0, DType::Bool), {1}, "stablehlo.or");
  Value xy = b.reduce(b.select(onehot, b.broadcast_in_dim(r.x, njc, {0, 2}), b.constant(0, t)), b.constant(0, t), {2},
                      "stablehlo.add");  // x[y_j], 0 for invalid j
  Value z = b.add(b.sub(b.constant(1, t), b.broadcast_in_dim(xy, njc, {0, 1})), b.broadcast_in_dim(r.x, njc, {0, 2}));
  Value active =
      b.and_(b.and_(b.broadcast_in_dim(valid, njc, {0, 1}), b.not_(b.broadcast_in_dim(is_target, njc, {0, 2}))),
             b.compare(z, b.constant(0, t), "GT"));
  return {valid, onehot, is_target, z, active};
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
V multilabel_margin_loss_forward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  MarginRows r = margin_rows(cx, 0, 1, t, true);
  MultiLabel m = multilabel_terms(cx, r, t);
  Value h = b.select(m.active, m.z, b.constant(0, t));
  Value loss = b.div(sum_over(b, h, {1, 2}), b.constant(static_cast<double>(r.c), t));
  Value is_target = b.convert(b.reshape(m.is_target, self.dims()), out);
  int64_t reduction = cx.integer(2);
  if (reduction == kNone)
    return {b.convert(b.reshape(loss, margin_none_dims(self, cx.tensor(1), true)), out), is_target};
  return {b.convert(reduce_loss(b, loss, reduction), out), is_target};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction,
//   is_target): each active (j, c) adds g at c and -g at y_j; g = 1 / C
//   (and / N for mean), then times grad_output.
V multilabel_margin_loss_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType out = self.dtype(), t = hlo::opmath_type(float_type(out));
  MarginRows r = margin_rows(cx, 1, 2, t, true);
  MultiLabel m = multilabel_terms(cx, r, t);
  int64_t reduction = cx.integer(3);
  Dims njc{r.n, r.c, r.c};
  double g = reduction == kMean ? 1.0 / static_cast<double>(r.n * r.c) : 1.0 / static_cast<double>(r.c);
  Value act = b.convert(m.active, t);
  Value plus = sum_over(b, act, {1});                                    // [N, C]: active pairs with this c
  Value per_j = b.broadcast_in_dim(sum_over(b, act, {2}), njc, {0, 1});  // [N, J]: active pairs of target j
  Value minus = sum_over(b, b.select(m.onehot, per_j, b.constant(0, t)), {1});
  Value grad = b.mul(b.sub(plus, minus), b.constant(g, t));
  Value go = cx.as(0, t);
  Dims nc{r.n, r.c};
  if (reduction == kNone && go.rank() > 0) {
    grad = b.mul(grad, b.broadcast_in_dim(b.reshape(go, {r.n}), nc, {0}));
  } else {
    grad = b.mul(grad, b.reshape(go, {}));
  }
  return {b.convert(b.reshape(grad, self.dims()), out)};
}

// ---- pairwise distances (ATen/native/Distance.cpp, cpu/DistanceOpsKernel.cpp)

// p arrives at run time, so the lowerings compute every special case PyTorch
// has (0, 1, 2, inf, general) and select by p.
struct PNorm {
  Value is0, is1, is2, is_inf, lt2;  // rank-0 i1
};
PNorm p_cases(hlo::Builder& b, Value p) {
  DType t = p.dtype();
  return {b.compare(p, b.constant(0, t), "EQ"), b.compare(p, b.constant(1, t), "EQ"),
          b.compare(p, b.constant(2, t), "EQ"), b.compare(p, b.constant(INFINITY, t), "EQ"),
          b.compare(p, b.constant(2, t), "LT")};
}
Value pick_p(hlo::Builder& b, const Value& pred, Value on, Value off) {
  return b.select(b.broadcast_to(pred, on.dims()), on, off);
}

// Distances over the last dim of `diff` ([..., M]) for a runtime p.
Value p_distance(hlo::Builder& b, Value diff, Value p) {
  DType t = diff.dtype();
  int64_t last = diff.rank() - 1;
  Value a = b.abs(diff);
  PNorm c = p_cases(b, p);
  Value d0 = sum_over(b, b.convert(b.compare(diff, b.constant(0, t), "NE"), t), {last});
  Value d1 = sum_over(b, a, {last});
  Value d2 = b.sqrt(sum_over(b, b.mul(a, a), {last}));
  Value dinf = b.reduce(a, b.constant(0, t), {last}, "stablehlo.maximum");
  Value pb = b.broadcast_to(p, a.dims());
  Value sp = sum_over(b, b.binary("stablehlo.power", a, pb), {last});
  Value dp = b.binary("stablehlo.power", sp, b.broadcast_to(b.div(b.constant(1, t), p), sp.dims()));
  Value r = pick_p(b, c.is_inf, dinf, dp);
  r = pick_p(b, c.is2, d2, r);
  r = pick_p(b, c.is1, d1, r);
  return pick_p(b, c.is0, d0, r);
}

// d dist / d diff for each element of `diff` ([..., M]) given its distance
// `dist` (broadcast to diff), as cdist's backward kernels compute it.
Value p_distance_grad(hlo::Builder& b, Value diff, Value dist, Value p) {
  DType t = diff.dtype();
  Value zero = b.constant(0, t), one = b.constant(1, t);
  Value a = b.abs(diff);
  Value sign = b.unary("stablehlo.sign", diff);
  PNorm c = p_cases(b, p);
  Value pb = b.broadcast_to(p, a.dims());
  Value dist_is0 = b.compare(dist, zero, "EQ");
  Value dpow = b.binary("stablehlo.power", dist, b.sub(pb, b.broadcast_to(one, pb.dims())));
  Value lt2 = b.div(b.mul(sign, b.binary("stablehlo.power", a, b.sub(pb, b.broadcast_to(one, pb.dims())))), dpow);
  Value lt2_zero =
      b.or_(dist_is0, b.and_(b.compare(diff, zero, "EQ"), b.broadcast_to(b.compare(p, one, "LT"), a.dims())));
  lt2 = b.select(lt2_zero, b.broadcast_to(zero, a.dims()), lt2);
  Value two = b.div(diff, dist);
  two = b.select(dist_is0, b.broadcast_to(zero, a.dims()), two);
  Value inf = b.mul(sign, b.convert(b.compare(a, dist, "EQ"), t));
  Value pm2 = b.sub(pb, b.broadcast_to(b.constant(2, t), pb.dims()));
  Value gen = b.div(b.mul(diff, b.binary("stablehlo.power", a, pm2)), dpow);
  gen = b.select(dist_is0, b.broadcast_to(zero, a.dims()), gen);
  Value r = pick_p(b, c.is_inf, inf, gen);
  r = pick_p(b, c.is2, two, r);
  r = pick_p(b, c.lt2, lt2, r);
  r = pick_p(b, c.is1, sign, r);
  return pick_p(b, c.is0, b.broadcast_to(zero, a.dims()), r);
}

// ATen's infer_size of two shapes, with its error.
Dims broadcast_batch(const Context& cx, const Dims& a, const Dims& o) {
  size_t n = std::max(a.size(), o.size());
  Dims full(n);
  for (size_t i = 0; i < n; ++i) {  // aligned from the right
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < o.size() ? o[o.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      cx.fail("The size of tensor a (" + std::to_string(da) + ") must match the size of tensor b (" +
              std::to_string(db) + ") at non-singleton dimension " + std::to_string(n - 1 - i));
    full[n - 1 - i] = da == 1 ? db : da;
  }
  return full;
}

// x1 [B..., P, M] and x2 [B..., R, M] with their batch dims broadcast
// (infer_size's error when they do not).
std::pair<Value, Value> cdist_operands(Context& cx, Value x1, Value x2) {
  auto& b = cx.b;
  Dims b1(x1.dims().begin(), x1.dims().end() - 2), b2(x2.dims().begin(), x2.dims().end() - 2);
  Dims batch = broadcast_batch(cx, b1, b2);
  Dims d1 = batch, d2 = batch;
  d1.insert(d1.end(), x1.dims().end() - 2, x1.dims().end());
  d2.insert(d2.end(), x2.dims().end() - 2, x2.dims().end());
  return {b.broadcast_to(x1, d1), b.broadcast_to(x2, d2)};
}

// x1[..., P, None, M] - x2[..., None, R, M]
Value pair_diff(hlo::Builder& b, Value x1, Value x2) {
  int64_t k = x1.rank();
  Dims full(x1.dims().begin(), x1.dims().end() - 1);
  full.push_back(x2.dims()[k - 2]);
  full.push_back(x1.dims().back());
  Dims m1, m2;
  for (int64_t i = 0; i < k - 1; ++i) m1.push_back(i);
  m1.push_back(k);
  for (int64_t i = 0; i < k - 2; ++i) m2.push_back(i);
  m2.push_back(k - 1);
  m2.push_back(k);
  return b.sub(b.broadcast_in_dim(x1, full, m1), b.broadcast_in_dim(x2, full, m2));
}

// _cdist_forward(x1, x2, p, compute_mode?) -> [B..., P, R] of x1's dtype.
// For p = 2 with compute_mode 1, or none/0 with more than 25 rows, CPU uses
// the matrix product form sqrt(max(|x1|^2 + |x2|^2 - 2 x1.x2, 0)); so do we.
// CPU's checks in its order: ranks, columns, floating dtypes, p >= 0, the
// mode, the batch dims; then empty results, and the dtypes each path takes
// (the product takes float16/bfloat16, the kernel does not).
V cdist_forward(Context& cx) {
  auto& b = cx.b;
  Value a1 = cx.tensor(0), a2 = cx.tensor(1);
  for (size_t i : {0, 1})
    if (cx.tensor(i).rank() < 2)
      cx.fail("cdist only supports at least 2D tensors, X" + std::to_string(i + 1) +
              " got: " + std::to_string(cx.tensor(i).rank()) + "D");
  if (a1.dims().back() != a2.dims().back())
    cx.fail("X1 and X2 must have the same number of columns. X1: " + std::to_string(a1.dims().back()) +
            " X2: " + std::to_string(a2.dims().back()));
  for (size_t i : {0, 1})
    if (!hlo::is_floating(cx.tensor(i).dtype()))
      cx.fail("cdist only supports floating-point dtypes, X" + std::to_string(i + 1) +
              " got: " + std::string(hlo::scalar_type_name(cx.tensor(i).dtype())));
  DType out = a1.dtype(), t = hlo::opmath_type(out);
  Value p = cx.as(2, t);
  cx.check(b.compare(p, b.constant(0, t), "LT"), "cdist only supports non-negative p values", ErrorKind::Runtime);
  int64_t mode = cx.integer_or(3, 0);
  if (mode < 0 || mode > 2) cx.fail("possible modes: 0, 1, 2, but was: " + std::to_string(mode));
  auto [x1, x2] = cdist_operands(cx, cx.as(0, t), cx.as(1, t));
  int64_t k = x1.rank(), rp = x1.dims()[k - 2], rr = x2.dims()[k - 2];
  Dims shape(x1.dims().begin(), x1.dims().end() - 1);
  shape.push_back(rr);
  if (numel(shape) == 0 || x1.dims().back() == 0) return {b.full(0, {out, shape})};
  bool mm_able = mode == 1 || (mode == 0 && (rp > 25 || rr > 25));
  Value is2 = p_cases(b, p).is2;
  // p = 2 takes the product when mm_able, any other p the kernel, which
  // dispatches on float and double only and reads x2 as x1's dtype
  Value takes_product = mm_able ? is2 : b.constant(0, DType::Bool);
  Value takes_kernel = b.not_(takes_product);
  bool reduced = out == DType::F16 || out == DType::BF16;
  if (reduced) {
    if (!mm_able) refuse_dtype(cx, out, "cdist");
    cx.check(takes_kernel, "\"cdist\" not implemented for '" + std::string(hlo::scalar_type_name(out)) + "'",
             ErrorKind::NotImplemented);
  }
  if (a2.dtype() != out) {
    std::string kernel = "expected scalar type " + std::string(hlo::scalar_type_name(out)) + " but found " +
                         std::string(hlo::scalar_type_name(a2.dtype()));
    if (!mm_able) cx.fail(kernel);
    cx.check(takes_product,
             "expected m1 and m2 to have the same dtype, but got: " + std::string(hlo::cpp_type_name(out)) +
                 " != " + std::string(hlo::cpp_type_name(a2.dtype())),
             ErrorKind::Runtime);
    if (!reduced) cx.check(takes_kernel, kernel, ErrorKind::Runtime);
  }
  Value r = p_distance(b, pair_diff(b, x1, x2), p);
  if (mm_able) {
    Dims batch;
    for (int64_t i = 0; i < k - 2; ++i) batch.push_back(i);
    Value n1 = sum_over(b, b.mul(x1, x1), {k - 1}), n2 = sum_over(b, b.mul(x2, x2), {k - 1});
    Value dot = b.dot_general(x1, x2, batch, batch, {k - 1}, {k - 1}, t);
    Dims full = dot.dims(), keep1 = batch, keep2 = batch;
    keep1.push_back(k - 2);
    keep2.push_back(k - 1);
    Value sq = b.add(b.add(b.mul(b.constant(-2, t), dot), b.broadcast_in_dim(n1, full, keep1)),
                     b.broadcast_in_dim(n2, full, keep2));
    Value mm = b.sqrt(at_least(b, sq, b.constant(0, t)));
    r = pick_p(b, is2, mm, r);
  }
  return {b.convert(r, out)};
}

// grad_x1[..., p, m] = sum_r f(x1[p, m] - x2[r, m], dist[p, r]) * grad[p, r]
Value cdist_grad(hlo::Builder& b, Value g, Value x1, Value x2, Value p, Value dist) {
  Value diff = pair_diff(b, x1, x2);
  int64_t k = diff.rank();
  Dims keep;
  for (int64_t i = 0; i < k - 1; ++i) keep.push_back(i);
  Value f = p_distance_grad(b, diff, b.broadcast_in_dim(dist, diff.dims(), keep), p);
  return sum_over(b, b.mul(f, b.broadcast_in_dim(g, diff.dims(), keep)), {k - 2});
}

// _cdist_backward(grad, x1, x2, p, cdist) -> grad_x1, shaped like x1
// broadcast to the common batch dims (CPU leaves the batch reduction to
// autograd). CPU's order: sizes -1 and -2 of x1 and x2 (IndexError), the
// batch dims, empty operands (zeros like x1, any dtype), the dtype dispatch
// on x1's float/double, then (unless p is 0) the other operands' dtypes. grad
// and cdist are read as flat [B, P, R] buffers (their first B P R elements).
V cdist_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1), other = cx.tensor(2);
  int64_t c1 = size_at(cx, self, -1);
  size_at(cx, other, -1);
  int64_t r1 = size_at(cx, self, -2), r2 = size_at(cx, other, -2);
  Dims b1(self.dims().begin(), self.dims().end() - 2), b2(other.dims().begin(), other.dims().end() - 2);
  Dims batch = broadcast_batch(cx, b1, b2);
  DType out = self.dtype();
  if (r1 == 0 || r2 == 0 || c1 == 0 || numel(batch) == 0) return {b.full(0, self.type)};
  if (out != DType::F32 && out != DType::F64) refuse_dtype(cx, out, "cdist_backward");
  DType t = out;
  Value p = cx.as(3, t);
  for (size_t i : {0, 2, 4})
    if (cx.tensor(i).dtype() != out)
      cx.check(b.compare(p, b.constant(0, t), "NE"),
               "expected scalar type " + std::string(hlo::scalar_type_name(out)) + " but found " +
                   std::string(hlo::scalar_type_name(cx.tensor(i).dtype())),
               ErrorKind::Runtime);
  if (other.dims().back() != c1) cx.fail("X1 and X2 must have the same number of columns.");
  auto [x1, x2] = cdist_operands(cx, cx.as(1, t), cx.as(2, t));
  Dims pairs = batch;
  pairs.insert(pairs.end(), {r1, r2});
  auto flat = [&](size_t i, const char* name) {
    Value v = cx.as(i, t);
    int64_t have = v.type.numel(), need = numel(pairs);
    if (have < need)  // CPU would read past its end
      cx.fail(std::string(name) + " of shape " + dims_str(v.dims()) + " does not hold " + dims_str(pairs));
    if (v.dims() == pairs) return v;
    v = b.reshape(v, {have});
    if (have > need) v = b.slice(v, {0}, {need}, {1});
    return b.reshape(v, pairs);
  };
  Value g = flat(0, "grad"), dist = flat(4, "cdist");
  return {b.convert(cdist_grad(b, g, x1, x2, p, dist), out)};
}

// Row i and column j (i < j) of each condensed pair position k of n rows:
// i from the quadratic formula in f64, then corrected by one either way;
// start(i) = n i - i (i + 1) / 2 is the position of pair (i, i + 1).
std::pair<Value, Value> pdist_rows(hlo::Builder& b, int64_t n, int64_t len) {
  TensorType it{DType::I64, {len}};
  Value k = b.iota(it, 0);
  auto c = [&](double v) { return b.full(v, it); };
  Value kd = b.convert(k, DType::F64);
  Value m = b.full(static_cast<double>(2 * n - 1), {DType::F64, {len}});
  Value disc = b.sub(b.mul(m, m), b.mul(b.full(8, {DType::F64, {len}}), kd));
  Value root = b.sqrt(at_least(b, disc, b.full(0, disc.type)));
  Value i = b.convert(b.unary("stablehlo.floor", b.div(b.sub(m, root), b.full(2, disc.type))), DType::I64);
  auto start = [&](Value r) {
    return b.sub(b.mul(c(static_cast<double>(n)), r), b.div(b.mul(r, b.add(r, c(1))), c(2)));
  };
  i = b.clamp(c(0), i, c(static_cast<double>(n - 2)));
  i = b.select(b.compare(start(b.add(i, c(1))), k, "LE"), b.add(i, c(1)), i);
  i = b.select(b.compare(start(i), k, "GT"), b.sub(i, c(1)), i);
  Value j = b.add(b.add(b.sub(k, start(i)), i), c(1));
  return {i, j};
}

// Condensed pair position of (i, j) in an [n, n] matrix, -1 on the diagonal
// and symmetric: i < j -> n i - i (i + 1) / 2 + j - i - 1.
Value pair_position(hlo::Builder& b, int64_t n) {
  TensorType m{DType::I64, {n, n}};
  Value i = b.iota(m, 0), j = b.iota(m, 1);
  Value lo = b.min(i, j), hi = b.max(i, j);
  Value nn = b.constant(static_cast<double>(n), DType::I64), one = b.constant(1, DType::I64);
  Value two = b.constant(2, DType::I64);
  Value pos = b.sub(b.sub(b.add(b.sub(b.mul(nn, lo), b.div(b.mul(lo, b.add(lo, one)), two)), hi), lo), one);
  return b.select(b.compare(i, j, "EQ"), b.full(-1, m), pos);
}

// pdist's size(0) and size(1) checks: IndexError as ATen's.
void pdist_sizes(Context& cx, Value self) {
  if (self.rank() == 0) cx.fail("Dimension specified as 0 but tensor has no dimensions", ErrorKind::Index);
  if (self.rank() == 1)
    cx.fail("Dimension out of range (expected to be in range of [-1, 0], but got 1)", ErrorKind::Index);
}

// _pdist_forward(self [N, M], p) -> [N (N - 1) / 2]. CPU's kernel reads a
// rank > 2 self as numel / M contiguous rows of M and gives the first
// N (N - 1) / 2 pairs of them.
V pdist_forward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  pdist_sizes(cx, self);
  DType out = self.dtype(), t = hlo::opmath_type(out);
  int64_t n = self.dims()[0], m = self.dims()[1];
  int64_t len = n * (n - 1) / 2;
  if (len <= 0 || m == 0) return {b.full(0, {out, {std::max<int64_t>(len, 0)}})};
  if (out != DType::F32 && out != DType::F64) refuse_dtype(cx, out, "pdist");
  int64_t rows = self.type.numel() / m;
  if (self.rank() > 2) self = b.reshape(self, {rows, m});
  auto [is, js] = pdist_rows(b, rows, len);
  Value x = b.convert(self, t);
  Value xi = b.take_along(x, is, 0), xj = b.take_along(x, js, 0);
  return {b.convert(p_distance(b, b.sub(xi, xj), cx.as(1, t)), out)};
}

// _pdist_backward(grad, self, p, pdist) -> [N, M]: cdist's backward of self
// against itself with the condensed grad/dist spread over a symmetric
// matrix (0 on the diagonal). As CPU's kernel, a rank > 2 self gets the
// gradient of its first N M elements as [N, M] (the rest 0), and grad and
// pdist are read flat.
V pdist_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType out = self.dtype(), t = hlo::opmath_type(out);
  if (out != DType::F32 && out != DType::F64) refuse_dtype(cx, out, "pdist_backward");
  pdist_sizes(cx, self);
  int64_t n = self.dims()[0], m = self.dims()[1];
  int64_t len = n * (n - 1) / 2;
  if (n < 2 || m == 0 || self.type.numel() == 0 || cx.tensor(0).type.numel() == 0)
    return {b.full(0, {out, self.dims()})};
  for (size_t i : {0, 3})
    if (cx.tensor(i).dtype() != out)
      cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(out)) + " but found " +
              std::string(hlo::scalar_type_name(cx.tensor(i).dtype())));
  auto condensed = [&](size_t i) {
    Value v = cx.as(i, t);
    int64_t have = v.type.numel();
    if (have < len) cx.fail("_pdist_backward: grad and pdist need N (N - 1) / 2 elements");
    v = b.reshape(v, {have});
    return have == len ? v : b.slice(v, {0}, {len}, {1});
  };
  Value grad = condensed(0), pd = condensed(3);
  Dims full = self.dims();
  int64_t total = self.type.numel();
  if (self.rank() > 2) self = b.slice(b.reshape(self, {total}), {0}, {n * m}, {1});
  self = b.reshape(self, {n, m});
  Value pos = pair_position(b, n);
  Value safe = b.max(pos, b.full(0, pos.type));
  Value diag = b.compare(pos, b.full(-1, pos.type), "EQ");
  auto spread = [&](Value v) {
    Value sq = b.reshape(b.take_along(v, b.reshape(safe, {n * n}), 0), {n, n});
    return b.select(diag, b.full(0, sq.type), sq);
  };
  Value x = b.convert(self, t);
  Value g = spread(grad), dist = spread(pd);
  Value r = b.convert(cdist_grad(b, g, x, x, cx.as(2, t), dist), out);
  if (full.size() > 2) {
    r = b.reshape(r, {n * m});
    if (total > n * m) r = b.concatenate({r, b.full(0, {out, {total - n * m}})}, 0);
    r = b.reshape(r, full);
  }
  return {r};
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

std::vector<Entry> nn_lowerings() {
  return {
      {"aten::_softmax", softmax, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::_log_softmax", log_softmax, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::_softmax_backward_data", softmax_backward},
      {"aten::_log_softmax_backward_data", log_softmax_backward},
      {"aten::nll_loss_forward", nll_loss_forward},
      {"aten::nll_loss_backward", nll_loss_backward},
      {"aten::nll_loss2d_forward", nll_loss_forward},
      {"aten::nll_loss2d_backward", nll_loss_backward},
      {"aten::mse_loss", mse_loss},
      {"aten::mse_loss_backward", mse_loss_backward},
      {"aten::binary_cross_entropy", binary_cross_entropy},
      {"aten::binary_cross_entropy_backward", binary_cross_entropy_backward, Traits().set_out_fixed_shape()},
      {"aten::native_dropout_backward", native_dropout_backward, Traits().set_out_same_dtype()},
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
      {"aten::huber_loss", huber_loss},
      {"aten::huber_loss_backward", huber_loss_backward},
      {"aten::smooth_l1_loss", smooth_l1_loss},
      {"aten::smooth_l1_loss_backward", smooth_l1_loss_backward},
      {"aten::channel_shuffle", channel_shuffle, Traits().set_out_same_dtype()},
      {"aten::rrelu_with_noise", rrelu_with_noise},
      {"aten::rrelu_with_noise_backward", rrelu_with_noise_backward},
      {"aten::multi_margin_loss", multi_margin_loss},
      {"aten::_cdist_forward", cdist_forward},
      {"aten::_cdist_backward", cdist_backward},
      {"aten::_pdist_forward", pdist_forward},
      {"aten::_pdist_backward", pdist_backward},
      {"aten::multi_margin_loss_backward", multi_margin_loss_backward},
      {"aten::multilabel_margin_loss_forward", multilabel_margin_loss_forward},
      {"aten::multilabel_margin_loss_backward", multilabel_margin_loss_backward},
  };
}

}  // namespace torch_pjrt::lowering
