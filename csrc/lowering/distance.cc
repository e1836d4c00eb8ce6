// Pairwise distances: _cdist_forward/_cdist_backward and
// _pdist_forward/_pdist_backward (ATen/native/Distance.cpp,
// cpu/DistanceOpsKernel.cpp), with p a runtime value.
#include <algorithm>
#include <cmath>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

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

// x1 [B..., P, M] and x2 [B..., R, M] with their batch dims broadcast
// (infer_size's error when they do not).
std::pair<Value, Value> cdist_operands(Context& cx, Value x1, Value x2) {
  auto& b = cx.b;
  Dims b1(x1.dims().begin(), x1.dims().end() - 2), b2(x2.dims().begin(), x2.dims().end() - 2);
  Dims batch = infer_size(cx, b1, b2);
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
  Dims batch = infer_size(cx, b1, b2);
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

}  // namespace

std::vector<Entry> distance_lowerings() {
  return {
      {"aten::_cdist_forward", cdist_forward},
      {"aten::_cdist_backward", cdist_backward},
      {"aten::_pdist_forward", pdist_forward},
      {"aten::_pdist_backward", pdist_backward},
  };
}

}  // namespace torch_pjrt::lowering
