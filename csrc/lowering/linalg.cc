// Matrix products: mm, bmm, mv, dot/vdot and their scaled-accumulate forms
// (addmm, baddbmm, addbmm, addmv), all as one stablehlo.dot_general; addr
// and linalg_cross elementwise. Solvers and factorizations are in
// linalg_factor.cc, whose table is appended to this one.
//
// Operands must share a dtype (PyTorch raises otherwise, and so do these);
// float16 and bfloat16 multiply-accumulate in float32 (hlo::opmath_type) and
// round once at the end.
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// "2x3" for error messages.
std::string shape_str(const Value& v) {
  std::string s;
  for (size_t i = 0; i < v.dims().size(); ++i) s += (i ? "x" : "") + std::to_string(v.dims()[i]);
  return s;
}
// "[2, 3]" for error messages.
void require_rank(Context& cx, const Value& v, int64_t rank, const std::string& what) {
  if (v.rank() != rank)
    cx.fail(what + " must be a " +
            (rank == 1   ? "vector"
             : rank == 2 ? "matrix"
                         : std::to_string(rank) + "D tensor") +
            ", got " + std::to_string(v.rank()) + "-D tensor");
}

void require_same_dtype(Context& cx, DType a, DType b, const std::string& a_name, const std::string& b_name) {
  if (a != b)
    cx.fail("expected " + a_name + " and " + b_name + " to have the same dtype, but got: " +
            std::string(hlo::dtype_name(a)) + " != " + std::string(hlo::dtype_name(b)));
}

// dot_general computed in the opmath type of the operands' dtype (no-op
// converts for f32/f64/integers); the result stays in that opmath type.
Value product(hlo::Builder& b, Value x, Value y, const Dims& lb, const Dims& rb, const Dims& lc, const Dims& rc) {
  DType acc = hlo::opmath_type(x.dtype());
  return b.dot_general(b.convert(x, acc), b.convert(y, acc), lb, rb, lc, rc, acc);
}

// beta * self + alpha * prod, where `prod` is in the opmath type, self is
// broadcast to prod's shape, and self is ignored when beta == 0 (so NaN in
// self does not leak, as in PyTorch). beta and alpha are arguments 3 and 4.
Value scaled_add(Context& cx, const Value& self, Value prod, DType out) {
  auto& b = cx.b;
  DType acc = prod.dtype();
  Dims target = prod.dims();
  bool ok = self.rank() <= prod.rank();
  for (int64_t i = 0; ok && i < self.rank(); ++i) {
    int64_t s = self.dims()[self.rank() - 1 - i], t = target[target.size() - 1 - i];
    ok = s == t || s == 1;
  }
  if (!ok)
    cx.fail("The expanded size of the tensor cannot match: target sizes: " + dims_str(target) +
            ", tensor sizes: " + dims_str(self.dims()));
  require_same_dtype(cx, self.dtype(), out, "self", "mat1");
  Value beta = cx.none(3) ? b.constant(1, acc) : cx.as(3, acc);
  Value alpha = cx.none(4) ? b.constant(1, acc) : cx.as(4, acc);
  Value zero = b.constant(0, acc);
  Value s = b.broadcast_to(b.convert(self, acc), target);
  Value term = b.select(b.compare(beta, zero, "EQ"), zero, b.mul(beta, s));
  return b.convert(b.add(term, b.mul(alpha, prod)), out);
}

// ---- matrix @ matrix

// mat1 @ mat2 in the opmath type.
Value mm_of(Context& cx, const Value& a, const Value& m, const char* a_name, const char* m_name) {
  require_rank(cx, a, 2, a_name);
  require_rank(cx, m, 2, m_name);
  require_same_dtype(cx, a.dtype(), m.dtype(), "m1", "m2");
  if (a.dims()[1] != m.dims()[0])
    cx.fail(std::string(a_name) + " and " + m_name + " shapes cannot be multiplied (" + shape_str(a) + " and " +
            shape_str(m) + ")");
  if (a.dtype() == DType::Bool) refuse_dtype(cx, a.dtype(), "addmm_impl_cpu_");
  return product(cx.b, a, m, {}, {}, {1}, {0});
}

// aten::mm(self, mat2)
V mm(Context& cx) {
  Value a = cx.tensor(0);
  return {cx.b.convert(mm_of(cx, a, cx.tensor(1), "mat1", "mat2"), a.dtype())};
}

// aten::addmm(self, mat1, mat2, *, Scalar beta=1, Scalar alpha=1)
V addmm(Context& cx) {
  Value a = cx.tensor(1);
  return {scaled_add(cx, cx.tensor(0), mm_of(cx, a, cx.tensor(2), "mat1", "mat2"), a.dtype())};
}

// ---- batched

// Tensor::size(d) as ATen reads it: a 0-dim tensor has no dim to read
// (IndexError), others wrap d against their rank.
int64_t size_at(Context& cx, const Value& v, int64_t d) {
  if (v.rank() == 0)
    cx.fail("Dimension specified as " + std::to_string(d) + " but tensor has no dimensions", ErrorKind::Index);
  return v.dims()[cx.dim(d, v.rank())];
}

// Checks for batch1 @ batch2 of shapes [b, n, k] and [b, k, p].
void check_bmm(Context& cx, const Value& x, const Value& y) {
  require_rank(cx, x, 3, "batch1");
  require_rank(cx, y, 3, "batch2");
  require_same_dtype(cx, x.dtype(), y.dtype(), "m1", "m2");
  if (y.dims()[0] != x.dims()[0] || y.dims()[1] != x.dims()[2])
    cx.fail("Expected size for first two dimensions of batch2 tensor to be: [" + std::to_string(x.dims()[0]) + ", " +
            std::to_string(x.dims()[2]) + "] but got: [" + std::to_string(y.dims()[0]) + ", " +
            std::to_string(y.dims()[1]) + "].");
}
// The bool refusal of the batched kernels (after their shape checks).
void refuse_bool(Context& cx, const Value& x, const char* kernel) {
  if (x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), kernel);
}

// aten::bmm(self, mat2)
V bmm(Context& cx) {
  Value x = cx.tensor(0), y = cx.tensor(1);
  check_bmm(cx, x, y);
  refuse_bool(cx, x, "bmm");
  return {cx.b.convert(product(cx.b, x, y, {0}, {0}, {2}, {1}), x.dtype())};
}

// aten::baddbmm(self, batch1, batch2, *, Scalar beta=1, Scalar alpha=1)
V baddbmm(Context& cx) {
  Value x = cx.tensor(1), y = cx.tensor(2);
  // ATen reads the result's sizes (self expanded to them) before its checks.
  size_at(cx, x, 0);
  size_at(cx, x, 1);
  size_at(cx, y, 2);
  check_bmm(cx, x, y);
  refuse_bool(cx, x, "baddbmm");
  return {scaled_add(cx, cx.tensor(0), product(cx.b, x, y, {0}, {0}, {2}, {1}), x.dtype())};
}

// aten::addbmm(self, batch1, batch2, *, Scalar beta=1, Scalar alpha=1): the
// batch products summed over the batch, [n, p].
V addbmm(Context& cx) {
  Value x = cx.tensor(1), y = cx.tensor(2);
  // ATen reads the result's sizes (self expanded to them) before its checks.
  size_at(cx, x, 1);
  size_at(cx, y, 2);
  check_bmm(cx, x, y);
  refuse_bool(cx, x, "addmm_impl_cpu_");
  return {scaled_add(cx, cx.tensor(0), product(cx.b, x, y, {}, {}, {0, 2}, {0, 1}), x.dtype())};
}

// ---- matrix @ vector, vector . vector

// mat @ vec in the opmath type; `self_rank` is that of addmv's self (1 for
// mv, whose self is empty({mat.size(0)})), which ATen's message names first.
Value mv_of(Context& cx, const Value& m, const Value& v, int64_t self_rank) {
  if (m.rank() != 2 || v.rank() != 1 || self_rank > 1)
    cx.fail("vector + matrix @ vector expected, got " + std::to_string(self_rank) + ", " + std::to_string(m.rank()) +
            ", " + std::to_string(v.rank()));
  require_same_dtype(cx, m.dtype(), v.dtype(), "m1", "m2");
  if (m.dims()[1] != v.dims()[0]) cx.fail("size mismatch, got mat (" + shape_str(m) + "), vec (" + shape_str(v) + ")");
  if (m.dtype() == DType::Bool) refuse_dtype(cx, m.dtype(), "addmv_impl_cpu");
  return product(cx.b, m, v, {}, {}, {1}, {0});
}

// aten::mv(self, vec)
V mv(Context& cx) {
  Value m = cx.tensor(0);
  size_at(cx, m, 0);  // ATen sizes the result by mat.size(0) first
  return {cx.b.convert(mv_of(cx, m, cx.tensor(1), 1), m.dtype())};
}

// aten::addmv(self, mat, vec, *, Scalar beta=1, Scalar alpha=1)
V addmv(Context& cx) {
  Value m = cx.tensor(1);
  return {scaled_add(cx, cx.tensor(0), mv_of(cx, m, cx.tensor(2), cx.tensor(0).rank()), m.dtype())};
}

// aten::dot(self, tensor)
V dot(Context& cx) {
  Value x = cx.tensor(0), y = cx.tensor(1);
  if (x.rank() != 1 || y.rank() != 1)
    cx.fail("1D tensors expected, but got " + std::to_string(x.rank()) + "D and " + std::to_string(y.rank()) +
            "D tensors");
  if (x.dtype() != y.dtype())
    cx.fail("dot : expected both vectors to have same dtype, but found " + std::string(hlo::dtype_name(x.dtype())) +
            " and " + std::string(hlo::dtype_name(y.dtype())));
  if (x.dims()[0] != y.dims()[0])
    cx.fail("inconsistent tensor size, expected tensor [" + std::to_string(x.dims()[0]) + "] and src [" +
            std::to_string(y.dims()[0]) + "] to have the same number of elements, but got " +
            std::to_string(x.dims()[0]) + " and " + std::to_string(y.dims()[0]) + " elements respectively");
  if (x.dtype() == DType::Bool) refuse_dtype(cx, x.dtype(), "dot");
  return {cx.b.convert(product(cx.b, x, y, {}, {}, {0}, {0}), x.dtype())};
}

// aten::vdot(self, other): for real dtypes the same as dot.
V vdot(Context& cx) { return dot(cx); }

// aten::addr(self, vec1, vec2, *, Scalar beta=1, Scalar alpha=1): computed in
// the result dtype one operation at a time, as ATen's CPU kernel does
// (bfloat16 rounds after every product and sum), and self is ignored when
// beta == 0.
V addr(Context& cx) {
  auto& b = cx.b;
  Value v1 = cx.tensor(1), v2 = cx.tensor(2);
  if (v1.rank() != 1) cx.fail("addr: Expected 1-D argument vec1, but got " + std::to_string(v1.rank()) + "-D");
  if (v2.rank() != 1) cx.fail("addr: Expected 1-D argument vec2, but got " + std::to_string(v2.rank()) + "-D");
  DType t = cx.result_type({0, 1, 2});
  Dims target{v1.dims()[0], v2.dims()[0]};
  Value self = cx.as(0, t);
  if (self.rank() > 2) cx.fail("addr: self must be at most 2-D");
  hlo::broadcast_shapes(self.dims(), target);
  Value beta = cx.none(3) ? b.constant(1, t) : cx.as(3, t);
  Value alpha = cx.none(4) ? b.constant(1, t) : cx.as(4, t);
  Value a = b.broadcast_in_dim(b.convert(v1, t), target, {0});
  Value c = b.broadcast_in_dim(b.convert(v2, t), target, {1});
  Value prod = b.mul(b.mul(alpha, a), c);
  Value s = b.broadcast_to(self, target);
  Value zero = b.constant(0, t);
  return {b.select(b.compare(beta, zero, "EQ"), prod, b.add(b.mul(beta, s), prod))};
}

// aten::linalg_cross(self, other, *, int dim=-1): computed in the result
// dtype, as ATen's kernel does.
V linalg_cross(Context& cx) {
  auto& b = cx.b;
  auto [x, y] = promote(cx, 0, 1);
  if (x.rank() != y.rank()) cx.fail("linalg.cross: inputs must have the same number of dimensions.");
  int64_t given = cx.integer_or(2, -1);
  int64_t xs = size_at(cx, x, given), ys = size_at(cx, y, given);
  if (xs != 3 || ys != 3)
    cx.fail("linalg.cross: inputs dimension " + std::to_string(given) + " must have length 3. Got " +
            std::to_string(xs) + " and " + std::to_string(ys));
  Dims d = hlo::broadcast_shapes(x.dims(), y.dims());
  int64_t r = static_cast<int64_t>(d.size());
  int64_t dim = cx.dim(given, r);
  x = b.broadcast_to(x, d);
  y = b.broadcast_to(y, d);
  auto part = [&](const Value& v, int64_t i) {
    Dims lo(r, 0), hi = d, st(r, 1);
    lo[dim] = i;
    hi[dim] = i + 1;
    return b.slice(v, lo, hi, st);
  };
  Value x0 = part(x, 0), x1 = part(x, 1), x2 = part(x, 2), y0 = part(y, 0), y1 = part(y, 1), y2 = part(y, 2);
  return {b.concatenate(
      {b.sub(b.mul(x1, y2), b.mul(x2, y1)), b.sub(b.mul(x2, y0), b.mul(x0, y2)), b.sub(b.mul(x0, y1), b.mul(x1, y0))},
      dim)};
}

}  // namespace

std::vector<Entry> linalg_factor_lowerings();  // linalg_factor.cc

std::vector<Entry> linalg_lowerings() {
  std::vector<Entry> entries = {
      {"aten::mm", mm, Traits().set_out_same_dtype().set_shape_generic()},
      {"aten::bmm", bmm, Traits().set_shape_generic()},
      {"aten::addmm", addmm, Traits().set_shape_generic()},
      {"aten::baddbmm", baddbmm},
      {"aten::addbmm", addbmm},
      {"aten::mv", mv},
      {"aten::addmv", addmv},
      {"aten::dot", dot},
      {"aten::vdot", vdot},
      {"aten::addr", addr},
      {"aten::linalg_cross", linalg_cross},
  };
  for (const Entry& e : linalg_factor_lowerings()) entries.push_back(e);
  return entries;
}

}  // namespace torch_pjrt::lowering
