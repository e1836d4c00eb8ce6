// Special functions: polygamma, zeta, the modified Bessel functions i0/i1
// (and their exponentially scaled forms). Each follows the algorithm and
// coefficient tables of ATen's CPU kernels (Cephes series and Chebyshev
// expansions, aten/src/ATen/native/Math.h) so that results agree with CPU to
// float precision. Inputs are computed in their opmath type (ints promote to
// float32, float16/bfloat16 compute in float32 and round once).
#include <cmath>
#include <limits>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;
using Coeffs = std::vector<double>;

// Rank-0 constant of x's dtype (broadcasts in every builder binary op).
Value k(hlo::Builder& b, double v, const Value& like) { return b.constant(v, like.dtype()); }

// Argument i in the dtype its float function computes in, and the dtype of the result.
struct FloatArg {
  Value x;
  DType out;
};
FloatArg float_arg(Context& cx, size_t i) {
  Value x = cx.tensor(i);
  DType out = float_type(x.dtype());
  return {cx.b.convert(x, hlo::opmath_type(out)), out};
}

// A unary special function given as a builder of its opmath formula.
template <typename F>
V unary_special(Context& cx, F f) {
  auto [x, out] = float_arg(cx, 0);
  return {cx.b.convert(f(cx.b, x), out)};
}

// Cephes chbevl: Clenshaw recurrence for a Chebyshev series.
Value chbevl(hlo::Builder& b, Value x, const Coeffs& c) {
  Value b0 = k(b, c[0], x), b1 = k(b, 0, x), b2 = k(b, 0, x);
  for (size_t i = 1; i < c.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add(b.sub(b.mul(x, b1), b2), k(b, c[i], x));
  }
  return b.mul(k(b, 0.5, x), b.sub(b0, b2));
}

Value is_neg(hlo::Builder& b, Value x) { return b.compare(x, k(b, 0, x), "LT"); }
Value is_nan(hlo::Builder& b, Value x) { return b.compare(x, x, "NE"); }
Value any(hlo::Builder& b, Value pred) {
  Dims all;
  for (int64_t i = 0; i < pred.rank(); ++i) all.push_back(i);
  return b.reduce(pred, b.constant(0, DType::Bool), all, "stablehlo.or");
}

// ---- modified Bessel functions of the first kind (calc_i0, calc_i0e, calc_i1, calc_i1e)

// exp(-x) I0(x) on [0, 8] in y = x / 2 - 2.
const Coeffs kI0eA = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17,  -2.43127984654795469359E-16, 1.71539128555513303061E-15,
    -1.16853328779934516808E-14, 7.67618549860493561688E-14,  -4.85644678311192946090E-13, 2.95505266312963983461E-12,
    -1.72682629144155570723E-11, 9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,   -2.67079385394061173391E-7,  1.11738753912010371815E-6,
    -4.41673835845875056359E-6,  1.64484480707288970893E-5,   -5.75419501008210370398E-5,  1.88502885095841655729E-4,
    -5.76375574538582365885E-4,  1.63947561694133579842E-3,   -4.32430999505057594430E-3,  1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,   -9.49010970480476444210E-2,  1.71620901522208775349E-1,
    -3.04682672343198398683E-1,  6.76795274409476084995E-1};
// exp(-x) sqrt(x) I0(x) on (8, inf) in y = 32 / x - 2.
const Coeffs kI0eB = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,  3.46122286769746109310E-17,
    -2.82762398051658348494E-16, -3.42548561967721913462E-16, 1.77256013305652638360E-15,  3.81168066935262242075E-15,
    -9.55484669882830764870E-15, -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11, -3.14991652796324136454E-11,
    1.18891471078464383424E-11,  4.94060238822496958910E-10,  3.39623202570838634515E-9,   2.26666899049817806459E-8,
    2.04891858946906374183E-7,   2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
// exp(-x) I1(x) / x on [0, 8]. ATen's float kernels use the last 17 terms.
const Coeffs kI1eA = {
    9.38153738649577178388E-9,  -4.44505912879632808065E-8, 2.00329475355213526229E-7,  -8.56872026469545474066E-7,
    3.47025130813767847674E-6,  -1.32731636560394358279E-5, 4.78156510755005422638E-5,  -1.61760815825896745588E-4,
    5.12285956168575772895E-4,  -1.51357245063125314899E-3, 4.15642294431288815669E-3,  -1.05640848946261981558E-2,
    2.47264490306265168283E-2,  -5.29459812080949914269E-2, 1.02643658689847095384E-1,  -1.76416518357834055153E-1,
    2.52587186443633654823E-1};
// exp(-x) sqrt(x) I1(x) on (8, inf). ATen's float kernels use the last 7 terms.
const Coeffs kI1eB = {-3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
                      -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
                      7.78576235018280120474E-1};

// The scaled Chebyshev part shared by the four functions: for |x| <= 8 the
// series in |x|/2 - 2 (times |x| when `times_x`), otherwise the series in
// 32/|x| - 2 over sqrt(|x|). `scaled` leaves out the exp(|x|) factor; `odd`
// gives the result x's sign.
Value bessel_i(hlo::Builder& b, Value x, const Coeffs& a, const Coeffs& bc, bool times_x, bool scaled, bool odd) {
  Value t = b.abs(x);
  Value small = chbevl(b, b.sub(b.div(t, k(b, 2, t)), k(b, 2, t)), a);
  if (times_x) small = b.mul(small, t);
  Value large = b.div(chbevl(b, b.sub(b.div(k(b, 32, t), t), k(b, 2, t)), bc), b.sqrt(t));
  if (!scaled) {
    small = b.mul(b.exp(t), small);
    large = b.div(b.mul(b.exp(t), chbevl(b, b.sub(b.div(k(b, 32, t), t), k(b, 2, t)), bc)), b.sqrt(t));
  }
  Value r = b.select(b.compare(t, k(b, 8, t), "LE"), small, large);
  return odd ? b.select(is_neg(b, x), b.neg(r), r) : r;
}

V i0(Context& cx) {
  return unary_special(cx, [](hlo::Builder& b, Value x) { return bessel_i(b, x, kI0eA, kI0eB, false, false, false); });
}
V special_i0e(Context& cx) {
  return unary_special(cx, [](hlo::Builder& b, Value x) { return bessel_i(b, x, kI0eA, kI0eB, false, true, false); });
}
V special_i1(Context& cx) {
  return unary_special(cx, [](hlo::Builder& b, Value x) { return bessel_i(b, x, kI1eA, kI1eB, true, false, true); });
}
V special_i1e(Context& cx) {
  return unary_special(cx, [](hlo::Builder& b, Value x) { return bessel_i(b, x, kI1eA, kI1eB, true, true, true); });
}

// ---- zeta and polygamma

// Hurwitz zeta(x, q) as Cephes computes it: q^-x plus the terms (q + i)^-x
// until i >= 9 and q + i > 9 (a stablehlo.while over the elements still
// summing), then 12 Euler-Maclaurin correction terms. Each element stops
// early once a term falls below machine epsilon of the sum, as on CPU.
Value zeta(hlo::Builder& b, Value x, Value q) {
  Dims dims = hlo::broadcast_shapes(x.dims(), q.dims());
  x = b.broadcast_to(x, dims);
  q = b.broadcast_to(q, dims);
  const double machep = 1.11022302462515654042E-16;
  Value zero = k(b, 0, q), one = k(b, 1, q), inf = k(b, std::numeric_limits<double>::infinity(), q);
  Value nan = k(b, std::numeric_limits<double>::quiet_NaN(), q);
  Value floor_q = b.unary("stablehlo.floor", q);
  Value q_nonpos = b.compare(q, zero, "LE");
  // Results that need no series, in Cephes' order of tests.
  Value special_val = b.select(b.compare(x, one, "EQ"), b.full(INFINITY, x.type), b.full(NAN, x.type));
  Value pole = b.and_(q_nonpos, b.compare(q, floor_q, "EQ"));
  Value bad_x = b.and_(q_nonpos, b.compare(x, b.unary("stablehlo.floor", x), "NE"));
  Value x_le_one = b.compare(x, one, "LE");
  Value special = b.or_(b.or_(x_le_one, pole), bad_x);
  special_val = b.select(x_le_one, special_val, b.select(pole, b.broadcast_to(inf, dims), b.broadcast_to(nan, dims)));
  special = b.or_(special, is_nan(b, q));

  Value neg_x = b.neg(x);
  Value s0 = b.binary("stablehlo.power", q, neg_x);
  Value i0 = b.constant(0, DType::I32);
  Value f = b.full(0, TensorType{DType::Bool, dims});
  TensorType ft = q.type;
  TensorType bt{DType::Bool, dims};
  TensorType it{DType::I32, {}};
  auto active = [&](hlo::Builder& bb, Value i, Value a, Value done) {
    Value more = bb.or_(bb.compare(i, bb.constant(9, DType::I32), "LT"), bb.compare(a, k(bb, 9, a), "LE"));
    return bb.and_(bb.and_(more, bb.not_(done)), bb.not_(special));
  };
  // State: i, a, b, s, done.
  auto loop = b.op_multi(
      "stablehlo.while", {i0, q, b.full(0, ft), s0, f}, {it, ft, ft, ft, bt}, "",
      {{{it, ft, ft, ft, bt},
        [&](hlo::Builder& bb, const std::vector<Value>& st) {
          return std::vector<Value>{any(bb, active(bb, st[0], st[1], st[4]))};
        }},
       {{it, ft, ft, ft, bt}, [&](hlo::Builder& bb, const std::vector<Value>& st) {
          Value go = active(bb, st[0], st[1], st[4]);
          Value a = bb.add(st[1], k(bb, 1, st[1]));
          Value t = bb.binary("stablehlo.power", a, neg_x);
          Value s = bb.add(st[3], t);
          Value m = bb.mul(k(bb, machep, s), s);
          Value conv = bb.and_(bb.compare(bb.neg(m), t, "LT"), bb.compare(t, m, "LT"));
          return std::vector<Value>{bb.add(st[0], bb.constant(1, DType::I32)), bb.select(go, a, st[1]),
                                    bb.select(go, t, st[2]), bb.select(go, s, st[3]),
                                    bb.or_(st[4], bb.and_(go, conv))};
        }}});
  Value w = loop[1], t = loop[2], s = loop[3], done = loop[4];
  static const double A[] = {12.0,
                             -720.0,
                             30240.0,
                             -1209600.0,
                             47900160.0,
                             -1.8924375803183791606e9,
                             7.47242496e10,
                             -2.950130727918164224e12,
                             1.1646782814350067249e14,
                             -4.5979787224074726105e15,
                             1.8152105401943546773e17,
                             -7.1661652561756670113e18};
  s = b.add(s, b.div(b.mul(t, w), b.sub(x, one)));
  s = b.sub(s, b.mul(k(b, 0.5, t), t));
  // Cephes keeps a = x (x+1) ... and b = w^-x / w^j apart; their product c
  // stays in range in float32.
  Value c = t;
  Value kk = zero;
  Value stop = done;
  for (double ai : A) {
    c = b.mul(c, b.div(b.add(x, kk), w));
    Value term = b.div(c, k(b, ai, c));
    Value s_new = b.add(s, term);
    s = b.select(stop, s, s_new);
    stop = b.or_(stop, b.compare(b.abs(b.div(term, s_new)), k(b, machep, s), "LT"));
    kk = b.add(kk, one);
    c = b.mul(c, b.div(b.add(x, kk), w));
    kk = b.add(kk, one);
  }
  return b.select(special, special_val, s);
}

// trigamma as ATen's float kernel computes it (reflection below 0.5, six
// recurrence steps, then the asymptotic series).
Value trigamma(hlo::Builder& b, Value x) {
  const float pi = static_cast<float>(M_PI);
  Value reflect = b.compare(x, k(b, 0.5, x), "LT");
  Value sin_pi_x = b.unary("stablehlo.sine", b.mul(k(b, pi, x), x));
  Value result = b.select(reflect, b.neg(b.div(k(b, pi * pi, x), b.mul(sin_pi_x, sin_pi_x))), k(b, 0, x));
  Value one = k(b, 1, x);
  x = b.select(reflect, b.sub(one, x), x);
  for (int i = 0; i < 6; ++i) {
    result = b.add(result, b.div(one, b.mul(x, x)));
    x = b.add(x, one);
  }
  Value ixx = b.div(one, b.mul(x, x));
  Value series = b.mul(ixx, b.sub(k(b, 1.0 / 30, x), b.mul(ixx, k(b, 1.0 / 42, x))));
  series = b.add(b.add(one, b.div(one, b.mul(k(b, 2, x), x))), b.mul(ixx, b.sub(k(b, 1.0 / 6, x), series)));
  result = b.add(result, b.div(series, x));
  return b.select(reflect, b.neg(result), result);
}

// polygamma(n, x): digamma for n = 0, trigamma for n = 1, otherwise
// (-1)^(n+1) n! zeta(n + 1, x). n is a static int.
V polygamma(Context& cx) {
  int64_t n = cx.integer(0);
  if (n < 0) cx.fail("polygamma(n, x) does not support negative n.");
  auto [x, out] = float_arg(cx, 1);
  hlo::Builder& b = cx.b;
  Value r;
  if (n == 0) {
    r = b.unary("chlo.digamma", x);
  } else if (n == 1) {
    r = trigamma(b, x);
  } else {
    float fact = std::exp(std::lgamma(static_cast<float>(n) + 1.0f));
    r = b.mul(k(b, (n % 2 ? 1.0 : -1.0) * fact, x), zeta(b, k(b, static_cast<double>(n + 1), x), x));
  }
  return {b.convert(r, out)};
}

V special_zeta(Context& cx) {
  DType out = float_type(cx.result_type({0, 1}));
  DType t = hlo::opmath_type(out);
  return {cx.b.convert(zeta(cx.b, cx.as(0, t), cx.as(1, t)), out)};
}

}  // namespace

std::vector<Entry> special_lowerings() {
  return {
      {"aten::polygamma", polygamma},
      {"aten::special_zeta", special_zeta},
      {"aten::i0", i0},
      {"aten::special_i0e", special_i0e},
      {"aten::special_i1", special_i1},
      {"aten::special_i1e", special_i1e},
  };
}

}  // namespace torch_pjrt::lowering
