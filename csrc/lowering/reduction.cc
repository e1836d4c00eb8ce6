// Reductions: sum, mean, prod, extrema with and without indices, var/std,
// any/all, logsumexp, vector norms, nansum, count_nonzero, aminmax, trace,
// renorm, the scans (cumsum, cumprod, cummax/cummin, logcumsumexp) and
// segment_reduce.
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

const std::vector<double> kNormFixedOrders = {2, 1, 0, std::numeric_limits<double>::infinity(),
                                              -std::numeric_limits<double>::infinity()};

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
  std::vector<int64_t> ds = cx.arg(i).kind == Arg::Kind::Ints ? cx.ints(i) : std::vector<int64_t>{cx.integer(i)};
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
    if (!contains(dims, i))
      out.push_back(shape[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Product of the reduced dim sizes (the N of a mean).
int64_t count(const Dims& shape, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

// The same product as a value of dtype `t`: a shape-bucketed dim counts its
// true size (a runtime value), so a mean never divides by padding.
Value count_of(hlo::Builder& b, const Value& x, const Dims& dims, DType t) {
  Dims dynamic, fixed;
  for (int64_t d : dims) (x.type.is_dynamic(d) ? dynamic : fixed).push_back(d);
  Value n = b.constant(static_cast<double>(count(x.dims(), fixed)), t);
  for (int64_t d : dynamic) n = b.mul(n, b.convert(b.dimension_size(x, d), t));
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
    cx.fail(
        "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: " +
        std::string(hlo::dtype_name(out)));
  auto& b = cx.b;
  Value acc = b.convert(x, hlo::opmath_type(out));
  Value s = b.reduce(acc, b.constant(0, acc.dtype()), dims, "stablehlo.add");
  return keep(b, b.convert(b.div(s, count_of(b, x, dims, acc.dtype())), out), x.dims(), dims, keepdim);
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
      cx.fail(std::string(name) + "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.",
              ErrorKind::Index);
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
  refuse_complex_kernel(cx, {0}, is_max ? "max_values_cpu" : "min_values_cpu");
  Value x = cx.tensor(0);
  Dims dims = reduce_dims(cx, 1, x.rank());
  bool every_dim = cx.none(1) || cx.ints(1).empty();
  if (every_dim && x.type.numel() == 0)
    cx.fail(std::string(is_max ? "amax" : "amin") +
            "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
            "'dim' argument.");
  check_nonempty_reduction(cx, x, dims, is_max ? "amax" : "amin");
  return {keep(cx.b, extremum(cx.b, x, dims, is_max), x.dims(), dims, cx.flag_or(2, false))};
}
V amax(Context& cx) { return amax_amin(cx, true); }
V amin(Context& cx) { return amax_amin(cx, false); }

// aten::max / aten::min(self): the extremum of every element, rank 0.
V max_min_all(Context& cx, bool is_max) {
  refuse_complex_kernel(cx, {0}, is_max ? "max_all" : "min_all");
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
  refuse_complex(cx, {0}, std::string(is_max ? "max" : "min") + "(): does not support complex input");
  Value x = cx.tensor(0);
  int64_t d = cx.dim(cx.integer(1), x.rank());
  bool keepdim = cx.flag_or(2, false);
  if (x.rank() == 0) return {x, cx.b.constant(0, DType::I64)};
  if (x.dims()[d] == 0)
    cx.fail(std::string(is_max ? "max" : "min") + "(): Expected reduction dim " + std::to_string(d) +
                " to have non-zero size.",
            ErrorKind::Index);
  auto [v, i] = extremum_with_index(cx.b, x, d, is_max);
  return {keep(cx.b, v, x.dims(), {d}, keepdim), keep(cx.b, i, x.dims(), {d}, keepdim)};
}
V max_dim(Context& cx) { return max_min_dim(cx, true); }
V min_dim(Context& cx) { return max_min_dim(cx, false); }

// aten::argmax / aten::argmin(self, int? dim, bool keepdim): with no dim, the
// index into the flattened tensor (keepdim then gives all-ones dims).
V arg_extremum(Context& cx, bool is_max) {
  refuse_complex(cx, {0}, std::string(is_max ? "argmax" : "argmin") + "(): does not support complex input");
  Value x = cx.tensor(0);
  bool keepdim = cx.flag_or(2, false);
  const char* name = is_max ? "argmax" : "argmin";
  if (x.dtype() == DType::Bool) cx.fail(std::string(name) + "(): does not support bool input");
  if (cx.none(1)) {
    if (x.type.numel() == 0)
      cx.fail(std::string(name) + "(): Expected reduction dim to be specified for input.numel() == 0.",
              ErrorKind::Index);
    Value flat = cx.b.reshape(x, {x.type.numel()});
    Value i = extremum_with_index(cx.b, flat, 0, is_max).second;
    return {keepdim ? cx.b.reshape(i, Dims(x.rank(), 1)) : i};
  }
  int64_t d = cx.dim(cx.integer(1), x.rank());
  if (x.rank() == 0) return {cx.b.constant(0, DType::I64)};
  if (x.dims()[d] == 0)
    cx.fail(std::string(name) + "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.",
            ErrorKind::Index);
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
  if (!hlo::is_floating(out) && !hlo::is_complex(out))
    cx.fail(std::string(name) + ": std and var only support floating point and complex dtypes, got " +
            std::string(hlo::dtype_name(out)));
  Dims dims = reduce_dims(cx, 1, x.rank());
  bool keepdim = cx.flag_or(3, false);
  auto& b = cx.b;
  DType t = hlo::opmath_type(out);
  DType rt = hlo::real_type(t);  // a complex variance is real: var(real) + var(imag)
  Value xf = b.convert(x, t);
  double count_n = static_cast<double>(count(x.dims(), dims));
  Value mean = b.div(b.reduce(xf, b.constant(0, t), dims, "stablehlo.add"), b.constant(count_n, t));
  Value centered = b.sub(xf, b.reshape(mean, reduced_shape(x.dims(), dims, true)));
  Value sq = hlo::is_complex(t)
                 ? b.add(b.mul(b.real(centered), b.real(centered)), b.mul(b.imag(centered), b.imag(centered)))
                 : b.mul(centered, centered);
  Value ss = b.reduce(sq, b.constant(0, rt), dims, "stablehlo.add");
  Value n = b.constant(count_n, rt);
  Value correction = cx.none(2) ? b.constant(1, rt) : cx.as(2, rt);
  Value denom = b.max(b.sub(n, correction), b.constant(0, rt));
  Value var = b.div(ss, denom);
  return {keep(b, b.convert(var, hlo::real_type(out)), x.dims(), dims, keepdim),
          keep(b, b.convert(mean, out), x.dims(), dims, keepdim)};
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
  decline_complex(cx, {0});
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

// The vector norm of x over dims in dtype `out`, with the order p (None
// means 2): inf -> max|x|, -inf -> min|x|, 0 -> count of non-zeros,
// 1 -> sum|x|, 2 -> sqrt(sum x^2), else sum(|x|^p)^(1/p). An order of
// kNormFixedOrders arrives as a constant and builds its reduction alone;
// any other order is a runtime scalar, and the result is selected by its
// value.
Value vector_norm(Context& cx, Value x, size_t p_arg, const Dims& dims, bool keepdim, DType out, const char* name) {
  if (hlo::is_complex(x.dtype())) {  // the norm of |x|, real (ATen's toRealValueType)
    x = abs_value(cx.b, cx.b.convert(x, hlo::is_complex(out) ? out : x.dtype()));
    out = x.dtype();
  }
  if (!hlo::is_floating(x.dtype()) || !hlo::is_floating(out))
    cx.fail(std::string(name) + ": Expected a floating point or complex tensor as input. Got " +
            std::string(hlo::dtype_name(hlo::is_floating(x.dtype()) ? out : x.dtype())));
  auto& b = cx.b;
  DType t = hlo::opmath_type(out);
  Value a = b.abs(b.convert(b.convert(x, out), t));
  const double inf = std::numeric_limits<double>::infinity();
  auto add = [&](Value v) { return b.reduce(v, b.constant(0, t), dims, "stablehlo.add"); };
  auto fixed = [&](double k) {
    if (k == 1) return add(a);
    if (k == 2) return b.sqrt(add(b.mul(a, a)));
    if (k == 0) return add(b.convert(b.compare(a, b.constant(0, t), "NE"), t));
    return extremum(b, a, dims, k == inf);  // +-inf
  };
  std::optional<double> k = cx.none(p_arg) ? std::optional<double>(2) : cx.fixed_scalar(p_arg);
  Value r;
  if (k) {
    r = fixed(*k);
  } else {
    Value p = cx.as(p_arg, t);
    r = b.binary("stablehlo.power", add(b.binary("stablehlo.power", a, p)), b.div(b.constant(1, t), p));
    for (double v : kNormFixedOrders) r = b.select(b.compare(p, b.constant(v, t), "EQ"), fixed(v), r);
  }
  return keep(b, b.convert(r, out), x.dims(), dims, keepdim);
}

// The checks of ATen's linalg_vector_norm meta before it reads the dims, in
// its order: a floating or complex input, a real order p (argument 1), no
// order p < 0 or inf over an empty reduction (a runtime check: p is a
// runtime scalar), and the dtype argument (`dtype`, when given). aten::norm
// (`is_norm`) first checks the input and result dtypes with its own message.
void check_vector_norm(Context& cx, const Value& x, size_t dim_arg, const DType* dtype, bool is_norm) {
  DType in = x.dtype();
  auto dtype_text = [](DType t) { return std::string(hlo::scalar_type_name(t)); };
  bool float_in = hlo::is_floating(in) || hlo::is_complex(in);
  if (is_norm && dtype) {
    // The _dtype overloads' meta checks the result dtype, then the dims; the
    // input dtype is checked by the kernel after them.
    if (!hlo::is_floating(*dtype) && !hlo::is_complex(*dtype))
      cx.fail("norm(): the desired output dtype should be either floating point or complex. Got " + dtype_text(*dtype) +
              " instead.");
    if (!cx.none(dim_arg) && dim_arg < cx.size()) reduce_dims(cx, dim_arg, x.rank());
  }
  if (is_norm) {
    if (!float_in)
      cx.fail("norm(): input dtype should be either floating point or complex. Got " + dtype_text(in) + " instead.");
    DType out = dtype ? *dtype : in;
    if (!hlo::is_floating(out) && !hlo::is_complex(out))
      cx.fail("norm(): the desired output dtype should be either floating point or complex. Got " + dtype_text(out) +
              " instead.");
  }
  if (!float_in)
    cx.fail("linalg.vector_norm: Expected a floating point or complex tensor as input. Got " + dtype_text(in));
  if (!cx.none(1) && hlo::is_complex(cx.tensor(1).dtype()))
    cx.fail("linalg.vector_norm: Expected a non-complex scalar as the order of norm.");
  // An empty reduction: the whole (empty) tensor, or a named dim of size 0.
  bool empty = false;
  if (x.type.numel() == 0) {
    std::vector<int64_t> ds;
    if (!cx.none(dim_arg)) ds = cx.arg(dim_arg).kind == Arg::Kind::Ints ? cx.ints(dim_arg) : std::vector<int64_t>{};
    int64_t r = x.rank() == 0 ? 1 : x.rank();
    empty = ds.empty();
    for (int64_t d : ds)
      if (d >= -r && d < r && x.rank() > 0 && x.dims()[d < 0 ? d + r : d] == 0) empty = true;
  }
  if (empty) {
    auto& b = cx.b;
    Value p = cx.none(1) ? b.constant(2, DType::F64) : cx.as(1, DType::F64);
    Value bad = b.or_(b.compare(p, b.constant(0, DType::F64), "LT"),
                      b.compare(p, b.constant(std::numeric_limits<double>::infinity(), DType::F64), "EQ"));
    cx.check(bad,
             "linalg.vector_norm cannot compute a norm of order < 0 or inf on an empty tensor or dimension because "
             "the operation does not have an identity",
             ErrorKind::Runtime);
  }
  if (dtype) {
    DType t = *dtype;
    if (!hlo::is_floating(t) && !hlo::is_complex(t))
      cx.fail("linalg.vector_norm: dtype should be floating point or complex, but got " + dtype_text(t));
    if (hlo::is_complex(in) != hlo::is_complex(t))
      cx.fail(std::string("linalg.vector_norm: dtype should be ") + (hlo::is_complex(in) ? "complex" : "real") +
              " for " + (hlo::is_complex(in) ? "complex" : "real") + " inputs, but got " + dtype_text(t));
    if (hlo::promote_types(in, t) != t)
      cx.fail("linalg.vector_norm: the dtype of the input (" + dtype_text(in) +
              ") should be convertible without narrowing to the specified dtype (" + dtype_text(t) + ")");
  }
}

// aten::linalg_vector_norm(self, Scalar ord=2, int[1]? dim, bool keepdim, *, dtype?)
V linalg_vector_norm(Context& cx) {
  Value x = cx.tensor(0);
  DType out = cx.none(4) ? x.dtype() : cx.dtype(4);
  check_vector_norm(cx, x, 2, cx.none(4) ? nullptr : &out, false);
  return {vector_norm(cx, x, 1, reduce_dims(cx, 2, x.rank()), cx.flag_or(3, false), out, "linalg.vector_norm")};
}

// aten::norm.Scalar(self, Scalar p=2)
V norm_scalar(Context& cx) {
  Value x = cx.tensor(0);
  check_vector_norm(cx, x, 99, nullptr, true);
  return {vector_norm(cx, x, 1, all_dims(x.rank()), false, x.dtype(), "norm")};
}
// aten::norm.ScalarOpt_dtype(self, Scalar? p, *, ScalarType dtype)
V norm_scalaropt_dtype(Context& cx) {
  Value x = cx.tensor(0);
  DType out = cx.dtype(2);
  check_vector_norm(cx, x, 99, &out, true);
  return {vector_norm(cx, x, 1, all_dims(x.rank()), false, out, "norm")};
}
// aten::norm.ScalarOpt_dim(self, Scalar? p, int[1] dim, bool keepdim=False)
V norm_scalaropt_dim(Context& cx) {
  Value x = cx.tensor(0);
  check_vector_norm(cx, x, 2, nullptr, true);
  return {vector_norm(cx, x, 1, reduce_dims(cx, 2, x.rank()), cx.flag_or(3, false), x.dtype(), "norm")};
}
// aten::norm.ScalarOpt_dim_dtype(self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype)
V norm_scalaropt_dim_dtype(Context& cx) {
  Value x = cx.tensor(0);
  DType out = cx.dtype(4);
  check_vector_norm(cx, x, 2, &out, true);
  return {vector_norm(cx, x, 1, reduce_dims(cx, 2, x.rank()), cx.flag_or(3, false), out, "norm")};
}

// aten::renorm(self, Scalar p, int dim, Scalar maxnorm): each slice along
// dim whose p-norm exceeds maxnorm is scaled by maxnorm / (norm + 1e-7).
V renorm(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  // ATen's renorm meta, in its order: p real and > 0, maxnorm real and >= 0
  // (runtime checks: both are runtime scalars), then the rank and the dim.
  if (hlo::is_complex(cx.tensor(1).dtype())) cx.fail("renorm: p must be real-valued");
  cx.check(cx.b.not_(cx.b.compare(cx.as(1, DType::F64), cx.b.constant(0, DType::F64), "GT")),
           "renorm: non-positive-norm not supported", ErrorKind::Runtime);
  if (hlo::is_complex(cx.tensor(3).dtype())) cx.fail("renorm: maxnorm must be real-valued");
  cx.check(cx.b.not_(cx.b.compare(cx.as(3, DType::F64), cx.b.constant(0, DType::F64), "GE")),
           "renorm: expected maxnorm to be >= 0", ErrorKind::Runtime);
  if (x.rank() == 0) cx.fail("renorm: input needs at least 1 dimension, got 0 dimensions");
  if (!hlo::is_floating(x.dtype())) cx.fail("renorm: input dtype should be either floating point or complex");
  int64_t d = cx.dim(cx.integer(2), x.rank());
  Dims dims;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (i != d) dims.push_back(i);
  DType out = x.dtype(), t = hlo::opmath_type(out);
  Value norm = vector_norm(cx, x, 1, dims, true, t, "renorm");
  Value maxnorm = cx.as(3, t);
  Value factor =
      b.select(b.compare(norm, maxnorm, "GT"), b.div(maxnorm, b.add(norm, b.constant(1e-7, t))), b.constant(1, t));
  return {b.convert(b.mul(b.convert(x, t), b.convert(b.convert(factor, out), t)), out)};
}

// ---- cumulative

// aten::cumsum / aten::cumprod(self, int dim, *, dtype?)
Value cumulative(Context& cx, bool is_sum) {
  Value x = cx.tensor(0);
  int64_t d = cx.dim(cx.integer(1), x.rank());
  DType out = cx.none(2) ? sum_type(x.dtype()) : cx.dtype(2);
  // The CPU kernels dispatch on the result dtype, every type but bool.
  if (out == DType::Bool) refuse_dtype(cx, out, is_sum ? "cumsum_out_cpu" : "cumprod_out_cpu");
  auto& b = cx.b;
  Value acc = b.convert(b.convert(x, out), hlo::opmath_type(out));
  if (x.rank() == 0) return b.convert(acc, out);
  Value r = b.scan(acc, b.constant(is_sum ? 0 : 1, acc.dtype()), d, is_sum ? "stablehlo.add" : "stablehlo.multiply");
  return b.convert(r, out);
}
V cumsum(Context& cx) { return {cumulative(cx, true)}; }
V cumprod(Context& cx) { return {cumulative(cx, false)}; }

// _cummax_helper / _cummin_helper(self, values!, indices!, dim): running
// extremum and the index where it was last reached; as on CPU a tie moves
// the index forward and a NaN wins (the latest NaN).
V cum_extremum(Context& cx, bool is_max) {
  refuse_complex_kernel(cx, {0}, is_max ? "cummax_cpu" : "cummin_cpu");
  auto& b = cx.b;
  Value x = cx.tensor(0);
  DType vt = cx.tensor(1).dtype(), it = cx.tensor(2).dtype();
  // ATen's helper reads self.size(dim): a 0-dim self has none (the
  // cummax/cummin composites handle 0-dim themselves).
  // Then the kernel reads values and indices as self's type and int64, and
  // self.stride(dim), values.stride(dim), indices.stride(dim), each wrapping
  // dim against its own rank.
  if (vt != x.dtype())
    cx.fail("expected scalar type " + std::string(hlo::scalar_type_name(x.dtype())) + " but found " +
            std::string(hlo::scalar_type_name(vt)));
  if (it != DType::I64) cx.fail("expected scalar type Long but found " + std::string(hlo::scalar_type_name(it)));
  int64_t given = cx.integer(3);
  for (const Value& t : {x, cx.tensor(1), cx.tensor(2)}) {
    if (t.rank() == 0)
      cx.fail("Dimension specified as " + std::to_string(given) + " but tensor has no dimensions", ErrorKind::Index);
    cx.dim(given, t.rank());
  }
  int64_t d = cx.dim(given, x.rank());
  // Two one-result scans (XLA's CPU pipeline fails on, or crashes in, a
  // two-result scan of (value, index) longer than 16): the running extremum,
  // where a NaN wins as in CPU's kernel, then the latest position whose
  // element equals the extremum so far, which is where it was last reached
  // (a tie moves forward; once a NaN came, the latest NaN).
  Value init = is_max ? lowest(b, x.dtype()) : highest(b, x.dtype());
  const bool floating = hlo::is_floating(x.dtype());
  Value values = b.scan_multi({x}, {init}, d, [is_max, floating](hlo::Builder& b, const std::vector<Value>& a) {
    Value pick0 = b.compare(a[0], a[1], is_max ? "GT" : "LT");
    if (floating) pick0 = b.or_(pick0, b.compare(a[0], a[0], "NE"));
    return V{b.select(pick0, a[0], a[1])};
  })[0];
  Value reached = b.compare(x, values, "EQ");
  if (floating) reached = b.or_(reached, b.and_(b.compare(x, x, "NE"), b.compare(values, values, "NE")));
  Value idx = b.iota(TensorType{DType::I64, x.dims()}, d);
  Value none = b.constant(-1, DType::I64);
  Value last = b.scan(b.select(reached, idx, b.broadcast_in_dim(none, x.dims(), {})), none, d, "stablehlo.maximum");
  return {b.convert(values, vt), b.convert(last, it)};
}
V cummax_helper(Context& cx) { return cum_extremum(cx, true); }
V cummin_helper(Context& cx) { return cum_extremum(cx, false); }

// _logcumsumexp(self, dim): running log(sum(exp)), combined as CPU does:
// log1p(exp(min - max)) + max, or either operand when both are the same
// infinity; NaN propagates.
// ATen's CPU kernel accumulates float32 in double (acc_type<float, false>),
// which its backward relies on for large inputs.
V logcumsumexp(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t d = cx.dim(cx.integer(1), x.rank());
  // The CPU kernel dispatches on the floating and complex types.
  if (!hlo::is_floating(x.dtype()) && !hlo::is_complex(x.dtype())) refuse_dtype(cx, x.dtype(), "logcumsumexp_out_cpu");
  // No complex algorithm here, and no CPU fallback: CPU PyTorch's _logcumsumexp.out of a complex input into an
  // integer out corrupts the heap (the bad-input sweep's CPU leg crashes), so refuse.
  if (hlo::is_complex(x.dtype())) cx.fail("_logcumsumexp: complex inputs are not supported on the tpu device");
  DType out = x.dtype(), t = hlo::byte_size(out) >= 4 ? DType::F64 : hlo::opmath_type(out);
  Value xf = b.convert(x, t);
  if (x.rank() == 0) return {x};
  Value ninf = b.constant(-std::numeric_limits<double>::infinity(), t);
  V r = b.scan_multi({xf}, {ninf}, d, [](hlo::Builder& b, const std::vector<Value>& a) {
    Value x0 = a[0], x1 = a[1];
    Value mx = b.max(x0, x1), mn = b.min(x0, x1);
    Value inf = b.constant(std::numeric_limits<double>::infinity(), x0.dtype());
    Value finite = b.compare(b.abs(mn), inf, "LT");
    Value general = b.add(b.unary("stablehlo.log_plus_one", b.exp(b.sub(mn, mx))), mx);
    Value r = b.select(b.or_(b.compare(mn, mx, "NE"), finite), general, x0);
    Value nan = b.or_(b.compare(x0, x0, "NE"), b.compare(x1, x1, "NE"));
    return V{b.select(nan, b.add(x0, x1), r)};
  });
  return {b.convert(r[0], out)};
}

// ---- NaN-ignoring sums, counts, aminmax, trace

// aten::nansum(self, int[1]? dim, bool keepdim, *, dtype?): NaNs count as 0.
V nansum(Context& cx) {
  refuse_complex(cx, {0}, "nansum on CPU does not support complex inputs");
  auto& b = cx.b;
  Value x = cx.tensor(0);
  Value isnan = b.compare(x, x, "NE");
  Value clean = b.select(isnan, scalar_like(cx, 0, x), x);
  return {summed(cx, clean, reduce_dims(cx, 1, x.rank()), cx.flag_or(2, false), 3)};
}

// aten::count_nonzero.dim_IntList(self, int[] dim) / count_nonzero(self, int? dim)
V count_nonzero(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  Dims dims = reduce_dims(cx, 1, x.rank());
  Value nz = b.convert(b.compare(x, scalar_like(cx, 0, x), "NE"), DType::I64);
  return {b.reduce(nz, b.constant(0, DType::I64), dims, "stablehlo.add")};
}

// aten::aminmax(self, *, int? dim, bool keepdim) -> (min, max)
V aminmax(Context& cx) {
  refuse_complex_kernel(cx, {0}, "aminmax_cpu");
  Value x = cx.tensor(0);
  Dims dims = reduce_dims(cx, 1, x.rank());
  bool keepdim = cx.flag_or(2, false);
  bool empty = cx.none(1) ? x.type.numel() == 0 : (x.rank() > 0 && !dims.empty() && x.dims()[dims[0]] == 0);
  if (empty && cx.none(1))
    cx.fail("aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  if (empty)
    cx.fail("aminmax: Expected reduction dim " + std::to_string(dims.empty() ? 0 : dims[0]) + " to have non-zero size.",
            ErrorKind::Index);
  return {keep(cx.b, extremum(cx.b, x, dims, false), x.dims(), dims, keepdim),
          keep(cx.b, extremum(cx.b, x, dims, true), x.dims(), dims, keepdim)};
}

// aten::trace(self): the sum of the main diagonal of a matrix (int64 for
// integral input).
V trace(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  if (x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), "trace");  // dispatched before the rank check
  if (x.rank() != 2) cx.fail("trace: expected a matrix, but got tensor with dim " + std::to_string(x.rank()));
  TensorType t{DType::I64, x.dims()};
  Value diag = b.compare(b.iota(t, 0), b.iota(t, 1), "EQ");
  Value masked = b.select(diag, x, scalar_like(cx, 0, x));
  return {summed(cx, masked, {0, 1}, false, 1)};
}

// ---- segment_reduce

// The segments of data along `axis` (lengths.rank() - 1, the dims before it
// matching data's): lengths as i64 [outer..., S] and the segment id of
// every position of the axis, i64 [outer..., N] (S past the last segment).
struct Segments {
  int64_t axis = 0, count = 0;
  Dims outer;
  Value lengths, seg;
};

Segments segments(Context& cx, Value data, size_t lengths_arg, size_t offsets_arg, size_t axis_arg) {
  auto& b = cx.b;
  Segments s;
  Value lengths;
  if (!cx.none(lengths_arg)) {
    lengths = b.convert(cx.tensor(lengths_arg), DType::I64);
  } else if (!cx.none(offsets_arg)) {
    Value off = b.convert(cx.tensor(offsets_arg), DType::I64);
    int64_t r = off.rank();
    if (r == 0 || off.dims().back() == 0) cx.fail("segment_reduce(): offsets must have at least one element");
    Dims zero(r, 0), one(r, 1), head = off.dims(), tail(r, 0);
    head[r - 1] -= 1;
    tail[r - 1] = 1;
    lengths = b.sub(b.slice(off, tail, off.dims(), one), b.slice(off, zero, head, one));
  } else {
    cx.fail("segment_reduce(): Either lengths or offsets must be defined");
  }
  if (lengths.rank() == 0) cx.fail("segment_reduce(): lengths must have at least one dimension");
  s.axis = lengths.rank() - 1;
  if (data.rank() <= s.axis || cx.dim(cx.integer_or(axis_arg, 0), data.rank()) != s.axis)
    cx.fail("segment_reduce(): Expected axis to be the last dimension of lengths but got " +
            std::to_string(cx.integer_or(axis_arg, 0)) + ".");
  s.outer = Dims(lengths.dims().begin(), lengths.dims().end() - 1);
  for (int64_t d = 0; d < s.axis; ++d)
    if (lengths.dims()[d] != data.dims()[d])
      cx.fail("segment_reduce(): Expected all rows of lengths along axis to match data");
  s.count = lengths.dims().back();
  s.lengths = lengths;
  int64_t n = data.dims()[s.axis], S = s.count, a = s.axis;
  Dims lead = all_dims(a);  // the outer dims keep their positions
  // ends[s] = lengths[0] + ... + lengths[s], from an [outer..., S, S] mask.
  Dims sq = s.outer;
  sq.push_back(S);
  sq.push_back(S);
  Value srow = b.iota(TensorType{DType::I64, sq}, a);
  Value kcol = b.iota(TensorType{DType::I64, sq}, a + 1);
  Dims ld = lead;
  ld.push_back(a + 1);
  Value lk = b.broadcast_in_dim(lengths, sq, ld);
  Value zero = b.constant(0, DType::I64);
  Value ends = b.reduce(b.select(b.compare(kcol, srow, "LE"), lk, zero), zero, {a + 1}, "stablehlo.add");
  // seg[j] = #{s : ends[s] <= j}
  Dims grid = s.outer;
  grid.push_back(n);
  grid.push_back(S);
  Value e = b.broadcast_in_dim(ends, grid, ld);
  Value j = b.iota(TensorType{DType::I64, grid}, a);
  s.seg = b.reduce(b.convert(b.compare(e, j, "LE"), DType::I64), zero, {a + 1}, "stablehlo.add");
  return s;
}

// data spread to [outer..., S, N, inner...] and the matching membership
// mask (position j of the axis is in segment s).
std::pair<Value, Value> spread_segments(hlo::Builder& b, Value data, const Segments& s) {
  int64_t a = s.axis, r = data.rank();
  Dims big(data.dims().begin(), data.dims().begin() + a);
  big.push_back(s.count);
  big.insert(big.end(), data.dims().begin() + a, data.dims().end());
  Dims dd = all_dims(a);
  for (int64_t d = a; d < r; ++d) dd.push_back(d + 1);
  Value spread = b.broadcast_in_dim(data, big, dd);
  Dims md = all_dims(a);
  md.push_back(a + 1);
  Value seg = b.broadcast_in_dim(s.seg, big, md);
  Value member = b.compare(seg, b.iota(TensorType{DType::I64, big}, a), "EQ");
  return {spread, member};
}

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe,
// initial): reduce is sum, mean, prod, max or min over each segment, seeded
// with `initial` (else the reduction's identity); an empty segment's mean
// is NaN without initial; max and min propagate NaN.
V segment_reduce(Context& cx) {
  auto& b = cx.b;
  Value data = cx.tensor(0);
  const std::string& red = cx.str(1);
  // ATen's segment_reduce_kernel, in its order: the axis, no indices, lengths
  // or offsets, the reduction; its kernel then dispatches on data's dtype.
  cx.dim(cx.integer_or(5, 0), data.rank());
  if (!cx.none(3)) cx.fail("segment_reduce(): indices based reduction is not supported yet.");
  if (cx.none(2) && cx.none(4)) cx.fail("segment_reduce(): Either lengths or offsets must be defined");
  if (red != "sum" && red != "mean" && red != "prod" && red != "max" && red != "min")
    cx.fail("unsupported reduction given! " + red);
  DType index_type = cx.tensor(cx.none(4) ? 2 : 4).dtype();
  if (index_type != DType::I32 && index_type != DType::I64)
    refuse_dtype(cx, index_type,
                 cx.none(4) ? "_segment_reduce_lengths_cpu_kernel1" : "_segment_reduce_offsets_cpu_kernel1");
  if (!hlo::is_floating(data.dtype())) refuse_dtype(cx, data.dtype(), "_segment_reduce_cpu");
  Segments s = segments(cx, data, 2, 4, 5);
  DType out = data.dtype(), t = hlo::opmath_type(out);
  int64_t a = s.axis;
  auto [spread, member] = spread_segments(b, b.convert(data, t), s);
  bool has_init = !cx.none(7);
  Value init = has_init ? b.convert(cx.as(7, out), t) : Value{};
  Value r;
  if (red == "sum" || red == "mean") {
    r = b.reduce(b.select(member, spread, b.constant(0, t)), b.constant(0, t), {a + 1}, "stablehlo.add");
    if (has_init) r = b.add(r, init);
    if (red == "mean") {
      Dims od = all_dims(a + 1);
      Value len = b.broadcast_in_dim(b.convert(s.lengths, t), r.dims(), od);
      Value empty = b.compare(len, b.constant(0, t), "EQ");
      Value m = b.select(b.compare(r, r, "NE"), r, b.div(r, len));
      r = b.select(empty,
                   has_init ? b.broadcast_to(init, r.dims()) : b.full(std::numeric_limits<double>::quiet_NaN(), r.type),
                   m);
    }
  } else if (red == "prod") {
    r = b.reduce(b.select(member, spread, b.constant(1, t)), b.constant(1, t), {a + 1}, "stablehlo.multiply");
    if (has_init) r = b.mul(r, init);
  } else {
    bool is_max = red == "max";
    double id = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    r = extremum(b, b.select(member, spread, b.constant(id, t)), {a + 1}, is_max);
    if (has_init) {
      Value i = b.broadcast_to(init, r.dims());
      Value m = is_max ? b.max(r, i) : b.min(r, i);
      m = b.select(b.compare(i, i, "NE"), i, m);
      r = b.select(b.compare(r, r, "NE"), r, m);
    }
  }
  return {b.convert(r, out)};
}

// v, one value per segment ([outer..., S, inner...], or [outer..., S]
// for the lengths), read at every position of the axis: data's shape, 0
// where a position has no segment.
Value at_positions(hlo::Builder& b, Value v, Value member, int64_t axis, DType t) {
  Value zero = b.constant(0, t);
  Value spread = b.broadcast_in_dim(
      b.convert(v, t), member.dims(), v.rank() == axis + 1 ? all_dims(axis + 1) : [&] {
        Dims d = all_dims(axis + 1);
        for (int64_t i = axis + 2; i < member.rank(); ++i) d.push_back(i);
        return d;
      }());
  return b.reduce(b.select(member, spread, zero), zero, {axis}, "stablehlo.add");
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets,
// axis, initial), by CPU's rules. sum: the segment's grad; mean: grad /
// length; max/min: the grad to each element equal to the result (or NaN),
// a positive one split among them; prod: grad * output / x, or grad times
// initial and the product of the others where x is 0 or NaN. Positions
// past the last segment get 0.
V segment_reduce_backward(Context& cx) {
  auto& b = cx.b;
  Value data = cx.tensor(2);
  const std::string& red = cx.str(3);
  // ATen's backward kernel, in its order: the axis, lengths or offsets, the
  // index dtype of offsets (else lengths) and data's dtype, then the reduction.
  int64_t given = cx.integer_or(6, 0);
  cx.dim(given, data.rank());
  if (cx.none(4) && cx.none(5)) cx.fail("segment_reduce(): Either lengths or offsets must be defined");
  bool by_offsets = !cx.none(5);
  Value index = cx.tensor(by_offsets ? 5 : 4);
  if (by_offsets && index.rank() == 0)
    cx.fail("Dimension specified as " + std::to_string(given) + " but tensor has no dimensions", ErrorKind::Index);
  if (index.dtype() != DType::I32 && index.dtype() != DType::I64)
    refuse_dtype(
        cx, index.dtype(),
        by_offsets ? "_segment_reduce_cpu_offsets_backward_kernel1" : "_segment_reduce_cpu_lengths_backward_kernel1");
  if (!hlo::is_floating(data.dtype())) refuse_dtype(cx, data.dtype(), "_segment_reduce_cpu");
  if (red != "sum" && red != "mean" && red != "prod" && red != "max" && red != "min")
    cx.fail("unsupported reduction given! " + red);
  Segments s = segments(cx, data, 4, 5, 6);
  DType out = data.dtype(), t = hlo::opmath_type(out);
  int64_t a = s.axis, n = data.dims()[a];
  if (s.count == 0 || data.type.numel() == 0) return {b.full(0, data.type)};
  Value x = b.convert(data, t);
  Value zero = b.constant(0, t), one = b.constant(1, t);
  auto [spread, member] = spread_segments(b, x, s);
  Value valid = b.reduce(member, b.constant(0, DType::Bool), {a}, "stablehlo.or");
  Value g = at_positions(b, cx.tensor(0), member, a, t);
  Value r;
  if (red == "sum") {
    r = g;
  } else if (red == "mean") {
    r = b.div(g, at_positions(b, s.lengths, member, a, t));
  } else if (red == "max" || red == "min") {
    Value o = at_positions(b, cx.tensor(1), member, a, t);
    Value hit = b.or_(b.compare(x, x, "NE"), b.compare(x, o, "EQ"));
    Value gi = b.select(hit, g, zero);
    Dims dd = all_dims(a);
    for (int64_t d = a; d < data.rank(); ++d) dd.push_back(d + 1);
    Value hits = b.and_(member, b.broadcast_in_dim(hit, member.dims(), dd));
    Value counter = b.reduce(b.convert(hits, t), zero, {a + 1}, "stablehlo.add");  // per segment
    Value c = at_positions(b, counter, member, a, t);
    Value split = b.and_(b.compare(c, b.constant(2, t), "GE"), b.compare(gi, zero, "GT"));
    r = b.select(split, b.div(gi, c), gi);
  } else {  // prod
    Value o = at_positions(b, cx.tensor(1), member, a, t);
    // excl[j] = initial * prod of x[k] over the other k of j's segment.
    Dims pair(data.dims().begin(), data.dims().begin() + a + 1);
    pair.push_back(n);
    pair.insert(pair.end(), data.dims().begin() + a + 1, data.dims().end());
    Dims kd = all_dims(a);
    for (int64_t d = a; d < data.rank(); ++d) kd.push_back(d + 1);
    Dims segj = all_dims(a + 1), segk = all_dims(a);
    segk.push_back(a + 1);
    Value xk = b.broadcast_in_dim(x, pair, kd);
    Value sj = b.broadcast_in_dim(s.seg, pair, segj);
    Value sk = b.broadcast_in_dim(s.seg, pair, segk);
    Value jk_same = b.compare(sj, sk, "EQ");
    Value ji = b.iota(TensorType{DType::I64, pair}, a);
    Value ki = b.iota(TensorType{DType::I64, pair}, a + 1);
    Value others = b.and_(jk_same, b.compare(ji, ki, "NE"));
    Value excl = b.reduce(b.select(others, xk, one), one, {a + 1}, "stablehlo.multiply");
    if (!cx.none(7)) excl = b.mul(excl, b.convert(cx.as(7, out), t));
    Value special = b.or_(b.compare(x, x, "NE"), b.compare(x, zero, "EQ"));
    r = b.select(special, b.mul(g, excl), b.div(b.mul(g, o), x));
  }
  return {b.convert(b.select(valid, r, zero), out)};
}

}  // namespace

std::vector<Entry> reduction_lowerings() {
  return {
      {"aten::sum", sum, Traits().set_shape_generic()},
      {"aten::sum.dim_IntList", sum_dim, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::mean", mean, Traits().set_shape_generic()},
      {"aten::mean.dim", mean_dim, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::prod", prod, Traits().set_shape_generic()},
      {"aten::prod.dim_int", prod_dim, Traits().set_overlap_allowed().set_shape_generic()},
      {"aten::amax", amax, Traits().set_overlap_allowed().set_out_same_dtype().set_shape_generic()},
      {"aten::amin", amin, Traits().set_overlap_allowed().set_out_same_dtype().set_shape_generic()},
      {"aten::max", max_all},
      {"aten::min", min_all},
      {"aten::max.dim", max_dim, Traits().set_out_same_dtype()},
      {"aten::min.dim", min_dim, Traits().set_out_same_dtype()},
      {"aten::argmax", argmax, Traits().set_out_same_dtype().set_partial_overlap_allowed()},
      {"aten::argmin", argmin, Traits().set_out_same_dtype().set_partial_overlap_allowed()},
      {"aten::var.correction", var},
      {"aten::std.correction", std_},
      {"aten::var_mean.correction", var_mean},
      {"aten::std_mean.correction", std_mean},
      {"aten::any", any, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::any.dim", any_dim, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::any.dims", any_dim, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::all", all, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::all.dim", all_dim, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::all.dims", all_dim, Traits().set_out_bool_or_byte().set_shape_generic()},
      {"aten::logsumexp", logsumexp},
      {"aten::linalg_vector_norm", linalg_vector_norm, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::cumsum", cumsum, Traits().set_shape_generic()},
      {"aten::cumprod", cumprod, Traits().set_shape_generic()},
      {"aten::_cummax_helper", cummax_helper},
      {"aten::_cummin_helper", cummin_helper},
      {"aten::_logcumsumexp", logcumsumexp},
      {"aten::nansum", nansum},
      {"aten::count_nonzero", count_nonzero, Traits().set_out_same_dtype()},
      {"aten::count_nonzero.dim_IntList", count_nonzero, Traits().set_out_same_dtype()},
      {"aten::aminmax", aminmax, Traits().set_out_same_dtype()},
      {"aten::trace", trace},
      {"aten::norm.Scalar", norm_scalar, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::norm.ScalarOpt_dtype", norm_scalaropt_dtype, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::norm.ScalarOpt_dim", norm_scalaropt_dim, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::norm.ScalarOpt_dim_dtype", norm_scalaropt_dim_dtype, Traits().set_fixed(1, kNormFixedOrders)},
      {"aten::renorm", renorm},
      {"aten::segment_reduce", segment_reduce},
      {"aten::_segment_reduce_backward", segment_reduce_backward},
  };
}

}  // namespace torch_pjrt::lowering
