// Solvers and factorizations: triangular solves, Cholesky, LU with partial
// pivoting (and the solve/inverse/determinant ops built on it), Householder QR.
//
// LU and QR are stablehlo.while loops over columns that follow LAPACK's
// unblocked algorithms (getf2: first maximal |pivot|, reciprocal scaling;
// geqr2/larfg: beta = -sign(alpha) * norm), so pivots, signs and reflectors
// match CPU PyTorch. Batch dims are handled with masks (select/iota), never
// with per-batch slicing. `info` outputs are computed as LAPACK reports them.
#include <functional>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;
using hlo::Builder;

Dims batch_of(const Value& x, int64_t core = 2) { return Dims(x.dims().begin(), x.dims().end() - core); }
Dims cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
int64_t rows(const Value& x) { return x.dims()[x.rank() - 2]; }
int64_t cols(const Value& x) { return x.dims()[x.rank() - 1]; }

// Swaps the last two dims.
Value mT(Builder& b, const Value& x) {
  Dims perm;
  for (int64_t i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[x.rank() - 2], perm[x.rank() - 1]);
  return b.transpose(x, perm);
}

Value i64(Builder& b, int64_t v) { return b.constant(static_cast<double>(v), DType::I64); }

// Index along `dim` of a tensor of shape `dims`, as i64.
Value index(Builder& b, const Dims& dims, int64_t dim) { return b.iota(TensorType{DType::I64, dims}, dim); }

// Identity-like [batch..., n, m] of dtype t.
Value eye(Builder& b, const Dims& batch, int64_t n, int64_t m, DType t) {
  Dims d = cat(batch, {n, m});
  int64_t r = static_cast<int64_t>(d.size());
  Value on = b.compare(index(b, d, r - 2), index(b, d, r - 1), "EQ");
  return b.convert(on, t);
}

// Keeps the elements with (col - row) >= k (upper) or <= k (lower), zero elsewhere.
Value triangle(Builder& b, const Value& x, bool upper, int64_t k) {
  int64_t r = x.rank();
  Value diff = b.sub(index(b, x.dims(), r - 1), index(b, x.dims(), r - 2));
  Value keep = b.compare(diff, i64(b, k), upper ? "GE" : "LE");
  return b.select(keep, x, b.full(0, x.type));
}

// starts for dynamic_slice: zero everywhere except `at` (dim -> start).
std::vector<Value> starts(Builder& b, int64_t rank, const std::vector<std::pair<int64_t, Value>>& at) {
  std::vector<Value> s(rank, i64(b, 0));
  for (const auto& [d, v] : at) s[d] = v;
  return s;
}

// A loop `for k in [0, trips)` carrying `state`; `body` gets k (i64 rank 0)
// and the state and returns the new state. Values the body needs from outside
// travel in the state, so the regions capture nothing.
V fori(Builder& b, int64_t trips, const V& state, const std::function<V(Builder&, Value, const V&)>& body) {
  V operands{i64(b, 0)};
  operands.insert(operands.end(), state.begin(), state.end());
  std::vector<TensorType> types;
  for (const auto& v : operands) types.push_back(v.type);
  auto cond = [trips](Builder& bb, const V& args) { return V{bb.compare(args[0], i64(bb, trips), "LT")}; };
  auto step = [&body](Builder& bb, const V& args) {
    V rest(args.begin() + 1, args.end());
    V next = body(bb, args[0], rest);
    next.insert(next.begin(), bb.add(args[0], i64(bb, 1)));
    return next;
  };
  V out = b.op_multi("stablehlo.while", operands, types, "", {{types, cond}, {types, step}});
  return V(out.begin() + 1, out.end());
}

// A float32/float64 input (complex ones take the CPU fallback). `kernel`:
// the CPU kernel's AT_DISPATCH name for the ops whose kernel refuses other
// dtypes itself (NotImplementedError); without one, ATen's linalg check
// (RuntimeError) refuses them.
void require_float(Context& cx, const Value& x, const std::string& what, const char* kernel = nullptr) {
  if (hlo::is_complex(x.dtype())) cx.not_lowered(what + ": complex inputs run on the CPU");
  bool ok = hlo::is_floating(x.dtype()) && x.dtype() != DType::BF16 && x.dtype() != DType::F16;
  if (!ok && kernel) refuse_dtype(cx, x.dtype(), kernel);
  if (!ok)
    cx.fail(what + ": Expected a floating point or complex tensor as input. Got " +
            std::string(hlo::dtype_name(x.dtype())));
}

void require_matrix(Context& cx, const Value& x, const std::string& what, bool square) {
  if (x.rank() < 2) cx.fail(what + ": The input tensor A must have at least 2 dimensions.");
  if (square && rows(x) != cols(x))
    cx.fail(what + ": A must be batches of square matrices, but they are " + std::to_string(rows(x)) + " by " +
            std::to_string(cols(x)) + " matrices");
}

// Broadcasts the batch dims (all but the last `ca` / `cb` dims) of a and b.
std::pair<Value, Value> broadcast_batch(Builder& b, const Value& x, const Value& y, int64_t cx_core = 2,
                                        int64_t cy_core = 2) {
  Dims batch = hlo::broadcast_shapes(batch_of(x, cx_core), batch_of(y, cy_core));
  Dims xc(x.dims().end() - cx_core, x.dims().end()), yc(y.dims().end() - cy_core, y.dims().end());
  return {b.broadcast_to(x, cat(batch, xc)), b.broadcast_to(y, cat(batch, yc))};
}

// ---- triangular solves

// op(a) x = y (left) or x op(a) = y, a and y with the same batch dims.
Value trsm(Builder& b, const Value& a, const Value& y, bool left, bool lower, bool unit, bool transpose) {
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") +
                      ", lower = " + (lower ? "true" : "false") + ", unit_diagonal = " + (unit ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose " + (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.op("stablehlo.triangular_solve", {a, y}, y.type, attrs);
}

// With `kernel`, A's dtype is dispatched on after the rank checks and before
// the others, as triangular_solve's CPU kernel does.
void check_solve_shapes(Context& cx, const Value& a, const Value& y, bool left, const std::string& what,
                        const char* kernel = nullptr) {
  if (kernel && a.rank() >= 2 && y.rank() >= 2) require_float(cx, a, what, kernel);
  require_matrix(cx, a, what, true);
  if (y.rank() < 2) cx.fail(what + ": The input tensor B must have at least 2 dimensions.");
  if (a.dtype() != y.dtype())
    cx.fail(what + ": Expected A and B to have the same dtype, but found A of type " +
            std::string(hlo::dtype_name(a.dtype())) + " and B of type " + std::string(hlo::dtype_name(y.dtype())) +
            " instead");
  int64_t n = rows(a), k = left ? rows(y) : cols(y);
  if (n != k)
    cx.fail(what + ": Incompatible shapes of A and B for the equation " + (left ? "AX = B" : "XA = B") + " (" +
            std::to_string(n) + "x" + std::to_string(n) + " and " + std::to_string(rows(y)) + "x" +
            std::to_string(cols(y)) + ")");
}

// aten::linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False)
V linalg_solve_triangular(Context& cx) {
  Value a = cx.tensor(0), y = cx.tensor(1);
  bool upper = cx.flag(2), left = cx.flag_or(3, true), unit = cx.flag_or(4, false);
  check_solve_shapes(cx, a, y, left, "linalg.solve_triangular", "triangular_solve_cpu");
  require_float(cx, a, "linalg.solve_triangular");
  auto [ab, yb] = broadcast_batch(cx.b, a, y);
  return {trsm(cx.b, ab, yb, left, !upper, unit, false)};
}

// aten::triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False)
// -> (solution, cloned_coefficient)
V triangular_solve(Context& cx) {
  Value y = cx.tensor(0), a = cx.tensor(1);
  bool upper = cx.flag_or(2, true), transpose = cx.flag_or(3, false), unit = cx.flag_or(4, false);
  check_solve_shapes(cx, a, y, true, "triangular_solve", "triangular_solve_cpu");
  require_float(cx, a, "triangular_solve");
  auto [ab, yb] = broadcast_batch(cx.b, a, y);
  return {trsm(cx.b, ab, yb, true, !upper, unit, transpose), ab};
}

// ---- Cholesky

// The factor of the lower (or upper) triangle and LAPACK's info: the order of
// the first leading minor that is not positive definite (0 when fine). A
// column loop as LAPACK's potf2 (dot products with the finished columns,
// reciprocal scaling); a matrix that fails keeps the failed pivot on the
// diagonal and stops there, as LAPACK leaves it. The upper factor is the
// lower factor of A^T (which reads A's upper triangle), transposed.
std::pair<Value, Value> cholesky_of(Context& cx, const Value& a, bool upper, const std::string& what,
                                    const char* kernel = nullptr) {
  if (a.rank() >= 2) require_float(cx, a, what, kernel);
  require_matrix(cx, a, what, true);
  auto& b = cx.b;
  int64_t n = rows(a), r = a.rank();
  Dims batch = batch_of(a);
  Value x0 = upper ? mT(b, a) : a;
  Value info0 = b.full(0, TensorType{DType::I32, batch});
  V out{x0, info0};
  if (n > 0) {
    out = fori(b, n, {x0, info0}, [&](Builder& b, Value j, const V& s) {
      Value x = s[0], info = s[1];
      Dims d = x.dims(), colshape = cat(batch, {n, 1}), rowshape = cat(batch, {1, n}), one = cat(batch, {1, 1});
      Value ri = index(b, colshape, r - 2), ci = index(b, d, r - 1);
      Value done = b.compare(ci, j, "LT");  // the finished columns
      Value rowj = b.dynamic_slice(x, starts(b, r, {{r - 2, j}}), rowshape);
      Value lrow = b.select(b.compare(index(b, rowshape, r - 1), j, "LT"), rowj, b.full(0, rowj.type));
      Value dots = b.reduce(b.mul(b.select(done, x, b.full(0, x.type)), lrow), b.constant(0, x.dtype()), {r - 1},
                            "stablehlo.add");
      dots = b.reshape(dots, colshape);
      Value colj = b.dynamic_slice(x, starts(b, r, {{r - 1, j}}), colshape);
      Value ajj = b.sub(b.dynamic_slice(colj, starts(b, r, {{r - 2, j}}), one),
                        b.dynamic_slice(dots, starts(b, r, {{r - 2, j}}), one));
      Value ok = b.compare(ajj, b.full(0, ajj.type), "GT");  // false for NaN
      Value active = b.reshape(b.compare(info, b.full(0, info.type), "EQ"), one);
      Value dj = b.sqrt(ajj);
      Value scaled = b.mul(b.sub(colj, dots), b.div(b.full(1, dj.type), dj));
      Value good = b.select(b.compare(ri, j, "GT"), scaled, b.select(b.compare(ri, j, "EQ"), dj, colj));
      Value bad = b.select(b.compare(ri, j, "EQ"), b.broadcast_to(ajj, colshape), colj);
      Value newcol = b.select(ok, good, bad);
      x = b.select(b.and_(b.compare(ci, j, "EQ"), active), newcol, x);
      Value failed = b.reshape(b.and_(active, b.not_(ok)), batch);
      info = b.select(failed, b.convert(b.add(j, i64(b, 1)), DType::I32), info);
      return V{x, info};
    });
  }
  Value l = triangle(b, out[0], false, 0);
  return {upper ? mT(b, l) : l, out[1]};
}

// aten::linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (L, info)
V linalg_cholesky_ex(Context& cx) {
  auto [l, info] = cholesky_of(cx, cx.tensor(0), cx.flag_or(1, false), "linalg.cholesky");
  return {l, info};
}

// aten::cholesky(Tensor self, bool upper=False)
V cholesky(Context& cx) {
  return {cholesky_of(cx, cx.tensor(0), cx.flag_or(1, false), "cholesky", "cholesky_cpu").first};
}

// A^{-1} y for A = L L^T (or U^T U) given the factor.
Value cholesky_solve_of(Builder& b, const Value& f, const Value& y, bool upper) {
  // lower: L z = y, L^T x = z. upper: U^T z = y, U x = z.
  Value z = trsm(b, f, y, true, !upper, false, upper);
  return trsm(b, f, z, true, !upper, false, !upper);
}

// aten::_cholesky_solve_helper(Tensor self, Tensor A, bool upper)
V cholesky_solve_helper(Context& cx) {
  Value y = cx.tensor(0), f = cx.tensor(1);
  // ATen transposes both (mT: a 0-d one has no dim -2, a 1-d one is refused),
  // then its helper dispatches on self's dtype before it looks at shapes.
  for (const Value& v : {y, f}) {
    if (v.rank() == 0)
      cx.fail("Dimension out of range (expected to be in range of [-1, 0], but got -2)", ErrorKind::Index);
    if (v.rank() == 1) cx.fail("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.");
  }
  require_float(cx, y, "cholesky_solve", "cholesky_solve_cpu");
  check_solve_shapes(cx, f, y, true, "cholesky_solve");
  require_float(cx, f, "cholesky_solve");
  auto [fb, yb] = broadcast_batch(cx.b, f, y);
  return {cholesky_solve_of(cx.b, fb, yb, cx.flag(2))};
}

// aten::cholesky_inverse(Tensor self, bool upper=False)
V cholesky_inverse(Context& cx) {
  Value f = cx.tensor(0);
  if (f.rank() >= 2) require_float(cx, f, "cholesky_inverse", "cholesky_inverse_out_cpu");
  require_matrix(cx, f, "cholesky_inverse", true);
  Value id = eye(cx.b, batch_of(f), rows(f), rows(f), f.dtype());
  return {cholesky_solve_of(cx.b, f, id, cx.flag_or(1, false))};
}

// ---- LU with partial pivoting (LAPACK getf2)

struct LU {
  Value lu, pivots, info;
};

LU lu_factor(Builder& b, const Value& a) {
  Dims d = a.dims(), batch = batch_of(a);
  int64_t r = a.rank(), m = rows(a), n = cols(a), kmax = std::min(m, n);
  Value piv0 = b.full(0, TensorType{DType::I32, cat(batch, {kmax})});
  Value info0 = b.full(0, TensorType{DType::I32, batch});
  if (kmax == 0) return {a, piv0, info0};
  V out = fori(b, kmax, {a, piv0, info0}, [&](Builder& b, Value k, const V& s) {
    Value x = s[0], piv = s[1], info = s[2];
    DType t = x.dtype();
    Dims colshape = cat(batch, {m, 1}), rowshape = cat(batch, {1, n}), one = cat(batch, {1, 1});
    Value ri = index(b, d, r - 2), ci = index(b, d, r - 1), cri = index(b, colshape, r - 2);
    // pivot row: first row >= k with the largest |x[row, k]|
    Value col = b.dynamic_slice(x, starts(b, r, {{r - 1, k}}), colshape);
    Value below = b.compare(cri, k, "GE");
    Value mag = b.select(below, b.abs(col), b.full(-1, col.type));
    Value mx = b.reshape(b.reduce(mag, b.constant(-1, t), {r - 2}, "stablehlo.maximum"), one);
    Value cand = b.select(b.and_(below, b.compare(mag, mx, "EQ")), cri, b.full(static_cast<double>(m), cri.type));
    Value p = b.reshape(b.reduce(cand, i64(b, m), {r - 2}, "stablehlo.minimum"), one);
    p = b.select(b.compare(p, i64(b, m), "EQ"), b.broadcast_to(k, one), p);  // a NaN column: keep row k
    // swap rows k and p
    Value rowk = b.dynamic_slice(x, starts(b, r, {{r - 2, k}}), rowshape);
    Value rowp = b.reshape(
        b.reduce(b.select(b.compare(ri, p, "EQ"), x, b.full(0, x.type)), b.constant(0, t), {r - 2}, "stablehlo.add"),
        rowshape);
    x = b.select(b.compare(ri, k, "EQ"), rowp, b.select(b.compare(ri, p, "EQ"), rowk, x));
    // scale the column below the pivot by 1/pivot (not when the pivot is zero)
    Value pivot = b.dynamic_slice(rowp, starts(b, r, {{r - 1, k}}), one);
    Value zero = b.compare(pivot, b.full(0, pivot.type), "EQ");
    Value scale = b.select(zero, b.full(1, pivot.type), b.div(b.full(1, pivot.type), pivot));
    Value colk = b.dynamic_slice(x, starts(b, r, {{r - 1, k}}), colshape);
    Value l = b.select(b.compare(cri, k, "GT"), b.mul(colk, scale), colk);
    x = b.select(b.compare(ci, k, "EQ"), l, x);
    // trailing update
    Value trail = b.and_(b.compare(ri, k, "GT"), b.compare(ci, k, "GT"));
    x = b.select(trail, b.sub(x, b.mul(l, rowp)), x);
    // pivots (1-based) and info
    Dims pd = cat(batch, {kmax});
    Value pi = index(b, pd, r - 2);
    Value pval = b.convert(b.add(b.reshape(p, cat(batch, {1})), i64(b, 1)), DType::I32);
    piv = b.select(b.compare(pi, k, "EQ"), pval, piv);
    Value first = b.and_(b.compare(info, b.full(0, info.type), "EQ"), b.reshape(zero, batch));
    info = b.select(first, b.convert(b.add(k, i64(b, 1)), DType::I32), info);
    return V{x, piv, info};
  });
  return {out[0], out[1], out[2]};
}

// The permutation of rows that the LAPACK pivots describe: perm[i] is the row
// of A that ends up in row i of L U. [batch..., m] of i64.
Value permutation(Builder& b, const Value& piv, int64_t m) {
  int64_t r = piv.rank(), kmax = piv.dims()[r - 1];
  Dims batch = batch_of(piv, 1), pd = cat(batch, {m}), one = cat(batch, {1});
  Value perm0 = index(b, pd, r - 1);
  if (kmax == 0) return perm0;
  Value piv64 = b.sub(b.convert(piv, DType::I64), b.full(1, TensorType{DType::I64, piv.dims()}));
  V out = fori(b, kmax, {perm0, piv64}, [&](Builder& b, Value k, const V& s) {
    Value perm = s[0], pv = s[1];
    Value idx = index(b, pd, r - 1);
    Value pk = b.dynamic_slice(pv, starts(b, r, {{r - 1, k}}), one);
    Value vk = b.dynamic_slice(perm, starts(b, r, {{r - 1, k}}), one);
    Value vp = b.reshape(
        b.reduce(b.select(b.compare(idx, pk, "EQ"), perm, b.full(0, perm.type)), i64(b, 0), {r - 1}, "stablehlo.add"),
        one);
    perm = b.select(b.compare(idx, k, "EQ"), vp, b.select(b.compare(idx, pk, "EQ"), vk, perm));
    return V{perm, pv};
  });
  return out[0];
}

// P with A = P L U: P[perm[j], j] = 1. [batch..., m, m] of dtype t.
Value permutation_matrix(Builder& b, const Value& perm, DType t) {
  int64_t r = perm.rank(), m = perm.dims()[r - 1];
  Dims batch = batch_of(perm, 1), d = cat(batch, {m, m});
  Value pj = b.reshape(perm, cat(batch, {1, m}));
  return b.convert(b.compare(index(b, d, r - 1), pj, "EQ"), t);
}

void check_lu_input(Context& cx, const Value& a, const std::string& what, bool square, const char* kernel = nullptr) {
  require_matrix(cx, a, what, square);
  require_float(cx, a, what, kernel);
}

// aten::linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (LU, pivots, info)
V linalg_lu_factor_ex(Context& cx) {
  Value a = cx.tensor(0);
  check_lu_input(cx, a, "torch.lu_factor", false, "lu_cpu");
  if (!cx.flag_or(1, true)) cx.fail("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  LU f = lu_factor(cx.b, a);
  return {f.lu, f.pivots, f.info};
}

// (P, L, U) from a packed factorization.
V unpack(Builder& b, const Value& lu, const Value& piv, bool data, bool pivots) {
  int64_t m = rows(lu), n = cols(lu), k = std::min(m, n);
  Dims batch = batch_of(lu);
  DType t = lu.dtype();
  Value empty = b.full(0, TensorType{t, {0}});
  Value p = pivots ? permutation_matrix(b, permutation(b, piv, m), t) : empty;
  if (!data) return {p, empty, empty};
  Dims lo(batch.size() + 2, 0), lhi = cat(batch, {m, k}), uhi = cat(batch, {k, n}), st(batch.size() + 2, 1);
  Value l = b.add(triangle(b, b.slice(lu, lo, lhi, st), false, -1), eye(b, batch, m, k, t));
  Value u = triangle(b, b.slice(lu, lo, uhi, st), true, 0);
  return {p, l, u};
}

// aten::lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (P, L, U)
V lu_unpack(Context& cx) {
  Value lu = cx.tensor(0), piv = cx.tensor(1);
  if (lu.rank() < 2)
    cx.fail("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: " + std::to_string(lu.rank()) +
            " instead");
  if (piv.dtype() != DType::I32)
    cx.fail("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.");
  bool unpack_pivots = cx.flag_or(3, true);
  if (unpack_pivots && piv.type.numel() > 0) {
    // CPU's unpack_pivots kernel checks every pivot it applies (a TORCH_CHECK).
    auto& b = cx.b;
    Value bad = b.or_(b.compare(piv, b.constant(1, DType::I32), "LT"),
                      b.compare(piv, b.constant(static_cast<double>(rows(lu)), DType::I32), "GT"));
    bad = b.reduce(bad, b.constant(0, DType::Bool), iota_dims(bad.rank()), "stablehlo.or");
    cx.check(bad,
             "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive.Did you properly pass the result "
             "of lu_factor?",
             ErrorKind::Runtime);
  }
  return unpack(cx.b, lu, piv, cx.flag_or(2, true), cx.flag_or(3, true));
}

// aten::linalg_lu(Tensor A, *, bool pivot=True) -> (P, L, U)
V linalg_lu(Context& cx) {
  Value a = cx.tensor(0);
  check_lu_input(cx, a, "linalg.lu", false, "lu_cpu");
  if (!cx.flag_or(1, true)) cx.fail("linalg.lu: LU without pivoting is not implemented on the CPU");
  LU f = lu_factor(cx.b, a);
  return unpack(cx.b, f.lu, f.pivots, true, true);
}

// Solves A X = B (or A^T X = B with adjoint) from A's LU factors; lu/piv and y
// share their batch dims.
Value lu_solve_left(Builder& b, const Value& lu, const Value& piv, const Value& y, bool adjoint) {
  int64_t n = rows(lu), r = lu.rank();
  Dims batch = batch_of(lu);
  Value p = permutation_matrix(b, permutation(b, piv, n), lu.dtype());
  Dims bd;
  for (int64_t i = 0; i < r - 2; ++i) bd.push_back(i);
  if (!adjoint) {
    // L U X = P^T B
    Value pb = b.dot_general(p, y, bd, bd, {r - 2}, {r - 2}, y.dtype());
    Value z = trsm(b, lu, pb, true, true, true, false);
    return trsm(b, lu, z, true, false, false, false);
  }
  // U^T L^T P^T X = B
  Value z = trsm(b, lu, y, true, false, false, true);
  Value w = trsm(b, lu, z, true, true, true, true);
  return b.dot_general(p, w, bd, bd, {r - 1}, {r - 2}, y.dtype());
}

Value lu_solve(Builder& b, Value lu, Value piv, Value y, bool left, bool adjoint) {
  Dims batch = hlo::broadcast_shapes(batch_of(lu), batch_of(y));
  lu = b.broadcast_to(lu, cat(batch, {rows(lu), cols(lu)}));
  piv = b.broadcast_to(piv, cat(batch, {piv.dims().back()}));
  y = b.broadcast_to(y, cat(batch, {rows(y), cols(y)}));
  if (left) return lu_solve_left(b, lu, piv, y, adjoint);
  // X A = B  <=>  A^T X^T = B^T
  return mT(b, lu_solve_left(b, lu, piv, mT(b, y), !adjoint));
}

// aten::linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False)
V linalg_lu_solve(Context& cx) {
  Value lu = cx.tensor(0), piv = cx.tensor(1), y = cx.tensor(2);
  bool left = cx.flag_or(3, true), adjoint = cx.flag_or(4, false);
  check_solve_shapes(cx, lu, y, left, "linalg.lu_solve");
  require_float(cx, lu, "linalg.lu_solve");
  if (piv.dims() != cat(batch_of(lu), {rows(lu)}))
    cx.fail("linalg.lu_solve: Expected LU.shape[:-1] and pivots.shape to be the same");
  return {lu_solve(cx.b, lu, piv, y, left, adjoint)};
}

// aten::_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False)
// -> (result, LU, pivots, info)
V linalg_solve_ex(Context& cx) {
  Value a = cx.tensor(0), y = cx.tensor(1);
  bool left = cx.flag_or(2, true);
  require_matrix(cx, a, "linalg.solve", true);
  require_float(cx, a, "linalg.solve");
  // B is a vector (batch) when it is 1-D or has exactly A's shape without the last dim.
  bool vector = y.rank() == 1 || (y.rank() == a.rank() - 1 && y.dims() == batch_of(a, 1));
  Value y2 = vector ? cx.b.reshape(y, cat(y.dims(), {1})) : y;
  check_solve_shapes(cx, a, y2, left, "linalg.solve");
  LU f = lu_factor(cx.b, a);
  Value x = lu_solve(cx.b, f.lu, f.pivots, y2, left, false);
  if (vector) x = cx.b.reshape(x, Dims(x.dims().begin(), x.dims().end() - 1));
  return {x, f.lu, f.pivots, f.info};
}

// aten::linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (inverse, info)
V linalg_inv_ex(Context& cx) {
  Value a = cx.tensor(0);
  require_matrix(cx, a, "linalg.inv", true);
  require_float(cx, a, "linalg.inv");
  LU f = lu_factor(cx.b, a);
  Value id = eye(cx.b, batch_of(a), rows(a), rows(a), a.dtype());
  return {lu_solve_left(cx.b, f.lu, f.pivots, id, false), f.info};
}

// Diagonal of the LU factor, [batch..., n].
Value diagonal(Builder& b, const Value& x) {
  int64_t r = x.rank();
  Value on = b.compare(index(b, x.dims(), r - 2), index(b, x.dims(), r - 1), "EQ");
  return b.reduce(b.select(on, x, b.full(0, x.type)), b.constant(0, x.dtype()), {r - 1}, "stablehlo.add");
}

// (-1)^(number of row swaps), in dtype t, [batch...].
Value pivot_sign(Builder& b, const Value& piv, DType t) {
  int64_t r = piv.rank();
  Value pos = b.add(b.convert(index(b, piv.dims(), r - 1), DType::I32), b.full(1, piv.type));
  Value swaps =
      b.reduce(b.convert(b.compare(piv, pos, "NE"), DType::I32), b.constant(0, DType::I32), {r - 1}, "stablehlo.add");
  Value odd = b.compare(b.binary("stablehlo.remainder", swaps, b.full(2, swaps.type)), b.full(1, swaps.type), "EQ");
  return b.select(odd, b.full(-1, TensorType{t, swaps.dims()}), b.full(1, TensorType{t, swaps.dims()}));
}

// aten::_linalg_det(Tensor A) -> (result, LU, pivots)
// ATen factors A^T when A is contiguous (det A^T = det A, and A^T is then
// column-major for LAPACK), and A itself otherwise; the backward formula
// relies on it (it solves with adjoint = !A.is_contiguous()). The glue
// appends A.is_contiguous() as argument 1 (kContiguityFlag in ops.cc).
LU det_factor(Context& cx, const Value& a) { return lu_factor(cx.b, cx.flag_or(1, true) ? mT(cx.b, a) : a); }

V linalg_det(Context& cx) {
  Value a = cx.tensor(0);
  require_matrix(cx, a, "linalg.det", true);
  require_float(cx, a, "linalg.det");
  auto& b = cx.b;
  LU f = det_factor(cx, a);
  Value d = diagonal(b, f.lu);
  Value prod = b.reduce(d, b.constant(1, a.dtype()), {a.rank() - 2}, "stablehlo.multiply");
  return {b.mul(pivot_sign(b, f.pivots, a.dtype()), prod), f.lu, f.pivots};
}

// aten::_linalg_slogdet(Tensor A) -> (sign, logabsdet, LU, pivots)
V linalg_slogdet(Context& cx) {
  Value a = cx.tensor(0);
  require_matrix(cx, a, "linalg.slogdet", true);
  require_float(cx, a, "linalg.slogdet");
  auto& b = cx.b;
  LU f = det_factor(cx, a);
  Value d = diagonal(b, f.lu);
  int64_t r = a.rank() - 2;
  Value sgn = b.reduce(b.unary("stablehlo.sign", d), b.constant(1, a.dtype()), {r}, "stablehlo.multiply");
  Value logabs = b.reduce(b.log(b.abs(d)), b.constant(0, a.dtype()), {r}, "stablehlo.add");
  return {b.mul(pivot_sign(b, f.pivots, a.dtype()), sgn), logabs, f.lu, f.pivots};
}

// ---- Householder QR (LAPACK geqr2 / larfg / org2r / orm2r)

// The i-th reflector of a packed QR: v[i] = 1, v[r] = a[r, i] below, 0 above.
// [batch..., m, 1].
Value reflector(Builder& b, const Value& a, const Value& i) {
  int64_t r = a.rank(), m = rows(a);
  Dims colshape = cat(batch_of(a), {m, 1});
  Value col = b.dynamic_slice(a, starts(b, r, {{r - 1, i}}), colshape);
  Value ri = index(b, colshape, r - 2);
  Value unit = b.convert(b.compare(ri, i, "EQ"), a.dtype());
  return b.select(b.compare(ri, i, "GT"), col, unit);
}

// tau[..., i] (i a runtime index) as [batch..., 1, 1].
Value tau_at(Builder& b, const Value& tau, const Value& i) {
  int64_t r = tau.rank();
  Value t = b.dynamic_slice(tau, starts(b, r, {{r - 1, i}}), cat(batch_of(tau, 1), {1}));
  return b.reshape(t, cat(batch_of(tau, 1), {1, 1}));
}

// H c = c - tau v (v^T c) (left) or c H = c - tau (c v) v^T (right).
Value apply_reflector(Builder& b, const Value& c, const Value& v, const Value& tau, bool left) {
  int64_t r = c.rank();
  if (left) {
    Value w = b.reduce(b.mul(v, c), b.constant(0, c.dtype()), {r - 2}, "stablehlo.add");  // [..., n]
    w = b.reshape(w, cat(batch_of(c), {1, cols(c)}));
    return b.sub(c, b.mul(tau, b.mul(v, w)));
  }
  Value vt = mT(b, v);                                                                   // [..., 1, n]
  Value w = b.reduce(b.mul(c, vt), b.constant(0, c.dtype()), {r - 1}, "stablehlo.add");  // [..., m]
  w = b.reshape(w, cat(batch_of(c), {rows(c), 1}));
  return b.sub(c, b.mul(tau, b.mul(w, vt)));
}

// Packed QR of a: R on and above the diagonal, the reflectors below, and tau.
std::pair<Value, Value> geqrf_of(Builder& b, const Value& a) {
  int64_t r = a.rank(), m = rows(a), n = cols(a), k = std::min(m, n);
  Dims batch = batch_of(a);
  Value tau0 = b.full(0, TensorType{a.dtype(), cat(batch, {k})});
  if (k == 0) return {a, tau0};
  V out = fori(b, k, {a, tau0}, [&](Builder& b, Value i, const V& s) {
    Value x = s[0], tau = s[1];
    DType t = x.dtype();
    Dims colshape = cat(batch, {m, 1}), one = cat(batch, {1, 1});
    Value col = b.dynamic_slice(x, starts(b, r, {{r - 1, i}}), colshape);
    Value ri = index(b, colshape, r - 2);
    Value below = b.compare(ri, i, "GT");
    Value alpha = b.dynamic_slice(x, starts(b, r, {{r - 2, i}, {r - 1, i}}), one);
    Value xs = b.select(below, col, b.full(0, col.type));
    Value xnorm2 = b.reshape(b.reduce(b.mul(xs, xs), b.constant(0, t), {r - 2}, "stablehlo.add"), one);
    Value zero = b.full(0, alpha.type), onev = b.full(1, alpha.type);
    Value trivial = b.compare(xnorm2, zero, "EQ");
    Value norm = b.sqrt(b.add(b.mul(alpha, alpha), xnorm2));
    Value beta = b.select(b.compare(alpha, zero, "LT"), norm, b.neg(norm));  // -sign(alpha) * norm
    Value tau_i = b.select(trivial, zero, b.div(b.sub(beta, alpha), beta));
    Value scale = b.select(trivial, onev, b.div(onev, b.sub(alpha, beta)));
    Value diag = b.select(trivial, alpha, beta);
    Value vcol = b.select(below, b.mul(col, scale), b.select(b.compare(ri, i, "EQ"), onev, zero));
    // apply H to the columns right of i, then store the new column i
    Value ci = index(b, x.dims(), r - 1);
    Value applied = apply_reflector(b, x, vcol, tau_i, true);
    x = b.select(b.compare(ci, i, "GT"), applied, x);
    Value newcol = b.select(below, b.mul(col, scale), b.select(b.compare(ri, i, "EQ"), diag, col));
    x = b.select(b.compare(ci, i, "EQ"), newcol, x);
    Value ti = index(b, tau.dims(), r - 2);
    tau = b.select(b.compare(ti, i, "EQ"), b.reshape(tau_i, cat(batch, {1})), tau);
    return V{x, tau};
  });
  return {out[0], out[1]};
}

// H_0 H_1 ... H_{k-1} applied to c (left) or c H_0 ... H_{k-1} (right), or
// with the transposed product. Reflectors from a [..., nq, >=k], tau [..., k].
Value apply_q(Builder& b, const Value& a, const Value& tau, const Value& c, bool left, bool transpose) {
  int64_t k = tau.dims().back();
  if (k == 0) return c;
  // Q c and c Q^T apply the last reflector first.
  bool backward = left != transpose;
  V out = fori(b, k, {c, a, tau}, [&](Builder& b, Value j, const V& s) {
    Value i = backward ? b.sub(i64(b, k - 1), j) : j;
    Value v = reflector(b, s[1], i);
    return V{apply_reflector(b, s[0], v, tau_at(b, s[2], i), left), s[1], s[2]};
  });
  return out[0];
}

void require_geqrf_input(Context& cx, const Value& a, const std::string& what, const char* kernel = nullptr) {
  if (a.rank() < 2) cx.fail(what + ": input must have at least 2 dimensions.");
  require_float(cx, a, what, kernel);
}

// aten::geqrf(Tensor self) -> (a, tau)
V geqrf(Context& cx) {
  Value a = cx.tensor(0);
  require_geqrf_input(cx, a, "torch.geqrf", "geqrf_cpu");
  auto [x, tau] = geqrf_of(cx.b, a);
  return {x, tau};
}

// aten::linalg_householder_product(Tensor input, Tensor tau)
V linalg_householder_product(Context& cx) {
  Value a = cx.tensor(0), tau = cx.tensor(1);
  if (a.rank() < 2) cx.fail("torch.linalg.householder_product: input must have at least 2 dimensions.");
  int64_t m = rows(a), n = cols(a);
  if (m < n)
    cx.fail("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]");
  if (tau.rank() != a.rank() - 1 || tau.dims().back() > n)
    cx.fail("torch.linalg.householder_product: input.shape[-1] must be greater than or equal to tau.shape[-1]");
  if (batch_of(tau, 1) != batch_of(a))
    cx.fail("torch.linalg.householder_product: Expected batch dimensions of tau to be equal to input.shape[:-2]");
  if (tau.dtype() != a.dtype()) cx.fail("torch.linalg.householder_product: tau dtype must match the input dtype");
  // orgqr's CPU kernel dispatches on the dtype after these checks.
  require_float(cx, a, "torch.linalg.householder_product", "orgqr_cpu");
  return {apply_q(cx.b, a, tau, eye(cx.b, batch_of(a), m, n, a.dtype()), true, false)};
}

// aten::ormqr(Tensor self, Tensor input2, Tensor input3, bool left=True, bool transpose=False)
V ormqr(Context& cx) {
  Value a = cx.tensor(0), tau = cx.tensor(1), c = cx.tensor(2);
  bool left = cx.flag_or(3, true), transpose = cx.flag_or(4, false);
  require_geqrf_input(cx, a, "torch.ormqr");
  if (c.rank() != a.rank()) cx.fail("torch.ormqr: input and other must have the same number of dimensions");
  int64_t nq = left ? rows(c) : cols(c);
  if (rows(a) != nq)
    cx.fail("torch.ormqr: other.shape[" + std::string(left ? "-2" : "-1") + "] must be equal to input.shape[-2]");
  if (tau.dims().back() > nq) cx.fail("torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-2]");
  if (tau.dtype() != a.dtype() || c.dtype() != a.dtype())
    cx.fail("torch.ormqr: expected all inputs to have the same dtype");
  return {apply_q(cx.b, a, tau, c, left, transpose)};
}

// aten::linalg_qr(Tensor A, str mode="reduced") -> (Q, R)
V linalg_qr(Context& cx) {
  Value a = cx.tensor(0);
  auto& b = cx.b;
  std::string mode = cx.none(1) ? "reduced" : cx.str(1);
  if (mode != "reduced" && mode != "complete" && mode != "r")
    cx.fail("qr received unrecognized mode '" + mode + "' but expected one of 'reduced' (default), 'r', or 'complete'");
  require_geqrf_input(cx, a, "linalg.qr");
  int64_t m = rows(a), n = cols(a), k = std::min(m, n);
  Dims batch = batch_of(a), lo(batch.size() + 2, 0), st(batch.size() + 2, 1);
  auto [x, tau] = geqrf_of(b, a);
  int64_t qcols = mode == "complete" ? m : k;
  Value r = triangle(b, b.slice(x, lo, cat(batch, {qcols, n}), st), true, 0);
  if (mode == "r") return {b.full(0, TensorType{a.dtype(), {0}}), r};
  return {apply_q(b, x, tau, eye(b, batch, m, qcols, a.dtype()), true, false), r};
}

}  // namespace

std::vector<Entry> linalg_factor_lowerings() {
  return {
      {"aten::linalg_solve_triangular", linalg_solve_triangular},
      {"aten::triangular_solve", triangular_solve},
      {"aten::linalg_cholesky_ex", linalg_cholesky_ex, Traits().set_check_errors_api("linalg.cholesky_ex")},
      {"aten::cholesky", cholesky},
      {"aten::_cholesky_solve_helper", cholesky_solve_helper},
      {"aten::cholesky_inverse", cholesky_inverse},
      {"aten::linalg_lu_factor_ex", linalg_lu_factor_ex, Traits().set_check_errors_api("torch.linalg.lu_factor_ex")},
      {"aten::lu_unpack", lu_unpack},
      {"aten::linalg_lu", linalg_lu},
      {"aten::linalg_lu_solve", linalg_lu_solve},
      {"aten::_linalg_solve_ex", linalg_solve_ex, Traits().set_check_errors_api("torch.linalg.solve_ex")},
      {"aten::linalg_inv_ex", linalg_inv_ex, Traits().set_check_errors_api("linalg.inv_ex")},
      {"aten::_linalg_det", linalg_det, Traits().set_contiguity_flag()},
      {"aten::_linalg_slogdet", linalg_slogdet, Traits().set_contiguity_flag()},
      {"aten::geqrf", geqrf},
      {"aten::linalg_householder_product", linalg_householder_product},
      {"aten::ormqr", ormqr},
      {"aten::linalg_qr", linalg_qr},
  };
}

}  // namespace torch_pjrt::lowering
