// Layer norm, batch norm (training and eval, with the running-statistics
// update) and group norm, with their backward passes. Each checks its
// arguments as its CPU kernel does, in the kernel's order, since the order
// decides which error a bad call raises. Statistics are computed in the
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

// Per-channel [C] value broadcast against an [N, C, ...] shape.
Value channel(hlo::Builder& b, Value v, const Dims& full) { return b.broadcast_in_dim(v, full, {1}); }

// Every dim but the channel dim (1).
Dims non_channel_dims(int64_t rank) {
  Dims d{0};
  for (int64_t i = 2; i < rank; ++i) d.push_back(i);
  return d;
}

// CPU's mixed-precision rule for norm parameters (is_mixed_type and
// check_mixed_data_type): when the first given parameter of `params` has
// another dtype than the input, every given parameter must be float32 and the
// input float16 or bfloat16. Otherwise the kernel reads every parameter as the
// input's dtype ("expected scalar type Half but found Float"); `check_same`
// false leaves that second check to the caller, which makes it later.
// Returns whether the call is mixed (its statistics are then float32).
bool mixed_params(Context& cx, DType in, std::initializer_list<size_t> params) {
  DType first = in;
  for (size_t i : params)
    if (!cx.none(i)) {
      first = cx.tensor(i).dtype();
      break;
    }
  if (first == in) return false;
  for (size_t i : params)
    if (!cx.none(i) && cx.tensor(i).dtype() != DType::F32)
      cx.fail("mixed dtype (CPU): expect parameter to have scalar type of Float");
  if (in != DType::F16 && in != DType::BF16) cx.fail("mixed dtype (CPU): all inputs must share same datatype.");
  return true;
}
// The kernel's data_ptr<scalar_t>() on each given parameter: its dtype must
// be `want`.
void param_dtypes(Context& cx, DType want, std::initializer_list<size_t> params) {
  for (size_t i : params)
    if (!cx.none(i) && cx.tensor(i).dtype() != want)
      cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(want)) + " but found " +
              std::string(hlo::scalar_type_name(cx.tensor(i).dtype())));
}
// A per-channel parameter as a [c] vector: CPU reads the first c elements
// of its buffer whatever its shape (a [1, c] or [c + 1] weight passes);
// fewer than c make it read out of bounds, which this refuses.
Value per_channel(Context& cx, size_t i, int64_t c, DType t) {
  Value v = cx.as(i, t);
  int64_t n = v.type.numel();
  if (n < c)
    cx.fail(std::string(i == 1   ? "weight"
                        : i == 2 ? "bias"
                                 : "running stats") +
            " should contain " + std::to_string(c) + " elements not " + std::to_string(n));
  if (v.rank() != 1) v = cx.b.reshape(v, {n});
  return n == c ? v : cx.b.slice(v, {0}, {c}, {1});
}
// A running statistic after CPU's update of its first c elements to `fresh`
// (the rest of a longer buffer is left as it was).
Value updated_stat(Context& cx, size_t i, int64_t c, Value fresh) {
  const Value& old = cx.tensor(i);
  fresh = cx.b.convert(fresh, old.dtype());
  if (old.type.numel() == c) return fresh;
  return cx.b.concatenate({fresh, cx.b.slice(old, {c}, {old.type.numel()}, {1})}, 0);
}

// ---- layer norm

// CPU's _check_layer_norm_inputs: a non-empty normalized_shape, weight and
// bias of exactly that shape, an input shaped [*, normalized_shape]. Returns
// the normalised (trailing) dims of the input.
Dims layer_norm_dims(Context& cx, const Value& input, const std::vector<int64_t>& normalized_shape, size_t weight,
                     size_t bias) {
  Dims ns(normalized_shape.begin(), normalized_shape.end());
  int64_t k = static_cast<int64_t>(ns.size());
  if (k == 0)
    cx.fail(
        "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got "
        "normalized_shape = []");
  for (size_t i : {weight, bias})
    if (!cx.none(i) && cx.tensor(i).dims() != ns)
      cx.fail(std::string("Expected ") + (i == weight ? "weight" : "bias") +
              " to be of same shape as normalized_shape, but got " + (i == weight ? "weight" : "bias") + " of shape " +
              dims_str(cx.tensor(i).dims()) + " and normalized_shape = " + dims_str(ns));
  int64_t axis = input.rank() - k;
  if (axis < 0 || !std::equal(ns.begin(), ns.end(), input.dims().begin() + axis)) {
    std::string star = dims_str(ns);
    cx.fail("Given normalized_shape=" + dims_str(ns) + ", expected input with shape [*, " +
            star.substr(1, star.size() - 2) + "], but got input of size" + dims_str(input.dims()));
  }
  Dims red;
  for (int64_t i = axis; i < input.rank(); ++i) red.push_back(i);
  return red;
}

// Shape of mean/rstd: the input's dims with the normalised ones set to 1.
Dims stat_dims(const Value& input, const Dims& red) {
  Dims d = input.dims();
  for (int64_t i : red) d[i] = 1;
  return d;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out,
// mean, rstd). CPU checks the mixed-type rule, the shapes, the dtype
// dispatch, then the parameters' dtype.
V native_layer_norm(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  bool mixed = mixed_params(cx, in.dtype(), {2, 3});
  Dims red = layer_norm_dims(cx, in, cx.ints(1), 2, 3);
  for (int64_t d : red)  // shape buckets: only the rows may be bucketed
    if (in.type.is_dynamic(d)) cx.fail("native_layer_norm: a normalized dim is shape-bucketed");
  floating_kernel(cx, in.dtype(), "LayerNormKernelImpl");
  if (!mixed) param_dtypes(cx, in.dtype(), {2, 3});
  DType out = in.dtype(), t = hlo::opmath_type(out);
  Value x = b.convert(in, t);
  Value n = b.constant(static_cast<double>(numel(cx.ints(1))), t);
  Value mean = b.div(sum_over(b, x, red), n);
  Value xc = b.sub(x, unreduce(b, mean, x.dims(), red));
  Value var = b.div(sum_over(b, b.mul(xc, xc), red), n);
  Value rstd = b.rsqrt(b.add(var, cx.as(4, t)));
  if (numel(cx.ints(1)) == 0) {  // CPU: mean 0 and rstd NaN over no elements
    mean = b.full(0, mean.type);
    rstd = b.full(NAN, rstd.type);
  }
  Value y = b.mul(xc, unreduce(b, rstd, x.dims(), red));
  if (!cx.none(2)) y = b.mul(y, cx.as(2, t));
  if (!cx.none(3)) y = b.add(y, cx.as(3, t));
  DType st = mixed ? DType::F32 : out;
  Dims sd = stat_dims(in, red);
  return {b.convert(y, out), b.convert(b.reshape(mean, sd), st), b.convert(b.reshape(rstd, sd), st)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
//   weight?, bias?, output_mask) -> (grad_input, grad_weight, grad_bias).
// CPU checks the shapes, then sizes grad_weight (grad_bias) like weight
// (bias), which must then be given, then dispatches on the dtype.
V native_layer_norm_backward(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(1);
  const auto& shape = cx.ints(2);
  Dims red = layer_norm_dims(cx, in, shape, 5, 6);
  const auto& mask = cx.ints(7);
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  if ((wanted(1) && cx.none(5)) || (wanted(2) && cx.none(6))) cx.fail("tensor does not have a device");
  floating_kernel(cx, in.dtype(), "LayerNormBackwardKernelImpl");
  DType t = hlo::opmath_type(in.dtype());
  Dims batch = kept_dims(in.rank(), red);
  Dims sd = stat_dims(in, red);
  Value dy = cx.as(0, t), x = b.convert(in, t);
  // CPU reads the first M (rows) elements of mean and rstd whatever their shape
  auto rows = [&](size_t i) {
    Value v = cx.as(i, t);
    int64_t m = numel(sd), have = v.type.numel();
    if (have < m)
      cx.fail(std::string(i == 3 ? "mean" : "rstd") + " should contain " + std::to_string(m) + " elements not " +
              std::to_string(have));
    v = b.reshape(v, {have});
    if (have > m) v = b.slice(v, {0}, {m}, {1});
    return b.reshape(v, sd);
  };
  Value mean = rows(3), rstd = rows(4);
  Value xhat = b.mul(b.sub(x, mean), rstd);

  DType wt = cx.none(5) ? in.dtype() : cx.tensor(5).dtype();
  DType bt = cx.none(6) ? wt : cx.tensor(6).dtype();
  TensorType param{t, Dims(shape.begin(), shape.end())};
  Value gi, gw, gb;
  if (wanted(0)) {
    Value g = cx.none(5) ? dy : b.mul(dy, cx.as(5, t));
    Value n = b.constant(static_cast<double>(numel(Dims(shape.begin(), shape.end()))), t);
    Value a = unreduce(b, b.div(sum_over(b, g, red), n), x.dims(), red);
    Value c = unreduce(b, b.div(sum_over(b, b.mul(g, xhat), red), n), x.dims(), red);
    gi = b.mul(rstd, b.sub(b.sub(g, a), b.mul(xhat, c)));
  } else {
    gi = b.full(0, x.type);
  }
  gw = wanted(1) ? sum_over(b, b.mul(dy, xhat), batch) : b.full(0, param);
  gb = wanted(2) ? sum_over(b, dy, batch) : b.full(0, param);
  return {b.convert(gi, in.dtype()), b.convert(gw, wt), b.convert(gb, bt)};
}

// ---- batch norm

// Where a batch norm schema keeps its arguments.
enum class BnKind {
  Native,      // (input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
  Legit,       // the same, with running_mean and running_var required
  NoStats,     // (input, weight?, bias?, training, momentum, eps)
  NoTraining,  // (input, weight?, bias?, running_mean, running_var, momentum, eps): eval
  WithUpdate,  // (input, weight?, bias?, running_mean, running_var, momentum, eps): train
};

// CPU's batch_norm_cpu checks, in its order: the reduction dims (rank 0
// underflows them), size(1) when training, the running stats pairing, the
// dtype dispatch, the mixed-type rule, size(1) in eval, the empty input when
// training (eval returns for an empty input), then the running stats'
// accessors.
void check_batch_norm(Context& cx, const Value& in, bool train, bool has_rm, bool has_rv, size_t rm_i, size_t rv_i) {
  if (in.rank() == 0)
    cx.fail(
        "SmallVector unable to grow. Requested capacity (18446744073709551615) is larger than maximum value for "
        "size type (4294967295)",
        ErrorKind::Value);
  if (train) size_at(cx, in, 1);
  if (has_rm != has_rv)
    cx.fail("running_mean and running_var must either both be None or neither be None", ErrorKind::Value);
  floating_kernel(cx, in.dtype(), "batch_norm");
  size_t rm = has_rm ? rm_i : 1, rv = has_rv ? rv_i : 1;  // absent stats: weight stands in (checked anyway)
  if (!mixed_params(cx, in.dtype(), {1, 2, rm, rv})) param_dtypes(cx, in.dtype(), {1, 2, rm, rv});
  if (!train && in.type.numel() == 0) return;  // eval of an empty input: CPU returns here
  if (!train) size_at(cx, in, 1);
  if (train && in.type.numel() == 0)
    cx.fail("input tensor must have at least one element, but got input_sizes = " + dims_str(in.dims()));
  for (size_t i : {rm, rv})
    if (i != 1 && cx.tensor(i).rank() != 1)
      cx.fail("TensorAccessor expected 1 dims but tensor has " + std::to_string(cx.tensor(i).rank()));
}

V batch_norm_impl(Context& cx, BnKind kind) {
  auto& b = cx.b;
  bool stats = kind != BnKind::NoStats;
  size_t rm_i = 3, rv_i = 4;
  if (kind == BnKind::Legit || kind == BnKind::NoTraining || kind == BnKind::WithUpdate)
    for (size_t i : {rm_i, rv_i})  // non-optional Tensor arguments given None
      if (cx.none(i))
        cx.fail("Expected a proper Tensor but got None (or an undefined Tensor in C++) for argument #" +
                std::to_string(i) + (i == rm_i ? " 'running_mean'" : " 'running_var'"));
  Value in = cx.tensor(0);
  size_t train_i = stats ? 5 : 3;
  bool fixed = kind == BnKind::NoTraining || kind == BnKind::WithUpdate;
  size_t mom_i = fixed ? 5 : train_i + 1, eps_i = mom_i + 1;
  bool has_rm = stats && !cx.none(rm_i), has_rv = stats && !cx.none(rv_i);
  bool train = kind == BnKind::WithUpdate || (kind != BnKind::NoTraining && cx.flag(train_i));
  check_batch_norm(cx, in, train, has_rm, has_rv, rm_i, rv_i);
  // eval without running stats crashes CPU; it is given batch statistics here
  train = train || !has_rm;
  DType out = in.dtype(), t = hlo::opmath_type(out);
  DType st = mixed_params(cx, out, {1, 2, has_rm ? rm_i : 1, has_rv ? rv_i : 1}) ? DType::F32 : out;
  if (!train && in.type.numel() == 0) {
    V r{in, b.full(0, {st, {0}}), b.full(0, {st, {0}})};
    if (kind != BnKind::NoTraining) r.insert(r.end(), {cx.tensor(rm_i), cx.tensor(rv_i)});
    return r;
  }
  const Dims& full = in.dims();
  int64_t c = full[1];
  Dims red = non_channel_dims(in.rank());
  Value x = b.convert(in, t), eps = cx.as(eps_i, t);

  Value mean, invstd, save_mean, save_invstd, new_rm, new_rv;
  if (train) {
    int64_t n = in.type.numel() / std::max<int64_t>(c, 1);
    mean = b.div(sum_over(b, x, red), b.constant(static_cast<double>(n), t));
    Value xc = b.sub(x, channel(b, mean, full));
    Value sq = sum_over(b, b.mul(xc, xc), red);
    invstd = b.rsqrt(b.add(b.div(sq, b.constant(static_cast<double>(n), t)), eps));
    save_mean = b.convert(mean, st);
    save_invstd = b.convert(invstd, st);
    // running = (1 - momentum) * running + momentum * batch (unbiased var)
    Value m = cx.as(mom_i, t), keep = b.sub(b.constant(1, t), m);
    if (has_rm) {
      Value rm = per_channel(cx, rm_i, c, t);
      new_rm = updated_stat(cx, rm_i, c, b.add(b.mul(keep, rm), b.mul(m, mean)));
    }
    if (has_rv) {
      Value unbiased = b.div(sq, b.constant(static_cast<double>(n - 1), t));
      Value rv = per_channel(cx, rv_i, c, t);
      new_rv = updated_stat(cx, rv_i, c, b.add(b.mul(keep, rv), b.mul(m, unbiased)));
    }
  } else {
    mean = per_channel(cx, rm_i, c, t);
    invstd = b.rsqrt(b.add(per_channel(cx, rv_i, c, t), eps));
    save_mean = b.full(0, {st, {0}});
    save_invstd = b.full(0, {st, {0}});
    new_rm = cx.tensor(rm_i);
    new_rv = cx.tensor(rv_i);
  }
  Value y = b.mul(b.sub(x, channel(b, mean, full)), channel(b, invstd, full));
  if (!cx.none(1)) y = b.mul(y, channel(b, per_channel(cx, 1, c, t), full));
  if (!cx.none(2)) y = b.add(y, channel(b, per_channel(cx, 2, c, t), full));
  V r{b.convert(y, out), save_mean, save_invstd};
  if (kind == BnKind::NoTraining) return r;
  if (has_rm) r.push_back(new_rm);
  if (has_rv) r.push_back(new_rv);
  return r;
}
V batch_norm(Context& cx) { return batch_norm_impl(cx, BnKind::Native); }
V batch_norm_legit(Context& cx) { return batch_norm_impl(cx, BnKind::Legit); }
V batch_norm_no_stats(Context& cx) { return batch_norm_impl(cx, BnKind::NoStats); }
// _native_batch_norm_legit_no_training -> (out, save_mean, save_rstd), the
// two saved statistics empty ([0]) as on CPU.
V batch_norm_no_training(Context& cx) { return batch_norm_impl(cx, BnKind::NoTraining); }

// _batch_norm_with_update(input, weight?, bias?, running_mean!, running_var!,
//   momentum, eps) -> (out, save_mean, save_invstd, reserve), then the new
// running_mean and running_var. reserve is empty uint8, as on CPU.
V batch_norm_with_update(Context& cx) {
  V r = batch_norm_impl(cx, BnKind::WithUpdate);
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
  Value sum_dy = sum_over(b, dy, red), sum_dy_xhat = sum_over(b, b.mul(dy, xhat), red);
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

Groups groups(Context& cx, size_t first) {
  Groups gr{cx.integer(first), cx.integer(first + 1), cx.integer(first + 2), cx.integer(first + 3), 0};
  if (gr.g < 1 || gr.c % gr.g) cx.fail("channels must be divisible by groups");
  gr.d = gr.c / gr.g * gr.hw;
  return gr;
}
// ATen's "Expected <cond> to be true, but got false." of a bare TORCH_CHECK.
[[noreturn]] void failed_check(Context& cx, const std::string& cond) {
  cx.fail("Expected " + cond +
          " to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement "
          "request to PyTorch.)");
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//   -> (out, mean [N, group], rstd [N, group]). CPU's checks in its order:
// the group count, weight and bias [C] vectors, the mixed-type rule, the
// dtype dispatch, the element count, then the parameters' dtype. The input is
// read as a flat [N, C, HxW] buffer whatever its shape.
V group_norm(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  int64_t c = cx.integer(4), group = cx.integer(6);
  if (group <= 0) cx.fail("Expected num groups to be greater than 0, got " + std::to_string(group));
  if (c % group)
    cx.fail("Expected number of channels in input to be divisible by num_groups, but got input of shape " +
            dims_str(in.dims()) + " and num_groups=" + std::to_string(group));
  // (CPU prints the weight's shape in the bias message too; [0] when absent.)
  std::string w_shape = cx.none(1) ? "[0]" : dims_str(cx.tensor(1).dims());
  for (size_t i : {1, 2})
    if (!cx.none(i) && (cx.tensor(i).rank() != 1 || cx.tensor(i).type.numel() != c))
      cx.fail(std::string("Expected ") + (i == 1 ? "weight" : "bias") +
              " to be a vector of size equal to the number of channels in input, but got " +
              (i == 1 ? "weight" : "bias") + " of shape " + w_shape + " and input of shape " + dims_str(in.dims()));
  bool mixed = mixed_params(cx, in.dtype(), {1, 2});
  floating_kernel(cx, in.dtype(), "GroupNormKernelImpl");
  Groups gr = groups(cx, 3);
  if (in.type.numel() != gr.n * gr.c * gr.hw) failed_check(cx, "X.numel() == N * C * HxW");
  if (!mixed) param_dtypes(cx, in.dtype(), {1, 2});
  DType out = in.dtype(), t = hlo::opmath_type(out), st = mixed ? DType::F32 : out;
  Dims grouped{gr.n, gr.g, gr.d}, stats{gr.n, gr.g}, chans{gr.n, gr.c, gr.hw};
  Value x = b.reshape(b.convert(in, t), grouped);
  Value cnt = b.constant(static_cast<double>(gr.d), t);
  Value mean = b.div(sum_over(b, x, {2}), cnt);
  Value xc = b.sub(x, b.broadcast_in_dim(mean, grouped, {0, 1}));
  Value rstd = b.rsqrt(b.add(b.div(sum_over(b, b.mul(xc, xc), {2}), cnt), cx.as(7, t)));
  Value y = b.reshape(b.mul(xc, b.broadcast_in_dim(rstd, grouped, {0, 1})), chans);
  if (!cx.none(1)) y = b.mul(y, channel(b, cx.as(1, t), chans));
  if (!cx.none(2)) y = b.add(y, channel(b, cx.as(2, t), chans));
  return {b.convert(b.reshape(y, in.dims()), out), b.convert(mean, st), b.convert(rstd, st)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
//   HxW, group, output_mask) -> (grad_input, grad_weight, grad_bias). CPU's
// checks in its order: the mixed-type rule over (input, mean, rstd), the
// weight grads' need of a weight, grad_out's dtype, the dtype dispatch, the
// element counts, then the weight's dtype.
V group_norm_backward(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(1);
  const auto& mask = cx.ints(9);
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  bool mixed = mixed_params(cx, in.dtype(), {2, 3});
  // CPU sizes grad_weight and grad_bias like weight: empty_like of none
  if (cx.none(4) && (wanted(1) || wanted(2))) cx.fail("tensor does not have a device");
  if (cx.tensor(0).dtype() != in.dtype()) cx.fail("Expected scalar types of X and dY are same.");
  floating_kernel(cx, in.dtype(), "GroupNormBackwardKernelImpl");
  int64_t n = cx.integer(5), c = cx.integer(6), hw = cx.integer(7), group = cx.integer(8);
  if (cx.tensor(0).type.numel() != n * c * hw) failed_check(cx, "dY.numel() == N * C * HxW");
  if (in.type.numel() != n * c * hw) failed_check(cx, "X.numel() == N * C * HxW");
  if (cx.tensor(2).type.numel() != n * group) failed_check(cx, "mean.numel() == N * group");
  if (cx.tensor(3).type.numel() != n * group) failed_check(cx, "rstd.numel() == N * group");
  if (!cx.none(4) && cx.tensor(4).type.numel() != c) failed_check(cx, "!gamma.defined() || gamma.numel() == C");
  if (mixed)
    param_dtypes(cx, DType::F32, {4});
  else
    param_dtypes(cx, in.dtype(), {2, 3, 4});
  Groups gr = groups(cx, 5);
  DType t = hlo::opmath_type(in.dtype());
  Dims grouped{gr.n, gr.g, gr.d}, chans{gr.n, gr.c, gr.hw};
  Value dy = b.reshape(cx.as(0, t), chans), x = b.reshape(b.convert(in, t), grouped);
  Value mean = b.broadcast_in_dim(b.reshape(cx.as(2, t), {gr.n, gr.g}), grouped, {0, 1});
  Value rstd = b.broadcast_in_dim(b.reshape(cx.as(3, t), {gr.n, gr.g}), grouped, {0, 1});
  Value xhat = b.mul(b.sub(x, mean), rstd);
  Value xhat_c = b.reshape(xhat, chans);
  DType wt = cx.none(4) ? in.dtype() : cx.tensor(4).dtype();
  Value gamma = cx.none(4) ? Value{} : b.reshape(cx.as(4, t), {gr.c});
  Value gi;
  if (wanted(0)) {
    Value g = cx.none(4) ? dy : b.mul(dy, channel(b, gamma, chans));
    g = b.reshape(g, grouped);
    Value cnt = b.constant(static_cast<double>(gr.d), t);
    Value a = b.broadcast_in_dim(b.div(sum_over(b, g, {2}), cnt), grouped, {0, 1});
    Value c2 = b.broadcast_in_dim(b.div(sum_over(b, b.mul(g, xhat), {2}), cnt), grouped, {0, 1});
    gi = b.mul(rstd, b.sub(b.sub(g, a), b.mul(xhat, c2)));
    gi = b.convert(b.reshape(gi, in.dims()), in.dtype());
  } else {
    gi = b.full(0, in.type);
  }
  Value gw = wanted(1) ? b.convert(sum_over(b, b.mul(dy, xhat_c), {0, 2}), wt) : b.full(0, {wt, {gr.c}});
  Value gb = wanted(2) ? b.convert(sum_over(b, dy, {0, 2}), wt) : b.full(0, {wt, {gr.c}});
  return {gi, gw, gb};
}

}  // namespace

std::vector<Entry> norm_lowerings() {
  return {
      {"aten::native_batch_norm", batch_norm, Traits().set_unmarked_writes({3, 4})},
      {"aten::_native_batch_norm_legit", batch_norm_legit},
      {"aten::_native_batch_norm_legit.no_stats", batch_norm_no_stats},
      {"aten::_native_batch_norm_legit_functional", batch_norm_legit},
      {"aten::_native_batch_norm_legit_no_training", batch_norm_no_training},
      {"aten::native_batch_norm_backward", batch_norm_backward},
      {"aten::_batch_norm_with_update", batch_norm_with_update},
      // (grad_out, input, weight, running_mean?, running_var?, save_mean?,
      //  save_var?, update, eps, output_mask, reserve): update means training
      {"aten::batch_norm_backward", batch_norm_backward},
      {"aten::native_group_norm", group_norm},
      {"aten::native_layer_norm", native_layer_norm, Traits().set_shape_generic()},
      {"aten::native_layer_norm_backward", native_layer_norm_backward},
      {"aten::native_group_norm_backward", group_norm_backward},
  };
}

}  // namespace torch_pjrt::lowering
