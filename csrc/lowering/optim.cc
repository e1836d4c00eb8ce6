// Fused optimizer steps: _fused_adam, _fused_adamw and _fused_sgd.
//
// The functional forms return, flattened, one Value per tensor of each list
// the in-place forms write (params, grads, then the optimizer state), so the
// glue can write them back. The math follows PyTorch's fused CPU kernels:
// per-step coefficients (bias corrections, step size, 1 - lr * wd) in
// double, everything per element in the parameter's opmath type, each
// double coefficient rounded to that type once.
#include <optional>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// A float argument, or a one-element tensor (a tensor lr), as a rank-0 f64.
Value scalar_f64(Context& cx, size_t i) { return cx.b.reshape(cx.as(i, DType::F64), {}); }

// What the kernels share: the optional grad_scale (read as a float) and the
// found_inf skip flag (the kernels do nothing when it is exactly 1.0).
struct Scaling {
  std::optional<Value> scale;  // rank-0 f32
  std::optional<Value> skip;   // rank-0 i1
};
// A grad_scale / found_inf tensor's first element, as CPU's kernels read it
// (through a float pointer: other dtypes are refused).
Value first_f32(Context& cx, size_t i) {
  auto& b = cx.b;
  Value t = cx.tensor(i);
  if (t.dtype() != DType::F32)
    cx.fail("expected scalar type Float but found " + std::string(hlo::scalar_type_name(t.dtype())));
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  if (n == 0) cx.fail("expected a non-empty tensor for grad_scale and found_inf");
  Value flat = b.reshape(t, {n});
  return b.reshape(b.slice(flat, {0}, {1}, {1}), {});
}

Scaling scaling(Context& cx, size_t grad_scale, size_t found_inf) {
  Scaling s;
  if (!cx.none(grad_scale)) s.scale = first_f32(cx, grad_scale);
  if (!cx.none(found_inf)) {
    Value f = first_f32(cx, found_inf);
    s.skip = cx.b.compare(f, cx.b.constant(1, DType::F32), "EQ");
  }
  return s;
}

// `updated` converted back to `old`'s dtype, or `old` itself when found_inf
// says to skip the step.
Value finish(Context& cx, const Scaling& s, Value updated, Value old) {
  updated = cx.b.convert(updated, old.dtype());
  return s.skip ? cx.b.select(*s.skip, old, updated) : updated;
}

// A gradient as the kernels use it, in the parameter's opmath type t: divided
// by grad_scale when there is one (and then written back to `grads`
// unscaled: `out`), negated when maximizing.
struct Grad {
  Value g;    // in t
  Value out;  // the new value of the grads entry, in its own dtype
};
Grad read_grad(Context& cx, const Scaling& s, const Value& grad, DType t, bool maximize) {
  auto& b = cx.b;
  Grad r{b.convert(grad, t), grad};
  if (s.scale) {
    r.g = b.div(r.g, b.convert(*s.scale, t));
    r.out = b.convert(r.g, grad.dtype());
  }
  if (maximize) r.g = b.neg(r.g);
  return r;
}

// CPU's per-parameter AT_DISPATCH over the floating dtypes.
void refuse_non_float(Context& cx, const std::vector<Value>& params, const char* kernel) {
  for (const Value& p : params)
    if (!hlo::is_floating(p.dtype()))
      cx.fail(
          "\"" + std::string(kernel) + "\" not implemented for '" + std::string(hlo::scalar_type_name(p.dtype())) + "'",
          ErrorKind::NotImplemented);
}

void check_len(Context& cx, const std::vector<Value>& list, size_t n, const char* name) {
  if (list.size() != n)
    cx.fail(std::string(name) + " has " + std::to_string(list.size()) + " tensors, expected " + std::to_string(n));
}

// _fused_adam(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
//             weight_decay, eps, amsgrad, maximize, grad_scale, found_inf)
V adam(Context& cx, bool decoupled) {
  auto& b = cx.b;
  const V& params = cx.tensors(0);
  const V& grads = cx.tensors(1);
  const V& exp_avgs = cx.tensors(2);
  const V& exp_avg_sqs = cx.tensors(3);
  const V& max_exp_avg_sqs = cx.tensors(4);
  const V& steps = cx.tensors(5);
  const size_t n = params.size();
  const bool amsgrad = cx.flag(11), maximize = cx.flag(12);
  check_len(cx, grads, n, "grads");
  check_len(cx, exp_avgs, n, "exp_avgs");
  check_len(cx, exp_avg_sqs, n, "exp_avg_sqs");
  check_len(cx, max_exp_avg_sqs, amsgrad ? n : 0, "max_exp_avg_sqs");
  check_len(cx, steps, n, "state_steps");

  Value lr = scalar_f64(cx, 6), beta1 = scalar_f64(cx, 7), beta2 = scalar_f64(cx, 8);
  Value wd = scalar_f64(cx, 9), eps = scalar_f64(cx, 10);
  Scaling s = scaling(cx, 13, 14);
  refuse_non_float(cx, params, "fused_adam_kernel");
  Value one = b.constant(1, DType::F64);
  Value grad_coeff = b.sub(one, beta1);     // exp_avg.lerp_(grad, 1 - beta1)
  Value sq_grad_coeff = b.sub(one, beta2);  // exp_avg_sq * beta2 + (1 - beta2) * grad^2
  Value decay = b.sub(one, b.mul(lr, wd));  // AdamW: param *= 1 - lr * wd
  Value has_wd = b.compare(wd, b.constant(0, DType::F64), "NE");

  V new_params, new_grads, new_avgs, new_sqs, new_maxs;
  for (size_t i = 0; i < n; ++i) {
    const DType t = hlo::opmath_type(params[i].dtype());
    auto k = [&](Value v) { return b.convert(v, t); };  // a double coefficient in opmath
    // The step, read as a float and widened to double as the kernel does.
    Value step = b.convert(b.reshape(b.convert(steps[i], DType::F32), {}), DType::F64);
    Value bias1 = b.sub(one, b.binary("stablehlo.power", beta1, step));
    Value bias2 = b.sub(one, b.binary("stablehlo.power", beta2, step));
    Value step_size = b.div(lr, bias1);
    Value bias2_sqrt = b.sqrt(bias2);

    Value p = k(params[i]);
    auto [g, g_out] = read_grad(cx, s, grads[i], t, maximize);
    if (decoupled)
      p = b.select(has_wd, b.mul(p, k(decay)), p);
    else
      g = b.select(has_wd, b.add(g, b.mul(p, k(wd))), g);

    // lerp with weight w, in the form whose rounding PyTorch picks by |w|.
    Value m = k(exp_avgs[i]);
    Value w = k(grad_coeff);
    Value diff = b.sub(g, m);
    Value small = b.compare(b.abs(w), b.constant(0.5, t), "LT");
    m = b.select(small, b.add(m, b.mul(w, diff)), b.sub(g, b.mul(diff, b.sub(b.constant(1, t), w))));

    Value v = b.add(b.mul(k(exp_avg_sqs[i]), k(beta2)), b.mul(b.mul(k(sq_grad_coeff), g), g));
    Value v_denom = v;
    if (amsgrad) {
      v_denom = b.max(k(max_exp_avg_sqs[i]), v);
      new_maxs.push_back(finish(cx, s, v_denom, max_exp_avg_sqs[i]));
    }
    Value denom = b.add(b.div(b.sqrt(v_denom), k(bias2_sqrt)), k(eps));
    p = b.sub(p, b.div(b.mul(k(step_size), m), denom));

    new_params.push_back(finish(cx, s, p, params[i]));
    new_grads.push_back(finish(cx, s, g_out, grads[i]));
    new_avgs.push_back(finish(cx, s, m, exp_avgs[i]));
    new_sqs.push_back(finish(cx, s, v, exp_avg_sqs[i]));
  }
  V out = new_params;
  for (const V* part : {&new_grads, &new_avgs, &new_sqs, &new_maxs}) out.insert(out.end(), part->begin(), part->end());
  return out;
}
V fused_adam(Context& cx) { return adam(cx, false); }
V fused_adamw(Context& cx) { return adam(cx, true); }

// _fused_sgd(self, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov,
//            maximize, is_first_step, grad_scale, found_inf)
// The momentum buffer list is empty exactly when momentum is 0.
V fused_sgd(Context& cx) {
  auto& b = cx.b;
  const V& params = cx.tensors(0);
  const V& grads = cx.tensors(1);
  const V& bufs = cx.tensors(2);
  const size_t n = params.size();
  const bool has_momentum = !bufs.empty();
  const bool nesterov = cx.flag(7), maximize = cx.flag(8), first_step = cx.flag(9);
  check_len(cx, grads, n, "grads");
  if (has_momentum) check_len(cx, bufs, n, "momentum_buffer_list");

  Value wd = scalar_f64(cx, 3), momentum = scalar_f64(cx, 4), lr = scalar_f64(cx, 5);
  Value dampening = scalar_f64(cx, 6);
  Scaling s = scaling(cx, 10, 11);
  refuse_non_float(cx, params, "fused_sgd_kernel");
  Value undamped = b.sub(b.constant(1, DType::F64), dampening);
  Value has_wd = b.compare(wd, b.constant(0, DType::F64), "NE");

  V new_params, new_grads, new_bufs;
  for (size_t i = 0; i < n; ++i) {
    const DType t = hlo::opmath_type(params[i].dtype());
    auto k = [&](Value v) { return b.convert(v, t); };
    Value p = k(params[i]);
    auto [g, g_out] = read_grad(cx, s, grads[i], t, maximize);
    g = b.select(has_wd, b.add(g, b.mul(p, k(wd))), g);
    if (has_momentum) {
      Value buf = first_step ? g : b.add(b.mul(k(bufs[i]), k(momentum)), b.mul(g, k(undamped)));
      g = nesterov ? b.add(g, b.mul(buf, k(momentum))) : buf;
      new_bufs.push_back(finish(cx, s, buf, bufs[i]));
    }
    p = b.sub(p, b.mul(g, k(lr)));
    new_params.push_back(finish(cx, s, p, params[i]));
    new_grads.push_back(finish(cx, s, g_out, grads[i]));
  }
  V out = new_params;
  out.insert(out.end(), new_grads.begin(), new_grads.end());
  out.insert(out.end(), new_bufs.begin(), new_bufs.end());
  return out;
}

}  // namespace

std::vector<Entry> optim_lowerings() {
  return {
      {"aten::_fused_adam", fused_adam},   {"aten::_fused_adam.tensor_lr", fused_adam},
      {"aten::_fused_adamw", fused_adamw}, {"aten::_fused_adamw.tensor_lr", fused_adamw},
      {"aten::_fused_sgd", fused_sgd},     {"aten::_fused_sgd.tensor_lr", fused_sgd},
  };
}

}  // namespace torch_pjrt::lowering
