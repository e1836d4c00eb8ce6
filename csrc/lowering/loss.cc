// Losses: nll_loss (and nll_loss2d), mse, binary cross entropy, huber,
// smooth L1, multi-margin and multilabel-margin, with their backward passes.
// Float16/bfloat16 compute in float32 (hlo::opmath_type) and round once at
// the end, as PyTorch does.
#include <algorithm>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// ---- helpers

Value sum_all(hlo::Builder& b, Value x) { return sum_over(b, x, iota_dims(x.rank())); }

// Elementwise loss reduced as PyTorch's `reduction` argument says (none, mean
// over all elements, or sum), in the compute dtype.
Value reduce_loss(hlo::Builder& b, Value loss, int64_t reduction) {
  if (reduction == kNone) return loss;
  Value s = sum_all(b, loss);
  if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(loss.type.numel()), s.dtype()));
  return s;
}

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
  Dims full = infer_size(cx, out, other);
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

// A margin loss's per-sample `loss` ([N]) as `reduction` says: shaped for
// none, else reduced; in the output dtype.
Value margin_loss_value(Context& cx, Value loss, int64_t reduction, bool per_class_target, DType out) {
  auto& b = cx.b;
  if (reduction == kNone)  // self and target are arguments 0 and 1
    return b.convert(b.reshape(loss, margin_none_dims(cx.tensor(0), cx.tensor(1), per_class_target)), out);
  return b.convert(reduce_loss(b, loss, reduction), out);
}

// The scale of a margin loss's gradient: 1 / C, and 1 / N more for mean.
double margin_grad_scale(const MarginRows& r, int64_t reduction) {
  return reduction == kMean ? 1.0 / static_cast<double>(r.n * r.c) : 1.0 / static_cast<double>(r.c);
}

// A margin loss's [N, C] `grad` times grad_output (argument 0: one per
// sample for reduction=none, else one), shaped and typed like self
// (argument 1).
Value margin_grad_out(Context& cx, const MarginRows& r, Value grad, int64_t reduction, DType out, DType t) {
  auto& b = cx.b;
  Value go = cx.as(0, t);
  if (reduction == kNone && go.rank() > 0) {
    grad = b.mul(grad, b.broadcast_in_dim(b.reshape(go, {r.n}), {r.n, r.c}, {0}));
  } else {
    grad = b.mul(grad, b.reshape(go, {}));
  }
  return b.convert(b.reshape(grad, cx.tensor(1).dims()), out);
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
  return {margin_loss_value(cx, loss, cx.integer(5), false, out)};
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
  double g = margin_grad_scale(r, reduction);
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
  return {margin_grad_out(cx, r, grad, reduction, out, t)};
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
  return {margin_loss_value(cx, loss, cx.integer(2), true, out), is_target};
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
  double g = margin_grad_scale(r, reduction);
  Value act = b.convert(m.active, t);
  Value plus = sum_over(b, act, {1});                                    // [N, C]: active pairs with this c
  Value per_j = b.broadcast_in_dim(sum_over(b, act, {2}), njc, {0, 1});  // [N, J]: active pairs of target j
  Value minus = sum_over(b, b.select(m.onehot, per_j, b.constant(0, t)), {1});
  Value grad = b.mul(b.sub(plus, minus), b.constant(g, t));
  return {margin_grad_out(cx, r, grad, reduction, out, t)};
}

}  // namespace

std::vector<Entry> loss_lowerings() {
  return {
      {"aten::nll_loss_forward", nll_loss_forward},
      {"aten::nll_loss_backward", nll_loss_backward},
      {"aten::nll_loss2d_forward", nll_loss_forward},
      {"aten::nll_loss2d_backward", nll_loss_backward},
      {"aten::mse_loss", mse_loss},
      {"aten::mse_loss_backward", mse_loss_backward},
      {"aten::binary_cross_entropy", binary_cross_entropy},
      {"aten::binary_cross_entropy_backward", binary_cross_entropy_backward, Traits().set_out_fixed_shape()},
      {"aten::huber_loss", huber_loss},
      {"aten::huber_loss_backward", huber_loss_backward},
      {"aten::smooth_l1_loss", smooth_l1_loss},
      {"aten::smooth_l1_loss_backward", smooth_l1_loss_backward},
      {"aten::multi_margin_loss", multi_margin_loss},
      {"aten::multi_margin_loss_backward", multi_margin_loss_backward},
      {"aten::multilabel_margin_loss_forward", multilabel_margin_loss_forward},
      {"aten::multilabel_margin_loss_backward", multilabel_margin_loss_backward},
  };
}

}  // namespace torch_pjrt::lowering
