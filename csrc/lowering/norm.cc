// Batch norm (training and eval, with the running-statistics update) and
// group norm, with their backward passes. Statistics are computed in the
// compute dtype (float32 for float16/bfloat16) with two passes (mean, then
// the mean of squared deviations); the saved statistics have the input's
// dtype, or float32 when weight/bias/running stats have another dtype
// (mixed precision), as on CPU.
//
// native_batch_norm updates running_mean/running_var although its schema
// does not say so; the glue passes their new values back: a lowering
// returns its three results, then the new running_mean and running_var (each
// only when given). _native_batch_norm_legit (running stats marked written)
// and _native_batch_norm_legit_functional (which returns them) get the same
// five values.
#include <algorithm>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

Value sum(hlo::Builder& b, Value x, const Dims& dims) {
  return b.reduce(x, b.constant(0, x.dtype()), dims, "stablehlo.add");
}

// Per-channel [C] value broadcast against an [N, C, ...] shape.
Value channel(hlo::Builder& b, Value v, const Dims& full) { return b.broadcast_in_dim(v, full, {1}); }

// Every dim but the channel dim (1).
Dims non_channel_dims(int64_t rank) {
  Dims d{0};
  for (int64_t i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

// dtype of saved statistics: the input's, or its compute dtype when any of
// the given optional tensors has another dtype.
DType stat_type(Context& cx, DType in, std::initializer_list<size_t> others) {
  for (size_t i : others)
    if (!cx.none(i) && cx.tensor(i).dtype() != in) return hlo::opmath_type(in);
  return in;
}

// ---- batch norm

// (input, weight?, bias?, running_mean?, running_var?, training, momentum,
//  eps); `stats` is false for _native_batch_norm_legit.no_stats, whose
// arguments are (input, weight?, bias?, training, momentum, eps).
// `always_train` is for _batch_norm_with_update, whose arguments are
// (input, weight?, bias?, running_mean, running_var, momentum, eps).
V batch_norm_impl(Context& cx, bool stats, bool always_train = false) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  // CPU's errors for a rank 0 or 1 input (its reduction dims underflow, or
  // size(1) is out of range)
  if (in.rank() == 0)
    cx.fail(
        "SmallVector unable to grow. Requested capacity (18446744073709551615) is larger than maximum value for "
        "size type (4294967295)",
        ErrorKind::Value);
  if (in.rank() < 2)
    cx.fail("Dimension out of range (expected to be in range of [-1, 0], but got 1)", ErrorKind::Index);
  size_t rm_i = 3, rv_i = 4, train_i = stats ? 5 : 3;
  if (always_train) train_i = 4;
  size_t mom_i = train_i + 1, eps_i = train_i + 2;
  bool has_rm = stats && !cx.none(rm_i), has_rv = stats && !cx.none(rv_i);
  if (has_rm != has_rv)
    cx.fail("running_mean and running_var must either both be None or neither be None", ErrorKind::Value);
  bool train = always_train || cx.flag(train_i) || !has_rm || !has_rv;
  DType out = in.dtype(), t = hlo::opmath_type(float_type(out));
  DType st = stats ? stat_type(cx, out, {1, 2, rm_i, rv_i}) : stat_type(cx, out, {1, 2});
  const Dims& full = in.dims();
  int64_t c = full[1];
  Dims red = non_channel_dims(in.rank());
  Value x = b.convert(in, t), eps = cx.as(eps_i, t);

  Value mean, invstd, save_mean, save_invstd, new_rm, new_rv;
  if (train) {
    int64_t n = in.type.numel() / std::max<int64_t>(c, 1);
    mean = b.div(sum(b, x, red), b.constant(static_cast<double>(n), t));
    Value xc = b.sub(x, channel(b, mean, full));
    Value sq = sum(b, b.mul(xc, xc), red);
    invstd = b.rsqrt(b.add(b.div(sq, b.constant(static_cast<double>(n), t)), eps));
    save_mean = b.convert(mean, st);
    save_invstd = b.convert(invstd, st);
    // running = (1 - momentum) * running + momentum * batch (unbiased var)
    Value m = cx.as(mom_i, t), keep = b.sub(b.constant(1, t), m);
    if (has_rm) new_rm = b.convert(b.add(b.mul(keep, cx.as(rm_i, t)), b.mul(m, mean)), cx.tensor(rm_i).dtype());
    if (has_rv) {
      Value unbiased = b.div(sq, b.constant(static_cast<double>(n - 1), t));
      new_rv = b.convert(b.add(b.mul(keep, cx.as(rv_i, t)), b.mul(m, unbiased)), cx.tensor(rv_i).dtype());
    }
  } else {
    mean = cx.as(rm_i, t);
    invstd = b.rsqrt(b.add(cx.as(rv_i, t), eps));
    save_mean = b.full(0, {st, {0}});
    save_invstd = b.full(0, {st, {0}});
    new_rm = cx.tensor(rm_i);
    new_rv = cx.tensor(rv_i);
  }
  Value y = b.mul(b.sub(x, channel(b, mean, full)), channel(b, invstd, full));
  if (!cx.none(1)) y = b.mul(y, channel(b, cx.as(1, t), full));
  if (!cx.none(2)) y = b.add(y, channel(b, cx.as(2, t), full));
  V r{b.convert(y, out), save_mean, save_invstd};
  if (has_rm) r.push_back(new_rm);
  if (has_rv) r.push_back(new_rv);
  return r;
}
V batch_norm(Context& cx) { return batch_norm_impl(cx, true); }
V batch_norm_no_stats(Context& cx) { return batch_norm_impl(cx, false); }

// _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!,
//   momentum, eps) -> (out, save_mean, save_invstd, reserve), then the new
// running_mean and running_var. reserve is empty uint8, as on CPU.
V batch_norm_with_update(Context& cx) {
  V r = batch_norm_impl(cx, true, true);
  r.insert(r.begin() + 3, cx.b.full(0, {DType::U8, {0}}));
  return r;
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
//   running_var?, save_mean?, save_invstd?, train, eps, output_mask)
V batch_norm_backward(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(1);
  if (!hlo::is_floating(in.dtype())) refuse_dtype(cx, in.dtype(), "batch_norm_backward_cpu");
  if (in.rank() == 0) cx.fail("Dimension specified as 1 but tensor has no dimensions", ErrorKind::Index);
  if (in.rank() < 2)
    cx.fail("Dimension out of range (expected to be in range of [-1, 0], but got 1)", ErrorKind::Index);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  const Dims& full = in.dims();
  int64_t c = full[1];
  Dims red = non_channel_dims(in.rank());
  const auto& mask = cx.ints(9);
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  bool train = cx.flag(7);
  Value dy = cx.as(0, t), x = b.convert(in, t);
  Value mean, invstd;
  if (train) {
    if (cx.none(5) || cx.none(6)) cx.fail("training mode needs save_mean and save_invstd");
    mean = cx.as(5, t);
    invstd = cx.as(6, t);
  } else {
    if (cx.none(3) || cx.none(4)) cx.fail("eval mode needs running_mean and running_var");
    mean = cx.as(3, t);
    invstd = b.rsqrt(b.add(cx.as(4, t), cx.as(8, t)));
  }
  Value xhat = b.mul(b.sub(x, channel(b, mean, full)), channel(b, invstd, full));
  Value sum_dy = sum(b, dy, red), sum_dy_xhat = sum(b, b.mul(dy, xhat), red);
  DType wt = cx.none(2) ? in.dtype() : cx.tensor(2).dtype();
  Value gi;
  if (wanted(0)) {
    Value scale = invstd;  // weight * invstd per channel
    if (!cx.none(2)) scale = b.mul(scale, cx.as(2, t));
    if (train) {
      Value n = b.constant(static_cast<double>(in.type.numel() / std::max<int64_t>(c, 1)), t);
      Value centred =
          b.sub(b.sub(dy, channel(b, b.div(sum_dy, n), full)), b.mul(xhat, channel(b, b.div(sum_dy_xhat, n), full)));
      gi = b.mul(centred, channel(b, scale, full));
    } else {
      gi = b.mul(dy, channel(b, scale, full));
    }
    gi = b.convert(gi, in.dtype());
  } else {
    gi = b.full(0, in.type);
  }
  Value gw = wanted(1) ? b.convert(sum_dy_xhat, wt) : b.full(0, {wt, {c}});
  Value gb = wanted(2) ? b.convert(sum_dy, wt) : b.full(0, {wt, {c}});
  return {gi, gw, gb};
}

// ---- group norm

struct Groups {
  int64_t n, c, hw, g, d;  // d = c / g * hw elements per group
};

Groups groups(Context& cx, const Value& in, size_t first) {
  Groups gr{cx.integer(first), cx.integer(first + 1), cx.integer(first + 2), cx.integer(first + 3), 0};
  if (gr.g < 1 || gr.c % gr.g) cx.fail("channels must be divisible by groups");
  if (in.rank() < 2 || gr.n * gr.c * gr.hw != in.type.numel() || in.dims()[0] != gr.n || in.dims()[1] != gr.c)
    cx.fail("input does not match N, C, HxW");
  gr.d = gr.c / gr.g * gr.hw;
  return gr;
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//   -> (out, mean [N, group], rstd [N, group])
V group_norm(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  Groups gr = groups(cx, in, 3);
  DType out = in.dtype(), t = hlo::opmath_type(float_type(out)), st = stat_type(cx, out, {1, 2});
  Dims grouped{gr.n, gr.g, gr.d}, stats{gr.n, gr.g}, chans{gr.n, gr.c, gr.hw};
  Value x = b.reshape(b.convert(in, t), grouped);
  Value cnt = b.constant(static_cast<double>(gr.d), t);
  Value mean = b.div(sum(b, x, {2}), cnt);
  Value xc = b.sub(x, b.broadcast_in_dim(mean, grouped, {0, 1}));
  Value rstd = b.rsqrt(b.add(b.div(sum(b, b.mul(xc, xc), {2}), cnt), cx.as(7, t)));
  Value y = b.reshape(b.mul(xc, b.broadcast_in_dim(rstd, grouped, {0, 1})), chans);
  if (!cx.none(1)) y = b.mul(y, channel(b, cx.as(1, t), chans));
  if (!cx.none(2)) y = b.add(y, channel(b, cx.as(2, t), chans));
  return {b.convert(b.reshape(y, in.dims()), out), b.convert(mean, st), b.convert(rstd, st)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
//   HxW, group, output_mask) -> (grad_input, grad_weight, grad_bias)
V group_norm_backward(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(1);
  Groups gr = groups(cx, in, 5);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  const auto& mask = cx.ints(9);
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  Dims grouped{gr.n, gr.g, gr.d}, chans{gr.n, gr.c, gr.hw};
  Value dy = b.reshape(cx.as(0, t), chans), x = b.reshape(b.convert(in, t), grouped);
  Value mean = b.broadcast_in_dim(b.reshape(cx.as(2, t), {gr.n, gr.g}), grouped, {0, 1});
  Value rstd = b.broadcast_in_dim(b.reshape(cx.as(3, t), {gr.n, gr.g}), grouped, {0, 1});
  Value xhat = b.mul(b.sub(x, mean), rstd);
  Value xhat_c = b.reshape(xhat, chans);
  DType wt = cx.none(4) ? in.dtype() : cx.tensor(4).dtype();
  Value gi;
  if (wanted(0)) {
    Value g = cx.none(4) ? dy : b.mul(dy, channel(b, cx.as(4, t), chans));
    g = b.reshape(g, grouped);
    Value cnt = b.constant(static_cast<double>(gr.d), t);
    Value a = b.broadcast_in_dim(b.div(sum(b, g, {2}), cnt), grouped, {0, 1});
    Value c = b.broadcast_in_dim(b.div(sum(b, b.mul(g, xhat), {2}), cnt), grouped, {0, 1});
    gi = b.mul(rstd, b.sub(b.sub(g, a), b.mul(xhat, c)));
    gi = b.convert(b.reshape(gi, in.dims()), in.dtype());
  } else {
    gi = b.full(0, in.type);
  }
  Value gw = wanted(1) ? b.convert(sum(b, b.mul(dy, xhat_c), {0, 2}), wt) : b.full(0, {wt, {gr.c}});
  Value gb = wanted(2) ? b.convert(sum(b, dy, {0, 2}), wt) : b.full(0, {wt, {gr.c}});
  return {gi, gw, gb};
}

}  // namespace

std::vector<Entry> norm_lowerings() {
  return {
      {"aten::native_batch_norm", batch_norm, Traits().writes({3, 4})},
      {"aten::_native_batch_norm_legit", batch_norm},
      {"aten::_native_batch_norm_legit.no_stats", batch_norm_no_stats},
      {"aten::_native_batch_norm_legit_functional", batch_norm},
      {"aten::native_batch_norm_backward", batch_norm_backward},
      {"aten::_batch_norm_with_update", batch_norm_with_update},
      // (grad_out, input, weight, running_mean?, running_var?, save_mean?,
      //  save_var?, update, eps, output_mask, reserve): update means training
      {"aten::batch_norm_backward", batch_norm_backward},
      {"aten::native_group_norm", group_norm},
      {"aten::native_group_norm_backward", group_norm_backward},
  };
}

}  // namespace torch_pjrt::lowering
