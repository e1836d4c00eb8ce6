// Spectral decompositions of real matrices: symmetric eigendecomposition
// (aten::_linalg_eigh) and SVD (aten::_linalg_svd), as cyclic Jacobi.
//
// eigh is two-sided cyclic Jacobi (Rutishauser's rotation, the (p, q) entry set
// to zero exactly); the SVD is one-sided (Hestenes) Jacobi on the columns of A
// (of A^T when A is wide), which keeps small singular values accurate. Sweeps
// are a stablehlo.while that runs while the off-diagonal part is above a
// tolerance relative to the matrix, with a hard cap on sweeps; each sweep is a
// while over the n(n-1)/2 pairs. Batch dims ride along in every op (c and s
// are per-matrix). Results are sorted as LAPACK sorts them (eigenvalues
// ascending, singular values descending) by a permutation matrix. Signs of
// vectors are Jacobi's, not LAPACK's. Complex inputs take the CPU fallback.
#include <cmath>
#include <functional>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;
using hlo::Builder;

constexpr int64_t kMaxSweeps = 30;

Dims batch_of(const Value& x) { return Dims(x.dims().begin(), x.dims().end() - 2); }
Dims cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Value mT(Builder& b, const Value& x) {
  Dims perm = iota_dims(x.rank());
  std::swap(perm[x.rank() - 2], perm[x.rank() - 1]);
  return b.transpose(x, perm);
}

Value i64(Builder& b, int64_t v) { return b.constant(static_cast<double>(v), DType::I64); }
Value index(Builder& b, const Dims& dims, int64_t dim) { return b.iota(TensorType{DType::I64, dims}, dim); }

// Unit roundoff of a real floating dtype (f32 or f64 here).
double epsilon(DType t) { return hlo::byte_size(t) == 8 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23); }

// Batched matmul x[..., m, k] @ y[..., k, n].
Value bmm(Builder& b, const Value& x, const Value& y) {
  Dims batch = iota_dims(x.rank() - 2);
  return b.dot_general(x, y, batch, batch, {x.rank() - 1}, {y.rank() - 2}, x.dtype());
}

// A while loop carrying `state`; the regions capture nothing.
V loop(Builder& b, const V& state, const std::function<Value(Builder&, const V&)>& cond,
       const std::function<V(Builder&, const V&)>& body) {
  std::vector<TensorType> types;
  for (const auto& v : state) types.push_back(v.type);
  auto c = [&cond](Builder& bb, const V& args) { return V{cond(bb, args)}; };
  auto s = [&body](Builder& bb, const V& args) { return body(bb, args); };
  return b.op_multi("stablehlo.while", state, types, "", {{types, c}, {types, s}});
}

// One sweep over the pairs p < q in row-cyclic order: `rotate` gets p, q
// (i64 rank 0) and the state and returns the new state.
V sweep(Builder& b, int64_t n, const V& state, const std::function<V(Builder&, Value, Value, const V&)>& rotate) {
  int64_t pairs = n * (n - 1) / 2;
  V init{i64(b, 0), i64(b, 0), i64(b, 1)};
  init.insert(init.end(), state.begin(), state.end());
  V out = loop(
      b, init, [pairs](Builder& bb, const V& a) { return bb.compare(a[0], i64(bb, pairs), "LT"); },
      [&rotate, n](Builder& bb, const V& a) {
        Value k = a[0], p = a[1], q = a[2];
        V next = rotate(bb, p, q, V(a.begin() + 3, a.end()));
        Value q1 = bb.add(q, i64(bb, 1));
        Value wrap = bb.compare(q1, i64(bb, n), "GE");
        Value p1 = bb.select(wrap, bb.add(p, i64(bb, 1)), p);
        q1 = bb.select(wrap, bb.add(p, i64(bb, 2)), q1);
        next.insert(next.begin(), {bb.add(k, i64(bb, 1)), p1, q1});
        return next;
      });
  return V(out.begin() + 3, out.end());
}

// Runs sweeps while `more` (i1 rank 0, from the state) and fewer than kMaxSweeps.
V sweeps(Builder& b, int64_t n, const V& state, const std::function<Value(Builder&, const V&)>& more,
         const std::function<V(Builder&, Value, Value, const V&)>& rotate) {
  V init{i64(b, 0)};
  init.insert(init.end(), state.begin(), state.end());
  V out = loop(
      b, init,
      [&more](Builder& bb, const V& a) {
        return bb.and_(bb.compare(a[0], i64(bb, kMaxSweeps), "LT"), more(bb, V(a.begin() + 1, a.end())));
      },
      [&rotate, n](Builder& bb, const V& a) {
        V next = sweep(bb, n, V(a.begin() + 1, a.end()), rotate);
        next.insert(next.begin(), bb.add(a[0], i64(bb, 1)));
        return next;
      });
  return V(out.begin() + 1, out.end());
}

// True when any element of `flag` (i1) is set.
Value any(Builder& b, const Value& flag, DType t) {
  Value f = b.convert(flag, t);
  return b.compare(b.reduce(f, b.constant(0, t), iota_dims(f.rank()), "stablehlo.maximum"), b.constant(0, t), "GT");
}

// The tangent of the Jacobi rotation angle that zeroes the off-diagonal
// entry: t = sign(z) / (|z| + sqrt(1 + z^2)) with z = num / (2 den); 0 when
// den is 0.
Value rotation_tangent(Builder& b, const Value& num, const Value& den) {
  Value one = b.full(1, num.type), zero = b.full(0, num.type);
  Value z = b.div(num, b.mul(b.full(2, num.type), den));
  Value sgn = b.select(b.compare(z, zero, "GE"), one, b.neg(one));
  Value t = b.div(sgn, b.add(b.abs(z), b.sqrt(b.add(one, b.mul(z, z)))));
  return b.select(b.compare(den, zero, "EQ"), zero, t);
}

// Columns p and q of x replaced by c x_p - s x_q and s x_p + c x_q.
Value rotate_cols(Builder& b, const Value& x, Value p, Value q, const Value& c, const Value& s) {
  int64_t r = x.rank();
  Dims colshape = x.dims();
  colshape[r - 1] = 1;
  auto at = [&](Value j) {
    V st(r, i64(b, 0));
    st[r - 1] = j;
    return st;
  };
  Value xp = b.dynamic_slice(x, at(p), colshape), xq = b.dynamic_slice(x, at(q), colshape);
  Value y = b.dynamic_update_slice(x, b.sub(b.mul(c, xp), b.mul(s, xq)), at(p));
  return b.dynamic_update_slice(y, b.add(b.mul(s, xp), b.mul(c, xq)), at(q));
}

Value entry(Builder& b, const Value& x, Value i, Value j, const Dims& one) {
  int64_t r = x.rank();
  V st(r, i64(b, 0));
  st[r - 2] = i;
  st[r - 1] = j;
  return b.dynamic_slice(x, st, one);
}
Value set_entry(Builder& b, const Value& x, const Value& v, Value i, Value j) {
  int64_t r = x.rank();
  V st(r, i64(b, 0));
  st[r - 2] = i;
  st[r - 1] = j;
  return b.dynamic_update_slice(x, v, st);
}

// Permutation matrix P[..., i, j] = (perm[..., j] == i) that sorts `keys`
// [..., n] (ascending or descending, stable) as x @ P sorts columns, and the
// sorted keys.
std::pair<Value, Value> sort_perm(Builder& b, const Value& keys, bool descending) {
  int64_t r = keys.rank(), n = keys.dims().back();
  Value pos = index(b, keys.dims(), r - 1);
  TensorType s{keys.dtype(), {}}, si{DType::I64, {}};
  std::string dir = descending ? "GT" : "LT";
  V sorted = b.op_multi("stablehlo.sort", {keys, pos}, {keys.type, pos.type},
                        "dimension = " + std::to_string(r - 1) + " : i64, is_stable = true",
                        {{{s, s, si, si}, [dir](Builder& bb, const V& a) { return V{bb.compare(a[0], a[1], dir)}; }}});
  Dims pd = cat(Dims(keys.dims().begin(), keys.dims().end() - 1), {n, n});
  Dims bd = iota_dims(r - 1);
  bd.push_back(r);
  Value perm = b.broadcast_in_dim(sorted[1], pd, bd);
  Value p = b.convert(b.compare(perm, index(b, pd, r - 1), "EQ"), keys.dtype());
  return {p, sorted[0]};
}

// `kernel`: the CPU kernel's AT_DISPATCH name, which refuses what ATen's
// own checks let through (NotImplementedError): every dtype but float32/64
// and complex for eigh (whose checks follow the rank check), the low
// precision floats for svd (whose checks refuse integers first).
void require_real_float(Context& cx, const Value& x, const std::string& what, const char* kernel, bool checks_int) {
  if (hlo::is_complex(x.dtype())) cx.not_lowered(what + ": complex inputs run on the CPU");
  if (checks_int && !hlo::is_floating(x.dtype()))
    cx.fail(what + ": Expected a floating point or complex tensor as input. Got " +
            std::string(hlo::dtype_name(x.dtype())));
  if (x.rank() < 2) cx.fail(what + ": The input tensor A must have at least 2 dimensions.");
  if (!hlo::is_floating(x.dtype()) || x.dtype() == DType::BF16 || x.dtype() == DType::F16)
    refuse_dtype(cx, x.dtype(), kernel);
}

// ---- eigh

// Eigenvalues [..., n] (unsorted) and eigenvectors [..., n, n] of symmetric a.
std::pair<Value, Value> jacobi_eigh(Builder& b, const Value& a) {
  int64_t r = a.rank(), n = a.dims()[r - 1];
  Dims batch = batch_of(a), one = cat(batch, {1, 1});
  DType t = a.dtype();
  double eps = epsilon(t);
  Value offdiag = b.compare(index(b, a.dims(), r - 2), index(b, a.dims(), r - 1), "NE");
  Value v0 = b.convert(b.not_(offdiag), t);
  auto more = [&](Builder& bb, const V& s) {
    Value x = s[0];
    Value sq = bb.mul(x, x);
    Value zero = bb.constant(0, t);
    Value off = bb.sqrt(bb.reduce(bb.select(offdiag, sq, bb.full(0, sq.type)), zero, {r - 2, r - 1}, "stablehlo.add"));
    Value all = bb.sqrt(bb.reduce(sq, zero, {r - 2, r - 1}, "stablehlo.add"));
    return any(bb, bb.compare(off, bb.mul(all, bb.full(eps, all.type)), "GT"), t);
  };
  auto rotate = [&](Builder& bb, Value p, Value q, const V& s) {
    Value x = s[0], v = s[1];
    Value app = entry(bb, x, p, p, one), aqq = entry(bb, x, q, q, one), apq = entry(bb, x, p, q, one);
    Value tn = rotation_tangent(bb, bb.sub(aqq, app), apq);
    Value c = bb.rsqrt(bb.add(bb.full(1, tn.type), bb.mul(tn, tn))), sn = bb.mul(tn, c);
    x = rotate_cols(bb, x, p, q, c, sn);
    x = mT(bb, rotate_cols(bb, mT(bb, x), p, q, c, sn));
    Value zero = bb.full(0, apq.type);
    x = set_entry(bb, set_entry(bb, x, zero, p, q), zero, q, p);
    x = set_entry(bb, x, bb.sub(app, bb.mul(tn, apq)), p, p);
    x = set_entry(bb, x, bb.add(aqq, bb.mul(tn, apq)), q, q);
    return V{x, rotate_cols(bb, v, p, q, c, sn)};
  };
  V out = n > 1 ? sweeps(b, n, {a, v0}, more, rotate) : V{a, v0};
  Value diag = b.reduce(b.select(offdiag, b.full(0, a.type), out[0]), b.constant(0, t), {r - 1}, "stablehlo.add");
  return {diag, out[1]};
}

// aten::_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)
V linalg_eigh(Context& cx) {
  auto& b = cx.b;
  Value a = cx.tensor(0);
  std::string uplo = cx.none(1) ? "L" : cx.str(1);
  bool compute_v = cx.flag_or(2, true);
  require_real_float(cx, a, "linalg.eigh", "linalg_eigh_cpu", false);
  int64_t r = a.rank();
  if (a.dims()[r - 2] != a.dims()[r - 1])
    cx.fail("linalg.eigh: A must be batches of square matrices, but they are " + std::to_string(a.dims()[r - 2]) +
            " by " + std::to_string(a.dims()[r - 1]) + " matrices");
  if (uplo != "L" && uplo != "l" && uplo != "U" && uplo != "u")
    cx.fail("Expected UPLO argument to be 'L' or 'U', but got " + uplo);
  bool lower = uplo == "L" || uplo == "l";
  Value keep = b.compare(index(b, a.dims(), r - 2), index(b, a.dims(), r - 1), lower ? "GE" : "LE");
  Value sym = b.select(keep, a, mT(b, a));
  auto [w, v] = jacobi_eigh(b, sym);
  auto [perm, ws] = sort_perm(b, w, false);
  Value vecs = compute_v ? bmm(b, v, perm) : b.full(0, TensorType{a.dtype(), {0}});
  return {ws, vecs};
}

// ---- SVD

// One-sided Jacobi on the columns of a [..., m, n], m >= n: {U [..., m, n],
// S [..., n], V [..., n, n]}, sorted by descending S.
V jacobi_svd(Builder& b, const Value& a) {
  int64_t r = a.rank(), m = a.dims()[r - 2], n = a.dims()[r - 1];
  Dims batch = batch_of(a), one = cat(batch, {1, 1});
  DType t = a.dtype();
  double tol = epsilon(t) * static_cast<double>(m);
  Dims vd = cat(batch, {n, n});
  Value offdiag = b.compare(index(b, vd, r - 2), index(b, vd, r - 1), "NE");
  Value v0 = b.convert(b.not_(offdiag), t);
  Dims bdims = iota_dims(r - 2);
  auto more = [&](Builder& bb, const V& s) {
    Value x = s[0];
    Value g = bb.dot_general(x, x, bdims, bdims, {r - 2}, {r - 2}, t);  // [..., n, n]
    Value d = bb.reduce(bb.select(offdiag, bb.full(0, g.type), g), bb.constant(0, t), {r - 1}, "stablehlo.add");
    Value dr = bb.broadcast_in_dim(d, vd, cat(bdims, {r - 2})), dc = bb.broadcast_in_dim(d, vd, cat(bdims, {r - 1}));
    Value ratio = bb.div(bb.abs(g), bb.sqrt(bb.mul(dr, dc)));
    return any(bb, bb.and_(offdiag, bb.compare(ratio, bb.full(tol, ratio.type), "GT")), t);
  };
  auto rotate = [&](Builder& bb, Value p, Value q, const V& s) {
    Value x = s[0], v = s[1];
    Dims colshape = cat(batch, {m, 1});
    auto col = [&](Value j) {
      V st(r, i64(bb, 0));
      st[r - 1] = j;
      return bb.dynamic_slice(x, st, colshape);
    };
    Value xp = col(p), xq = col(q), zero = bb.constant(0, t);
    auto dot = [&](const Value& u, const Value& w) {
      return bb.reshape(bb.reduce(bb.mul(u, w), zero, {r - 2}, "stablehlo.add"), one);
    };
    Value alpha = dot(xp, xp), beta = dot(xq, xq), gamma = dot(xp, xq);
    Value tn = rotation_tangent(bb, bb.sub(beta, alpha), gamma);
    Value c = bb.rsqrt(bb.add(bb.full(1, tn.type), bb.mul(tn, tn))), sn = bb.mul(tn, c);
    return V{rotate_cols(bb, x, p, q, c, sn), rotate_cols(bb, v, p, q, c, sn)};
  };
  V out = n > 1 ? sweeps(b, n, {a, v0}, more, rotate) : V{a, v0};
  Value x = out[0];
  Value sigma = b.sqrt(b.reduce(b.mul(x, x), b.constant(0, t), {r - 2}, "stablehlo.add"));  // [..., n]
  Value sb = b.broadcast_in_dim(sigma, x.dims(), cat(bdims, {r - 1}));
  // A zero column gets e_j, as LAPACK's U of a zero matrix (the nuclear and
  // spectral norm subgradients at zero are U V^T).
  Value ej = b.convert(b.compare(index(b, x.dims(), r - 2), index(b, x.dims(), r - 1), "EQ"), t);
  Value u = b.select(b.compare(sb, b.full(0, sb.type), "EQ"), ej, b.div(x, sb));
  auto [perm, ss] = sort_perm(b, sigma, true);
  return {bmm(b, u, perm), ss, bmm(b, out[1], perm)};
}

// aten::_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=False, *, str? driver=None)
// -> (Tensor U, Tensor S, Tensor Vh)
V linalg_svd(Context& cx) {
  auto& b = cx.b;
  Value a = cx.tensor(0);
  bool full = cx.flag_or(1, false), compute_uv = cx.flag_or(2, false);
  require_real_float(cx, a, "linalg.svd", "linalg_svd_cpu", true);
  if (!cx.none(3))
    cx.fail("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend.");
  int64_t r = a.rank(), m = a.dims()[r - 2], n = a.dims()[r - 1], k = std::min(m, n);
  if (compute_uv && full && m != n) cx.not_lowered("linalg.svd: full_matrices of a non-square matrix runs on the CPU");
  Dims batch = batch_of(a);
  DType t = a.dtype();
  Value empty = b.full(0, TensorType{t, {0}});
  if (k == 0) {
    Value s = b.full(0, TensorType{t, cat(batch, {0})});
    if (!compute_uv) return {empty, s, empty};
    Dims ud = full ? cat(batch, {m, m}) : cat(batch, {m, 0}), vd = full ? cat(batch, {n, n}) : cat(batch, {0, n});
    Value ue = b.convert(b.compare(index(b, ud, r - 2), index(b, ud, r - 1), "EQ"), t);
    Value ve = b.convert(b.compare(index(b, vd, r - 2), index(b, vd, r - 1), "EQ"), t);
    return {ue, s, ve};
  }
  bool wide = m < n;
  V usv = jacobi_svd(b, wide ? mT(b, a) : a);
  if (!compute_uv) return {empty, usv[1], empty};
  // A = U S V^T; of A^T = U' S V'^T, A = V' S U'^T.
  Value u = wide ? usv[2] : usv[0], v = wide ? usv[0] : usv[2];
  return {u, usv[1], mT(b, v)};
}

}  // namespace

std::vector<Entry> linalg_spectral_lowerings() {
  return {
      {"aten::_linalg_eigh", linalg_eigh},
      {"aten::_linalg_svd", linalg_svd},
  };
}

}  // namespace torch_pjrt::lowering
