// Random number ops. Every draw comes from stablehlo.rng_bit_generator on the
// generator's ui64[2] state argument, so the numbers depend only on (state,
// shape): the same state gives the same numbers. The glue advances the
// generator between calls; a lowering that draws twice chains the state the
// first draw returns.
// native_dropout's backward, which draws nothing, sits beside its forward.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// ---- helpers

// An exact integer constant (no trip through double).
Value int_constant(hlo::Builder& b, std::string digits, DType t) {
  TensorType type{t, {}};
  return b.op("stablehlo.constant", {}, type, "value = dense<" + digits + "> : " + type.str());
}

// Random bits of dtype `bits` (ui32 or ui64) shaped `dims`; advances `state`.
Value random_bits(hlo::Builder& b, Value& state, const Dims& dims, DType bits) {
  TensorType type{bits, dims};
  int64_t n = type.numel();
  if (n == 0) return b.full(0, type);
  auto [next, r] = b.rng_bit_generator(state, {bits, {n}});
  state = next;
  return b.reshape(r, dims);
}

}  // namespace

int float_digits(DType t) {
  if (hlo::byte_size(t) == 8) return 53;
  if (hlo::byte_size(t) == 4) return 24;
  return t == DType::BF16 ? 8 : 11;
}

Value uniform01(hlo::Builder& b, Value& state, const Dims& dims, DType t, int digits) {
  DType bits = digits > 32 ? DType::U64 : DType::U32;
  Value r = random_bits(b, state, dims, bits);
  int64_t width = hlo::byte_size(bits) * 8;
  r = b.binary("stablehlo.shift_right_logical", r, b.constant(static_cast<double>(width - digits), bits));
  return b.mul(b.convert(r, t), b.constant(std::ldexp(1.0, -digits), t));
}

namespace {

// The float dtype a random op on `self` fills; other tensors are refused as
// CPU's AT_DISPATCH for `kernel` does (complex too unless `complex_ok`).
DType float_self(Context& cx, const Value& self, const char* kernel = "check_uniform_bounds", bool complex_ok = false) {
  if (!hlo::is_floating(self.dtype()) && !(complex_ok && hlo::is_complex(self.dtype())))
    cx.fail("\"" + std::string(kernel) + "\" not implemented for '" + std::string(hlo::scalar_type_name(self.dtype())) +
                "'",
            ErrorKind::NotImplemented);
  return self.dtype();
}

// CPU's check on a Scalar argument, made at run time (Scalars are program
// arguments): raises RuntimeError `message` unless `arg(i) <ok> bound`
// (NaN fails, as CPU's TORCH_CHECK(x >= 0) does).
void check_scalar(Context& cx, size_t i, const char* ok, double bound, const std::string& message) {
  auto& b = cx.b;
  cx.check(b.not_(b.compare(cx.as(i, DType::F64), b.constant(bound, DType::F64), ok)), message, ErrorKind::Runtime);
}

bool is_empty(const Value& v) {
  for (int64_t d : v.dims())
    if (d == 0) return true;
  return false;
}

// A real draw `draw(dims, real dtype)` of self's dtype t: for complex t both
// parts are drawn (CPU fills view_as_real(self)).
template <typename F>
Value draw_parts(hlo::Builder& b, DType t, const Dims& dims, F draw) {
  if (!hlo::is_complex(t)) return draw(dims, t);
  DType r = hlo::real_type(t);
  Value re = draw(dims, r);
  Value im = draw(dims, r);
  return b.complex(re, im);
}

// ---- dropout

// native_dropout(input, p, train?) + trailing rng -> (output, mask):
// mask ~ Bernoulli(1 - p), output = input * mask / (1 - p) (0 when p == 1).
// As on CPU: an empty input in training gives a mask of its own dtype, and a
// complex input is scaled like a real one.
V native_dropout(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  TensorType mask_type{DType::Bool, in.dims()};
  if (!cx.none(2) && !cx.flag(2)) return {in, b.full(1, mask_type)};
  if (is_empty(in)) return {in, in};
  check_scalar(cx, 1, "LE", 1, "bernoulli_ expects p to be in [0, 1]");
  check_scalar(cx, 1, "GE", 0, "bernoulli_ expects p to be in [0, 1]");
  DType out = in.dtype();
  if (!hlo::is_floating(out) && !hlo::is_complex(out))
    cx.fail("result type Float can't be cast to the desired output type " + std::string(hlo::scalar_type_name(out)));
  DType t = hlo::opmath_type(hlo::is_complex(out) ? hlo::real_type(out) : out);
  Value state = cx.rng(3);
  Value u = uniform01(b, state, in.dims(), t, float_digits(t));
  Value p1m = b.sub(b.constant(1, DType::F64), cx.as(1, DType::F64));
  Value zero = b.constant(0, DType::F64);
  Value scale = b.select(b.compare(p1m, zero, "EQ"), zero, b.div(b.constant(1, DType::F64), p1m));
  Value keep = b.compare(u, b.convert(p1m, t), "LT");
  DType ct = hlo::is_complex(out) ? out : t;
  Value y = b.mul(b.mul(b.convert(in, ct), b.convert(keep, ct)), b.convert(scale, ct));
  return {b.convert(y, out), keep};
}

// native_dropout_backward(grad_output, mask, scale) = grad * mask * scale
V native_dropout_backward(Context& cx) {
  auto& b = cx.b;
  Value g = cx.tensor(0);
  DType t = hlo::opmath_type(g.dtype());
  Value r = b.mul(b.mul(b.convert(g, t), cx.as(1, t)), cx.as(2, t));
  return {b.convert(r, g.dtype())};
}

// ---- continuous distributions

// uniform(self, from, to, *, generator) -> from + (to - from) * U[0, 1)
// (both parts of a complex self).
V uniform(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  DType out = float_self(cx, self, "check_uniform_bounds", true);
  cx.check(b.compare(cx.as(1, DType::F64), cx.as(2, DType::F64), "GT"),
           "uniform_ expects to return a [from, to) range, but found from > to", ErrorKind::Runtime);
  if (is_empty(self)) return {self};
  Value state = cx.rng(3);
  Value y = draw_parts(b, out, self.dims(), [&](const Dims& dims, DType r) {
    DType t = hlo::opmath_type(r);
    Value u = uniform01(b, state, dims, t, float_digits(r));
    Value from = cx.as(1, t), to = cx.as(2, t);
    return b.convert(b.add(b.mul(u, b.sub(to, from)), from), r);
  });
  return {y};
}

// Standard normal draws via Box-Muller: sqrt(-2 log(1 - u1)) * cos(2 pi u2).
Value standard_normal(hlo::Builder& b, Value& state, const Dims& dims, DType t) {
  int digits = float_digits(t);
  Value u1 = uniform01(b, state, dims, t, digits);
  Value u2 = uniform01(b, state, dims, t, digits);
  Value radius = b.sqrt(b.mul(b.constant(-2, t), b.unary("stablehlo.log_plus_one", b.neg(u1))));
  return b.mul(radius, b.unary("stablehlo.cosine", b.mul(b.constant(2 * M_PI, t), u2)));
}

// normal_functional(self, mean, std, *, generator): mean + std * N(0, 1);
// of a complex self, each part gets mean + std / sqrt(2) * N(0, 1) as on CPU.
V normal_functional(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 2, "GE", 0, "normal expects std >= 0.0");
  if (is_empty(self)) return {self};
  DType out = float_self(cx, self, "normal_kernel_cpu", true);
  double k = hlo::is_complex(out) ? 1 / std::sqrt(2.0) : 1;
  Value state = cx.rng(3);
  Value y = draw_parts(b, out, self.dims(), [&](const Dims& dims, DType r) {
    DType t = hlo::opmath_type(r);
    Value z = standard_normal(b, state, dims, t);
    Value s = b.mul(cx.as(2, t), b.constant(k, t));
    return b.convert(b.add(cx.as(1, t), b.mul(s, z)), r);
  });
  return {y};
}

// normal.Tensor_Tensor / Tensor_float / float_Tensor(mean, std, *, generator):
// mean + std * N(0, 1) over the broadcast shape, in the tensor mean's dtype
// (std's when mean is a number). A complex output draws both parts with
// std / sqrt(2), as CPU's normal_(0, std) then add_(mean) does.
V normal_tensors(Context& cx) {
  auto& b = cx.b;
  bool mean_tensor = cx.arg(0).kind == Arg::Kind::Tensor, std_tensor = cx.arg(1).kind == Arg::Kind::Tensor;
  Value mean = cx.tensor(0), std = cx.tensor(1);
  if (!std_tensor) check_scalar(cx, 1, "GE", 0, "normal expects std >= 0.0");
  const Value& self = mean_tensor ? mean : std;
  Dims dims = mean_tensor && std_tensor ? hlo::broadcast_shapes(mean.dims(), std.dims())
                                        : (mean_tensor ? mean.dims() : std.dims());
  bool empty = false;
  for (int64_t d : dims) empty = empty || d == 0;
  if (empty && !std_tensor) return {b.broadcast_to(self, dims)};
  DType out = float_self(cx, self, "normal_kernel_cpu", true);
  if (std_tensor) {
    if (hlo::is_complex(std.dtype())) cx.fail("normal expects standard deviation to be non-complex");
    if (!empty) {
      Value bad = b.compare(b.convert(std, DType::F64), b.constant(0, DType::F64), "GE");
      Value any_bad = b.reduce(
          b.not_(bad), b.constant(0, DType::Bool),
          [&] {
            Dims all;
            for (int64_t d = 0; d < std.rank(); ++d) all.push_back(d);
            return all;
          }(),
          "stablehlo.or");
      cx.check(any_bad, "normal expects all elements of std >= 0.0", ErrorKind::Runtime);
    }
  }
  if (empty) return {b.broadcast_to(b.convert(self, out), dims)};
  bool cplx = hlo::is_complex(out);
  DType r = cplx ? hlo::real_type(out) : out, t = hlo::opmath_type(r);
  Value state = cx.rng(2);
  // As on CPU: the draw is rounded to the output dtype, then scaled and shifted.
  auto z_of = [&](const Dims& d, DType) { return b.convert(b.convert(standard_normal(b, state, d, t), r), t); };
  Value s = b.convert(b.convert(std, r), t);
  if (!cplx) {
    Value m = b.convert(b.convert(mean, out), t);
    return {b.broadcast_to(b.convert(b.add(b.mul(z_of(dims, r), s), m), out), dims)};
  }
  s = b.mul(s, b.constant(1 / std::sqrt(2.0), t));
  Value re = b.convert(b.mul(z_of(dims, r), s), r), im = b.convert(b.mul(z_of(dims, r), s), r);
  Value y = b.add(b.broadcast_to(b.complex(re, im), dims), b.convert(mean, out));
  return {b.broadcast_to(y, dims)};
}

// cauchy(self, median, sigma, *, generator) -> median + sigma * tan(pi (u - 1/2))
V cauchy(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 2, "GT", 0, "cauchy_ expects sigma > 0.0");
  if (is_empty(self)) return {self};
  if (!hlo::is_floating(self.dtype()))
    cx.fail(
        "Cauchy distribution is a continuous probability distribution. dtype must be a floating point but you "
        "specified " +
        std::string(hlo::cpp_type_name(self.dtype())));
  DType out = self.dtype(), t = hlo::opmath_type(out);
  Value state = cx.rng(3);
  Value u = uniform01(b, state, self.dims(), t, float_digits(t));
  Value angle = b.mul(b.constant(M_PI, t), b.sub(u, b.constant(0.5, t)));
  Value tan = b.div(b.unary("stablehlo.sine", angle), b.unary("stablehlo.cosine", angle));
  return {b.convert(b.add(cx.as(1, t), b.mul(cx.as(2, t), tan)), out)};
}

// log_normal(self, mean, std, *, generator) -> exp(mean + std * N(0, 1))
V log_normal(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 2, "GT", 0, "log_normal_ expects std > 0.0");
  if (is_empty(self)) return {self};
  DType out = float_self(cx, self, "log_normal_cpu"), t = hlo::opmath_type(out);
  Value state = cx.rng(3);
  Value z = standard_normal(b, state, self.dims(), t);
  return {b.convert(b.exp(b.add(cx.as(1, t), b.mul(cx.as(2, t), z))), out)};
}

// geometric(self, p, *, generator) -> ceil(log(1 - u) / log1p(-p)): the
// number of Bernoulli(p) trials up to the first success, in self's dtype.
V geometric(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 1, "GT", 0, "geometric_ expects p to be in (0, 1)");
  check_scalar(cx, 1, "LT", 1, "geometric_ expects p to be in (0, 1)");
  if (is_empty(self)) return {self};
  if (hlo::is_complex(self.dtype()) || hlo::category(self.dtype()) == hlo::Category::Bool)
    cx.fail("\"geometric_cpu\" not implemented for '" + std::string(hlo::scalar_type_name(self.dtype())) + "'",
            ErrorKind::NotImplemented);
  DType t = hlo::opmath_type(float_type(self.dtype()));
  Value state = cx.rng(2);
  Value u = uniform01(b, state, self.dims(), t, float_digits(t));
  Value num = b.unary("stablehlo.log_plus_one", b.neg(u));
  Value den = b.unary("stablehlo.log_plus_one", b.neg(cx.as(1, t)));
  return {b.convert(b.unary("stablehlo.ceil", b.div(num, den)), self.dtype())};
}

// multinomial(self, num_samples, replacement, *, generator): int64 category
// indices drawn from the rows of self (non-negative weights). Without
// replacement, as on CPU: the top num_samples of p / q with q ~ Exp(1).
// With replacement: for each draw u ~ U[0, 1), the number of normalised
// cumulative weights <= u.
V multinomial(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  int64_t samples = cx.integer(1);
  bool replacement = cx.flag_or(2, false);
  if (self.rank() != 1 && self.rank() != 2) cx.fail("prob_dist must be 1 or 2 dim");
  if (!hlo::is_floating(self.dtype()))
    cx.fail("multinomial only supports floating-point dtypes for input, got: " +
            std::string(hlo::dtype_name(self.dtype())));
  if (samples <= 0) cx.fail("cannot sample n_sample <= 0 samples");
  int64_t n = self.dims().back(), rows = self.rank() == 2 ? self.dims()[0] : 1;
  if (n == 0) cx.fail("number of categories cannot exceed 2^24");
  if (!replacement && samples > n) cx.fail("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  DType t = hlo::opmath_type(self.dtype());
  Dims out = self.rank() == 2 ? Dims{rows, samples} : Dims{samples};
  Value p = b.reshape(b.convert(self, t), {rows, n});
  // CPU's checks of the weights, at run time.
  Value zero = b.constant(0, t), inf = b.constant(std::numeric_limits<double>::infinity(), t);
  Value invalid = b.or_(b.or_(b.compare(p, zero, "LT"), b.compare(p, p, "NE")), b.compare(b.abs(p), inf, "EQ"));
  cx.check(any_true(b, invalid), "probability tensor contains either `inf`, `nan` or element < 0", ErrorKind::Runtime);
  Value row_sum = b.reduce(p, zero, {1}, "stablehlo.add");
  cx.check(any_true(b, b.compare(row_sum, zero, "LE")), "invalid multinomial distribution (sum of probabilities <= 0)",
           ErrorKind::Runtime);
  Value state = cx.rng(3);
  if (!replacement) {
    Value u = uniform01(b, state, {rows, n}, t, float_digits(t));
    Value q = b.neg(b.unary("stablehlo.log_plus_one", b.neg(u)));
    // Descending by key (a 0 / 0 key, NaN, first), stable: torch.sort's.
    Value idx = b.slice(sort_along(b, b.div(p, q), 1, true).second, {0, 0}, {rows, samples}, {1, 1});
    return {b.reshape(idx, out)};
  }
  TensorType tri{DType::I64, {n, n}};
  Value upper = b.convert(b.compare(b.iota(tri, 0), b.iota(tri, 1), "LE"), t);
  Value cdf = b.dot_general(p, upper, {}, {}, {1}, {0}, t);
  Value total = b.reshape(b.slice(cdf, {0, n - 1}, {rows, n}, {1, 1}), {rows});
  cdf = b.div(cdf, b.broadcast_in_dim(total, {rows, n}, {0}));
  Value u = uniform01(b, state, {rows, samples}, t, float_digits(t));
  Dims grid{rows, samples, n};
  Value le = b.compare(b.broadcast_in_dim(cdf, grid, {0, 2}), b.broadcast_in_dim(u, grid, {0, 1}), "LE");
  Value k = b.reduce(b.convert(le, DType::I64), b.constant(0, DType::I64), {2}, "stablehlo.add");
  k = b.min(k, b.constant(n - 1, DType::I64));
  return {b.reshape(k, out)};
}

// exponential(self, lambd, *, generator) -> -log1p(-u) / lambd
V exponential(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 1, "GT", 0, "exponential_ expects lambda > 0.0");
  if (is_empty(self)) return {self};
  if (!hlo::is_floating(self.dtype()))
    cx.fail(
        "Exponential distribution is a continuous probability distribution. dtype must be a floating point but "
        "you specified " +
        std::string(hlo::scalar_type_name(self.dtype())));
  DType out = self.dtype(), t = hlo::opmath_type(out);
  Value state = cx.rng(2);
  Value u = uniform01(b, state, self.dims(), t, float_digits(t));
  Value y = b.div(b.neg(b.unary("stablehlo.log_plus_one", b.neg(u))), cx.as(1, t));
  return {b.convert(y, out)};
}

// ---- Bernoulli

// bernoulli.p(self, p, *, generator): 1 with probability p, in self's dtype.
V bernoulli_p(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  check_scalar(cx, 1, "GE", 0, "bernoulli_ expects p to be in [0, 1]");
  check_scalar(cx, 1, "LE", 1, "bernoulli_ expects p to be in [0, 1]");
  if (is_empty(self)) return {self};
  if (hlo::is_complex(self.dtype()))
    cx.fail("\"bernoulli_scalar_cpu_\" not implemented for '" + std::string(hlo::scalar_type_name(self.dtype())) + "'",
            ErrorKind::NotImplemented);
  Value state = cx.rng(2);
  Value u = uniform01(b, state, self.dims(), DType::F64, 53);
  return {b.convert(b.compare(u, cx.as(1, DType::F64), "LT"), self.dtype())};
}

// bernoulli(self, *, generator): self holds the probabilities.
V bernoulli(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(0);
  if (is_empty(self)) return {self};
  if (hlo::is_complex(self.dtype()))
    cx.fail(
        "\"bernoulli_tensor_cpu_self_\" not implemented for '" + std::string(hlo::scalar_type_name(self.dtype())) + "'",
        ErrorKind::NotImplemented);
  if (!hlo::is_floating(self.dtype()))
    cx.fail(
        "\"bernoulli_tensor_cpu_p_\" not implemented for '" + std::string(hlo::scalar_type_name(self.dtype())) + "'",
        ErrorKind::NotImplemented);
  DType t = hlo::opmath_type(float_type(self.dtype()));
  Value state = cx.rng(1);
  Value u = uniform01(b, state, self.dims(), t, float_digits(t));
  return {b.convert(b.compare(u, b.convert(self, t), "LT"), self.dtype())};
}

// ---- integers

// Uniform integers from + [0, range) in self's dtype; range 0 means 2^64.
Value random_int(Context& cx, const Value& self, int64_t from, uint64_t range, Value state) {
  auto& b = cx.b;
  DType bits = range != 0 && range <= (uint64_t{1} << 32) ? DType::U32 : DType::U64;
  Value r = random_bits(b, state, self.dims(), bits);
  if (range != 0 && range != (uint64_t{1} << 32))
    r = b.binary("stablehlo.remainder", r, int_constant(b, std::to_string(range), bits));
  Value v = bits == DType::U32 ? b.convert(r, DType::I64) : b.bitcast_convert(r, DType::I64);
  v = b.add(v, int_constant(b, std::to_string(from), DType::I64));
  return b.convert(v, self.dtype());
}

// The largest value random_() draws for self's dtype when no bound is given.
uint64_t default_to_inc(const Value& self) {
  DType t = self.dtype();
  if (hlo::is_floating(t)) return uint64_t{1} << float_digits(t);
  if (hlo::category(t) == hlo::Category::Bool) return 1;
  int bits = static_cast<int>(hlo::byte_size(t) * 8) - (hlo::is_unsigned(t) ? 0 : 1);
  return bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits) - 1;
}

// [from, to) when `to` is given, else [from, default_to_inc] as PyTorch does.
Value random_range(Context& cx, int64_t from, bool has_to, int64_t to, Value state) {
  Value self = cx.tensor(0);
  DType dt = self.dtype();
  if (hlo::is_complex(dt)) {
    if (!has_to && from == 0 && cx.op() == "aten::random")
      cx.fail("\"random_kernel_cpu\" not implemented for '" + std::string(hlo::scalar_type_name(dt)) + "'",
              ErrorKind::NotImplemented);
    cx.fail(has_to ? "check_random_bounds handles only integral, floating-point and boolean types"
                   : "random_from_to_impl handles only integral, floating-point and boolean types");
  }
  if (!hlo::is_floating(dt)) {
    // CPU's bounds for integral dtypes: [min, max] of the dtype.
    int bits = hlo::category(dt) == hlo::Category::Bool ? 1 : static_cast<int>(hlo::byte_size(dt) * 8);
    bool uns = hlo::category(dt) == hlo::Category::Bool || hlo::is_unsigned(dt);
    double lo = uns ? 0 : -std::ldexp(1.0, bits - 1),
           hi = uns ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
    std::string name(hlo::cpp_type_name(dt));
    if (has_to || from != 0) {
      if (static_cast<double>(from) < lo || static_cast<double>(from) > hi)
        cx.fail("from is out of bounds for " + name);
      if (has_to && (static_cast<double>(to) - 1 < lo || static_cast<double>(to) - 1 > hi))
        cx.fail("to - 1 is out of bounds for " + name);
    }
  }
  uint64_t range;
  if (has_to) {
    if (from >= to)
      cx.fail("random_ expects 'from' to be less than 'to', but got from=" + std::to_string(from) +
              " >= to_exclusive=" + std::to_string(to));
    range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  } else {
    range = default_to_inc(self) - static_cast<uint64_t>(from) + 1;  // wraps to 0 for the full 64-bit range
  }
  return random_int(cx, self, from, range, state);
}

// random.from(self, from, to?, *, generator)
V random_from(Context& cx) { return {random_range(cx, cx.integer(1), !cx.none(2), cx.integer_or(2, 0), cx.rng(3))}; }
// random.to(self, to, *, generator)
V random_to(Context& cx) { return {random_range(cx, 0, true, cx.integer(1), cx.rng(2))}; }
// random(self, *, generator)
V random_default(Context& cx) { return {random_range(cx, 0, false, 0, cx.rng(1))}; }

}  // namespace

std::vector<Entry> random_lowerings() {
  return {
      {"aten::native_dropout", native_dropout, Traits().set_implicit_rng().set_partial_overlap_allowed()},
      {"aten::native_dropout_backward", native_dropout_backward, Traits().set_out_same_dtype()},
      {"aten::uniform", uniform},
      {"aten::normal_functional", normal_functional, Traits().set_in_place("aten::normal_")},
      {"aten::exponential", exponential},
      {"aten::normal.Tensor_Tensor", normal_tensors},
      {"aten::normal.Tensor_float", normal_tensors},
      {"aten::normal.float_Tensor", normal_tensors},
      {"aten::cauchy", cauchy},
      {"aten::log_normal", log_normal},
      {"aten::geometric", geometric},
      {"aten::multinomial", multinomial, Traits().set_out_same_dtype()},
      {"aten::bernoulli.p", bernoulli_p, Traits().set_in_place("aten::bernoulli_.float")},
      {"aten::bernoulli", bernoulli},
      {"aten::random.from", random_from},
      {"aten::random.to", random_to},
      {"aten::random", random_default},
  };
}

}  // namespace torch_pjrt::lowering
