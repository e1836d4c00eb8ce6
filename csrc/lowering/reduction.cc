// Reductions: sum, mean, prod, extrema with and without indices, var/std,
// any/all, logsumexp, vector norms and cumulative sums.
//
// Conventions shared by every op here: a dim list that is None or empty means
// every dim; keepdim puts a 1 back in each reduced position; float16 and
// bfloat16 accumulate in float32 (hlo::opmath_type) and round once at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// ---- dtype facts (asked of hlo/dtype.h, never switched on here)

// sum/prod/cumsum of bool and integral tensors return int64.
DType sum_type(DType t) { return hlo::is_floating(t) || hlo::is_complex(t) ? t : DType::I64; }

// The least value of `t` as a rank-0 constant: -inf for floats, false for
// bool, 0 for unsigned and -2^(bits-1) for signed integers.
Value lowest(hlo::Builder& b, DType t) {
  if (hlo::is_floating(t)) return b.constant(-std::numeric_limits<double>::infinity(), t);
  if (!hlo::is_integral(t) || hlo::is_unsigned(t)) return b.constant(0, t);
  return b.constant(-std::ldexp(1.0, static_cast<int>(8 * hlo::byte_size(t) - 1)), t);
}
// The greatest value of `t`: +inf for floats, otherwise the bitwise not of
// the least value (true, all ones, or 2^(bits-1)-1), which a double cannot
// always spell exactly.
Value highest(hlo::Builder& b, DType t) {
  if (hlo::is_floating(t)) return b.constant(std::numeric_limits<double>::infinity(), t);
  return b.not_(lowest(b, t));
}

// ---- dims

Dims all_dims(int64_t rank) {
  Dims d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(i);
  return d;
}

// The dims to reduce, from argument i (None, an int or an int list); None and
// an empty list mean every dim. A rank-0 tensor accepts dim 0 and -1 and has
// nothing to reduce.
Dims reduce_dims(Context& cx, size_t i, int64_t rank) {
  if (cx.none(i)) return all_dims(rank);
  std::vector<int64_t> ds =
      cx.arg(i).kind == Arg::Kind::Ints ? cx.ints(i) : std::vector<int64_t>{cx.integer(i)};
  if (ds.empty()) return all_dims(rank);
  Dims out = cx.dims(ds, rank);
  for (size_t a = 0; a < out.size(); ++a)
    for (size_t c = a + 1; c < out.size(); ++c)
      if (out[a] == out[c]) cx.fail("dim " + std::to_string(out[a]) + " appears multiple times in the list of dims");
  if (rank == 0) return {};
  std::sort(out.begin(), out.end());
  return out;
}

bool contains(const Dims& ds, int64_t d) { return std::find(ds.begin(), ds.end(), d) != ds.end(); }

// Shape of x with `dims` reduced: dropped, or kept as 1 with keepdim.
Dims reduced_shape(const Dims& shape, const Dims& dims, bool keepdim) {
  Dims out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (!contains(dims, i)) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Product of the reduced dim sizes (the N of a mean).
int64_t count(const Dims& shape, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

// r (the result of reducing x over dims) reshaped for keepdim.
Value keep(hlo::Builder& b, Value r, const Dims& shape, const Dims& dims, bool keepdim) {
  return keepdim ? b.reshape(r, reduced_shape(shape, dims, true)) : r;
}

// ---- building blocks

// Sum of x over dims in x's own dtype, accumulated in its opmath type.
Value sum_in(hlo::Builder& b, Value x, const Dims& dims) {
  DType out = x.dtype();
  Value acc = b.convert(x, hlo::opmath_type(out));
  return b.convert(b.reduce(acc, b.constant(0, acc.dtype()), dims, "stablehlo.add"), out);
}

// Sum over dims with PyTorch's dtype rules: `dtype` if given (the input is
// converted first), else int64 for bool/integral input, else self's dtype.
Value summed(Context& cx, Value x, const Dims& dims, bool keepdim, size_t dtype_arg) {
  DType out = cx.none(dtype_arg) ? sum_type(x.dtype()) : cx.dtype(dtype_arg);
  Value r = sum_in(cx.b, cx.b.convert(x, out), dims);
  return keep(cx.b, r, x.dims(), dims, keepdim);
}

// Mean over dims; the result must be floating (PyTorch refuses to infer one).
Value mean_of(Context& cx, Value x, const Dims& dims, bool keepdim, size_t dtype_arg) {
  DType out = cx.none(dtype_arg) ? x.dtype() : cx.dtype(dtype_arg);
  if (!hlo::is_floating(out) && !hlo::is_complex(out))
    cx.fail("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: " +
            std::string(hlo::dtype_name(out)));
  auto& b = cx.b;
  Value acc = b.convert(x, hlo::opmath_type(out));
  Value s = b.reduce(acc, b.constant(0, acc.dtype()), dims, "stablehlo.add");
  Value m = b.div(s, b.constant(static_cast<double>(count(x.dims(), dims)), acc.dtype()));
  return keep(b, b.convert(m, out), x.dims(), dims, keepdim);
}

// (values, int64 indices) of the max (or min) over one dim, first index on
// ties, NaN winning like PyTorch (the first NaN when there are several).
std::pair<Value, Value> extremum_with_index(hlo::Builder& b, Value x, int64_t dim, bool is_max) {
  Value idx = b.iota(TensorType{DType::I64, x.dims()}, dim);
  Value init = is_max ? lowest(b, x.dtype()) : highest(b, x.dtype());
  Value init_idx = highest(b, DType::I64);  // loses every tie
  // Region arguments: (value, index) of the accumulated side, then of the
  // incoming side.
  V r = b.reduce_multi({x, idx}, {init, init_idx}, {dim}, [is_max](hlo::Builder& b, const std::vector<Value>& a) {
    Value v0 = a[0], i0 = a[1], v1 = a[2], i1 = a[3];
    Value nan0 = b.compare(v0, v0, "NE"), nan1 = b.compare(v1, v1, "NE");
    Value better = b.or_(b.compare(v0, v1, is_max ? "GT" : "LT"), b.and_(nan0, b.not_(nan1)));
    Value tie = b.or_(b.compare(v0, v1, "EQ"), b.and_(nan0, nan1));
    Value pick0 = b.or_(better, b.and_(tie, b.compare(i0, i1, "LT")));
    return V{b.select(pick0, v0, v1), b.select(pick0, i0, i1)};
  });
  return {r[0], r[1]};
}

// Max (or min) over dims in x's dtype. NaN propagates as in PyTorch: the
// combiner picks a NaN operand explicitly, because the CPU plugin's reduce
// with a bare stablehlo.maximum drops NaNs.
Value extremum(hlo::Builder& b, Value x, const Dims& dims, bool is_max) {
  Value init = is_max ? lowest(b, x.dtype()) : highest(b, x.dtype());
  return b.reduce_multi({x}, {init}, dims, [is_max](hlo::Builder& b, const std::vector<Value>& a) {
    Value m = is_max ? b.max(a[0], a[1]) : b.min(a[0], a[1]);
    m = b.select(b.compare(a[1], a[1], "NE"), a[1], m);
    return V{b.select(b.compare(a[0], a[0], "NE"), a[0], m)};
  })[0];
}

void check_nonempty_reduction(Context& cx, Value x, const Dims& dims, const char* name) {
  for (int64_t d : dims)
    if (x.dims()[d] == 0)
      cx.fail(std::string(name) + "(): Expected reduction dim " + std::to_string(d) +
              " to have non-zero size.");
}

// ---- sum, mean, prod

// aten::sum(self, *, dtype?)
V sum(Context& cx) {
  Value x = cx.tensor(0);
  return {summed(cx, x, all_dims(x.rank()), false, 1)};
}
// aten::sum.dim_IntList(self, int[1]? dim, bool keepdim, *, dtype?)
V sum_dim(Context& cx) {
  Value x = cx.tensor(0);
  return {summed(cx, x, reduce_dims(cx, 1, x.rank()), cx.flag_or(2, false), 3)};
}

// aten::mean(self, *, dtype?)
V mean(Context& cx) {
  Value x = cx.tensor(0);
  return {mean_of(cx, x, all_dims(x.rank()), false, 1)};
}
// aten::mean.dim(self, int[1]? dim, bool keepdim, *, dtype?)
V mean_dim(Context& cx) {
  Value x = cx.tensor(0);
  return {mean_of(cx, x, reduce_dims(cx, 1, x.rank()), cx.flag_or(2, false), 3)};
}

Value product(Context& cx, Value x, const Dims& dims, bool keepdim, size_t dtype_arg) {
  DType out = cx.none(dtype_arg) ? sum_type(x.dtype()) : cx.dtype(dtype_arg);
  auto& b = cx.b;
  Value acc = b.convert(b.convert(x, out), hlo::opmath_type(out));
  Value r = b.convert(b.reduce(acc, b.constant(1, acc.dtype()), dims, "stablehlo.multiply"), out);
  return keep(b, r, x.dims(), dims, keepdim);
}
// aten::prod(self, *, dtype?)
V prod(Context& cx) {
  Value x = cx.tensor(0);
  return {product(cx, x, all_dims(x.rank()), false, 1)};
}
// aten::prod.dim_int(self, int dim, bool keepdim, *, dtype?)
V prod_dim(Context& cx) {
  Value x = cx.tensor(0);
  return {product(cx, x, reduce_dims(cx, 1, x.rank()), cx.flag_or(2, false), 3)};
}

// ---- extrema

// aten::amax / aten::amin(self, int[1] dim=[], bool keepdim)
V amax_amin(Context& cx, bool is_max) {
  Value x = cx.tensor(0);
  Dims dims = reduce_dims(cx, 1, x.rank());
  check_nonempty_reduction(cx, x, dims, is_max ? "amax" : "amin");
  return {keep(cx.b, extremum(cx.b, x, dims, is_max), x.dims(), dims, cx.flag_or(2, false))};
}
V amax(Context& cx) { return amax_amin(cx, true); }
V amin(Context& cx) { return amax_amin(cx, false); }

// aten::max / aten::min(self): the extremum of every element, rank 0.
V max_min_all(Context& cx, bool is_max) {
  Value x = cx.tensor(0);
  if (x.type.numel() == 0)
    cx.fail(std::string(is_max ? "max" : "min") +
            "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
            "'dim' argument.");
  return {extremum(cx.b, x, all_dims(x.rank()), is_max)};
}
V max_all(Context& cx) { return max_min_all(cx, true); }
V min_all(Context& cx) { return max_min_all(cx, false); }

// aten::max.dim / aten::min.dim(self, int dim, bool keepdim) -> (values, indices)
V max_min_dim(Context& cx, bool is_max) {
  Value x = cx.tensor(0);
  int64_t d = cx.dim(cx.integer(1), x.rank());
  bool keepdim = cx.flag_or(2, false);
  if (x.rank() == 0) return {x, cx.b.constant(0, DType::I64)};
  if (x.dims()[d] == 0)
    cx.fail(std::string(is_max ? "max" : "min") + "(): Expected reduction dim " + std::to_string(d) +
            " to have non-zero size.");
  auto [v, i] = extremum_with_index(cx.b, x, d, is_max);
  return {keep(cx.b, v, x.dims(), {d}, keepdim), keep(cx.b, i, x.dims(), {d}, keepdim)};
}
V max_dim(Context& cx) { return max_min_dim(cx, true); }
V min_dim(Context& cx) { return max_min_dim(cx, false); }

// aten::argmax / aten::argmin(self, int? dim, bool keepdim): with no dim, the
// index into the flattened tensor (keepdim then gives all-ones dims).
V arg_extremum(Context& cx, bool is_max) {
  Value x = cx.tensor(0);
  bool keepdim = cx.flag_or(2, false);
  const char* name = is_max ? "argmax" : "argmin";
  if (x.dtype() == DType::Bool) cx.fail(std::string(name) + "(): does not support bool input");
  if (cx.none(1)) {
    if (x.type.numel() == 0)
      cx.fail(std::string(name) + "(): Expected reduction dim to be specified for input.numel() == 0.");
    Value flat = cx.b.reshape(x, {x.type.numel()});
    Value i = extremum_with_index(cx.b, flat, 0, is_max).second;
    return {keepdim ? cx.b.reshape(i, Dims(x.rank(), 1)) : i};
  }
  int64_t d = cx.dim(cx.integer(1), x.rank());
  if (x.rank() == 0) return {cx.b.constant(0, DType::I64)};
  if (x.dims()[d] == 0)
    cx.fail(std::string(name) + "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
  Value i = extremum_with_index(cx.b, x, d, is_max).second;
  return {keep(cx.b, i, x.dims(), {d}, keepdim)};
}
V argmax(Context& cx) { return arg_extremum(cx, true); }
V argmin(Context& cx) { return arg_extremum(cx, false); }

// ---- var, std

struct Moments {
  Value var;   // in self's dtype
  Value mean;  // in self's dtype
};

// var.correction(self, int[1]? dim, *, Scalar? correction, bool keepdim):
// sum((x - mean)^2) / max(N - correction, 0), correction 1 when None.
Moments moments(Context& cx, const char* name) {
  Value x = cx.tensor(0);
  DType out = x.dtype();
  if (!hlo::is_floating(out))
    cx.fail(std::string(name) + ": std and var only support floating point and complex dtypes, got " +
            std::string(hlo::dtype_name(out)));
  Dims dims = reduce_dims(cx, 1, x.rank());
  bool keepdim = cx.flag_or(3, false);
  auto& b = cx.b;
  DType t = hlo::opmath_type(out);
  Value xf = b.convert(x, t);
  Value n = b.constant(static_cast<double>(count(x.dims(), dims)), t);
  Value mean = b.div(b.reduce(xf, b.constant(0, t), dims, "stablehlo.add"), n);
  Value centered = b.sub(xf, b.reshape(mean, reduced_shape(x.dims(), dims, true)));
  Value ss = b.reduce(b.mul(centered, centered), b.constant(0, t), dims, "stablehlo.add");
  Value correction = cx.none(2) ? b.constant(1, t) : cx.as(2, t);
  Value denom = b.max(b.sub(n, correction), b.constant(0, t));
  Value var = b.div(ss, denom);
  return {keep(b, b.convert(var, out), x.dims(), dims, keepdim), keep(b, b.convert(mean, out), x.dims(), dims, keepdim)};
}

// std = sqrt(var) computed before rounding to self's dtype.
Value std_of(Context& cx, Value var) {
  DType out = var.dtype();
  return cx.b.convert(cx.b.sqrt(cx.b.convert(var, hlo::opmath_type(out))), out);
}

V var(Context& cx) { return {moments(cx, "var").var}; }
V std_(Context& cx) { return {std_of(cx, moments(cx, "std").var)}; }
V var_mean(Context& cx) {
  Moments m = moments(cx, "var_mean");
  return {m.var, m.mean};
}
V std_mean(Context& cx) {
  Moments m = moments(cx, "std_mean");
  return {std_of(cx, m.var), m.mean};
}

// ---- any, all

// PyTorch keeps uint8 for any/all of a uint8 tensor (a legacy rule);
// every other input gives bool.
DType any_all_type(DType t) { return t == DType::U8 ? DType::U8 : DType::Bool; }

Value any_all(Context& cx, Value x, const Dims& dims, bool keepdim, bool is_any) {
  auto& b = cx.b;
  Value p = b.convert(x, DType::Bool);
  if (dims.empty()) return b.convert(p, any_all_type(x.dtype()));  // nothing to reduce
  Value r = b.reduce(p, b.constant(is_any ? 0 : 1, DType::Bool), dims, is_any ? "stablehlo.or" : "stablehlo.and");
  return b.convert(keep(b, r, x.dims(), dims, keepdim), any_all_type(x.dtype()));
}
// aten::any / aten::all(self)
V any(Context& cx) {
  Value x = cx.tensor(0);
  return {any_all(cx, x, all_dims(x.rank()), false, true)};
}
V all(Context& cx) {
  Value x = cx.tensor(0);
  return {any_all(cx, x, all_dims(x.rank()), false, false)};
}
// aten::any.dim / .dims, aten::all.dim / .dims(self, dim, bool keepdim)
// Unlike sum and amax, any.dims / all.dims with an empty dim list reduce
// nothing (the result is the input as bool); None still means every dim.
Dims any_all_dims(Context& cx, int64_t rank) {
  if (!cx.none(1) && cx.arg(1).kind == Arg::Kind::Ints && cx.ints(1).empty()) return {};
  return reduce_dims(cx, 1, rank);
}
V any_dim(Context& cx) {
  Value x = cx.tensor(0);
  return {any_all(cx, x, any_all_dims(cx, x.rank()), cx.flag_or(2, false), true)};
}
V all_dim(Context& cx) {
  Value x = cx.tensor(0);
  return {any_all(cx, x, any_all_dims(cx, x.rank()), cx.flag_or(2, false), false)};
}

// ---- logsumexp

// aten::logsumexp(self, int[1] dim, bool keepdim): max-shifted, with an
// infinite max replaced by 0 so that all -inf gives -inf and +inf gives +inf.
// Integral input gives the default float dtype.
V logsumexp(Context& cx) {
  Value x = cx.tensor(0);
  Dims dims = reduce_dims(cx, 1, x.rank());
  bool keepdim = cx.flag_or(2, false);
  auto& b = cx.b;
  DType out = float_type(x.dtype());
  DType t = hlo::opmath_type(out);
  Value xf = b.convert(x, t);
  Value m = extremum(b, xf, dims, true);
  Value finite = b.compare(b.abs(m), b.constant(std::numeric_limits<double>::infinity(), t), "NE");
  m = b.select(finite, m, b.constant(0, t));
  Value mk = b.reshape(m, reduced_shape(x.dims(), dims, true));
  Value s = b.reduce(b.exp(b.sub(xf, mk)), b.constant(0, t), dims, "stablehlo.add");
  Value r = b.add(b.log(s), m);
  return {keep(b, b.convert(r, out), x.dims(), dims, keepdim)};
}

// ---- norms

// aten::linalg_vector_norm(self, Scalar ord=2, int[1]? dim, bool keepdim, *, dtype?)
// ord is a runtime scalar: inf -> max|x|, -inf -> min|x|, 0 -> count of
// non-zeros, 1 -> sum|x|, 2 -> sqrt(sum x^2), else sum(|x|^p)^(1/p).
V linalg_vector_norm(Context& cx) {
  Value x = cx.tensor(0);
  DType out = cx.none(4) ? x.dtype() : cx.dtype(4);
  if (!hlo::is_floating(x.dtype()) || !hlo::is_floating(out))
    cx.fail("linalg.vector_norm: Expected a floating point or complex tensor as input. Got " +
            std::string(hlo::dtype_name(hlo::is_floating(x.dtype()) ? out : x.dtype())));
  Dims dims = reduce_dims(cx, 2, x.rank());
  bool keepdim = cx.flag_or(3, false);
  auto& b = cx.b;
  DType t = hlo::opmath_type(out);
  Value a = b.abs(b.convert(b.convert(x, out), t));
  Value p = cx.none(1) ? b.constant(2, t) : cx.as(1, t);
  Value zero = b.constant(0, t), one = b.constant(1, t);
  Value inf = b.constant(std::numeric_limits<double>::infinity(), t);
  auto add = [&](Value v) { return b.reduce(v, zero, dims, "stablehlo.add"); };
  auto is = [&](Value v) { return b.compare(p, v, "EQ"); };

  Value l1 = add(a);
  Value l2 = b.sqrt(add(b.mul(a, a)));
  Value l0 = add(b.convert(b.compare(a, zero, "NE"), t));
  Value lmax = extremum(b, a, dims, true);
  Value lmin = extremum(b, a, dims, false);
  Value lp = b.binary("stablehlo.power", add(b.binary("stablehlo.power", a, p)), b.div(one, p));

  Value r = b.select(is(one), l1, lp);
  r = b.select(is(b.constant(2, t)), l2, r);
  r = b.select(is(zero), l0, r);
  r = b.select(is(inf), lmax, r);
  r = b.select(is(b.neg(inf)), lmin, r);
  return {keep(b, b.convert(r, out), x.dims(), dims, keepdim)};
}

// ---- cumulative

// Inclusive scan of x along dim with `combiner` as a reduce_window whose
// window spans the whole dim and is padded on the low side.
Value scan(hlo::Builder& b, Value x, int64_t dim, Value init, const std::string& combiner) {
  int64_t n = x.dims()[dim];
  if (n <= 1) return x;
  Dims window(x.rank(), 1), strides(x.rank(), 1);
  window[dim] = n;
  std::string win, str, pad;
  for (int64_t i = 0; i < x.rank(); ++i) {
    win += (i ? ", " : "") + std::to_string(window[i]);
    str += (i ? ", " : "") + std::string("1");
    pad += (i ? ", " : "") + std::string(i == dim ? "[" + std::to_string(n - 1) + ", 0]" : "[0, 0]");
  }
  std::string attrs = "window_dimensions = array<i64: " + win + ">, window_strides = array<i64: " + str +
                      ">, padding = dense<[" + pad + "]> : tensor<" + std::to_string(x.rank()) + "x2xi64>";
  TensorType scalar{x.dtype(), {}};
  return b.op_multi("stablehlo.reduce_window", {x, init}, {x.type}, attrs,
                    {{{scalar, scalar}, [combiner](hlo::Builder& b, const std::vector<Value>& a) {
                        return V{b.op(combiner, {a[0], a[1]}, a[0].type)};
                      }}})[0];
}

// aten::cumsum / aten::cumprod(self, int dim, *, dtype?)
Value cumulative(Context& cx, bool is_sum) {
  Value x = cx.tensor(0);
  int64_t d = cx.dim(cx.integer(1), x.rank());
  DType out = cx.none(2) ? sum_type(x.dtype()) : cx.dtype(2);
  auto& b = cx.b;
  Value acc = b.convert(b.convert(x, out), hlo::opmath_type(out));
  if (x.rank() == 0) return b.convert(acc, out);
  Value r = scan(b, acc, d, b.constant(is_sum ? 0 : 1, acc.dtype()), is_sum ? "stablehlo.add" : "stablehlo.multiply");
  return b.convert(r, out);
}
V cumsum(Context& cx) { return {cumulative(cx, true)}; }
V cumprod(Context& cx) { return {cumulative(cx, false)}; }

}  // namespace

std::vector<Entry> reduction_lowerings() {
  return {
      {"aten::sum", sum},
      {"aten::sum.dim_IntList", sum_dim},
      {"aten::mean", mean},
      {"aten::mean.dim", mean_dim},
      {"aten::prod", prod},
      {"aten::prod.dim_int", prod_dim},
      {"aten::amax", amax},
      {"aten::amin", amin},
      {"aten::max", max_all},
      {"aten::min", min_all},
      {"aten::max.dim", max_dim},
      {"aten::min.dim", min_dim},
      {"aten::argmax", argmax},
      {"aten::argmin", argmin},
      {"aten::var.correction", var},
      {"aten::std.correction", std_},
      {"aten::var_mean.correction", var_mean},
      {"aten::std_mean.correction", std_mean},
      {"aten::any", any},
      {"aten::any.dim", any_dim},
      {"aten::any.dims", any_dim},
      {"aten::all", all},
      {"aten::all.dim", all_dim},
      {"aten::all.dims", all_dim},
      {"aten::logsumexp", logsumexp},
      {"aten::linalg_vector_norm", linalg_vector_norm},
      {"aten::cumsum", cumsum},
      {"aten::cumprod", cumprod},
  };
}

}  // namespace torch_pjrt::lowering
