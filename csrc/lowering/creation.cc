// Creation ops: arange, linspace, logspace, eye and tril/triu_indices. The
// factories fill a preallocated output (their out= form is the one backends
// implement); the output tensor arrives as the last argument.
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// arange.start_out(start, end, step, *, out): out[i] = start + i * step. The
// composite op sized `out` on the host, so only start and step matter here.
V arange_start_out(Context& cx) {
  Value out = cx.tensor(3);
  DType t = out.dtype();
  // arange_cpu dispatches over the real non-bool dtypes, and reads the Scalars
  // as its accumulate type (double for floats, int64 for integers).
  if (hlo::is_complex(t) || t == DType::Bool) refuse_dtype(cx, t, "arange_cpu");
  for (size_t i : {0, 1, 2}) check_scalar_fits(cx, i, hlo::is_floating(t) ? DType::F64 : DType::I64);
  DType compute = hlo::is_floating(t) ? DType::F64 : DType::I64;
  Value i = cx.b.iota(TensorType{compute, out.dims()}, 0);
  Value r = cx.b.convert(cx.b.add(cx.as(0, compute), cx.b.mul(i, cx.as(2, compute))), t);
  if (out.type.is_dynamic(0)) r = cx.b.set_dimension_size(r, cx.b.dimension_size(out, 0), 0);  // shape buckets
  return {r};
}

// The out tensor of a factory op, which the composite op allocated with the
// expected shape (an out= tensor of another shape is refused, not resized).
Value sized_out(Context& cx, size_t i, const Dims& dims) {
  Value out = cx.tensor(i);
  if (out.dims() != dims) {
    std::string want, got;
    for (int64_t d : dims) want += (want.empty() ? "" : ", ") + std::to_string(d);
    for (int64_t d : out.dims()) got += (got.empty() ? "" : ", ") + std::to_string(d);
    cx.fail("out= tensor of shape [" + got + "] must already have the result's shape [" + want + "]");
  }
  return out;
}

// The points of linspace(start, end, steps) as ATen's CPU kernel computes
// them, in dtype `t`: step = (end - start) / (steps - 1), the first half
// start + step * i and the second half end - step * (steps - 1 - i).
// Integral outputs truncate start and end first and step in double; a single
// step gives start.
Value linspace_points(Context& cx, int64_t steps, DType out) {
  auto& b = cx.b;
  bool integral = !hlo::is_floating(out);
  DType t = integral ? DType::F64 : hlo::opmath_type(out);
  Value start = b.convert(cx.as(0, out), t);
  Value end = b.convert(cx.as(1, out), t);
  TensorType type{t, {steps}};
  if (steps == 1) return b.broadcast_to(start, {1});
  Value step = b.div(b.sub(end, start), b.constant(static_cast<double>(steps - 1), t));
  if (!integral) step = b.convert(b.convert(step, out), t);  // CPU rounds step to the output dtype
  Value i = b.iota(type, 0);
  Value first = b.add(start, b.mul(step, i));
  Value second = b.sub(end, b.mul(step, b.sub(b.constant(static_cast<double>(steps - 1), t), i)));
  Value lower_half = b.compare(i, b.constant(static_cast<double>(steps / 2), t), "LT");
  return b.select(lower_half, first, second);
}

// linspace.out(start, end, steps, *, out)
// CPU fills a single step with start (linspace: fill_, which reads start as
// the output's dtype) and only dispatches for two steps or more:
// linspace_cpu / logspace_cpu take every dtype but bool and read start and
// end as the output's dtype.
void check_space_out(Context& cx, int64_t steps, const Value& out, const char* kernel) {
  bool linspace = std::string(kernel) == "linspace_cpu";
  if (steps == 1 && linspace) check_scalar_fits(cx, 0, out.dtype());
  if (steps < 2) return;
  if (out.dtype() == DType::Bool) refuse_dtype(cx, out.dtype(), kernel);
  for (size_t i : {0, 1}) check_scalar_fits(cx, i, out.dtype());
}

V linspace_out(Context& cx) {
  int64_t steps = cx.integer(2);
  if (steps < 0) cx.fail("number of steps must be non-negative");
  check_space_out(cx, steps, cx.tensor(3), "linspace_cpu");
  Value out = sized_out(cx, 3, {steps});
  if (steps == 0) return {out};
  return {cx.b.convert(linspace_points(cx, steps, out.dtype()), out.dtype())};
}

// logspace.out(start, end, steps, base, *, out): base ** linspace(...), the
// power taken in double as on CPU.
V logspace_out(Context& cx) {
  auto& b = cx.b;
  int64_t steps = cx.integer(2);
  if (steps < 0) cx.fail("number of steps must be non-negative");
  check_space_out(cx, steps, cx.tensor(4), "logspace_cpu");
  Value out = sized_out(cx, 4, {steps});
  if (steps == 0) return {out};
  Value e = b.convert(linspace_points(cx, steps, out.dtype()), DType::F64);
  Value base = b.broadcast_to(cx.as(3, DType::F64), {steps});
  return {b.convert(b.binary("stablehlo.power", base, e), out.dtype())};
}

// Ones on the main diagonal of an n x m matrix of out's dtype.
Value eye_of(Context& cx, int64_t n, int64_t m, size_t out_arg) {
  if (n < 0) cx.fail("n must be greater or equal to 0, got " + std::to_string(n));
  if (m < 0) cx.fail("m must be greater or equal to 0, got " + std::to_string(m));
  Value out = sized_out(cx, out_arg, {n, m});
  auto& b = cx.b;
  TensorType t{DType::I64, {n, m}};
  Value row = b.iota(t, 0);  // sequenced: the golden text depends on the order
  Value col = b.iota(t, 1);
  return b.convert(b.compare(row, col, "EQ"), out.dtype());
}
// eye.out(n, *, out) and eye.m_out(n, m, *, out)
V eye_out(Context& cx) { return {eye_of(cx, cx.integer(0), cx.integer(0), 1)}; }
V eye_m_out(Context& cx) { return {eye_of(cx, cx.integer(0), cx.integer(1), 2)}; }

// triu_indices / tril_indices(row, col, offset, *, dtype, ...): the [2, K]
// coordinates of the upper (lower) triangle in row-major order. They depend
// only on the static sizes, so they are one constant.
Value triangle_indices(Context& cx, bool upper) {
  int64_t rows = cx.integer(0), cols = cx.integer(1), offset = cx.integer_or(2, 0);
  const char* name = upper ? "triu_indices" : "tril_indices";
  if (rows < 0) cx.fail(std::string(name) + ": row must be non-negative, got" + std::to_string(rows));
  if (cols < 0) cx.fail(std::string(name) + ": col must be non-negative, got" + std::to_string(cols));
  DType out = cx.none(3) ? DType::I64 : cx.dtype(3);
  if (out != DType::I64 && out != DType::I32) refuse_dtype(cx, out, name);  // AT_DISPATCH_INDEX_TYPES
  std::string is, js;
  int64_t k = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      if (upper ? j - i < offset : j - i > offset) continue;
      is += (k ? ", " : "") + std::to_string(i);
      js += (k ? ", " : "") + std::to_string(j);
      ++k;
    }
  TensorType type{DType::I64, {2, k}};
  if (k == 0) return cx.b.full(0, TensorType{out, {2, 0}});
  Value v = cx.b.op("stablehlo.constant", {}, type, "value = dense<[[" + is + "], [" + js + "]]> : " + type.str());
  return cx.b.convert(v, out);
}
V triu_indices(Context& cx) { return {triangle_indices(cx, true)}; }
V tril_indices(Context& cx) { return {triangle_indices(cx, false)}; }

}  // namespace

std::vector<Entry> creation_lowerings() {
  return {
      {"aten::arange.start_out", arange_start_out, Traits().set_out_sizing(OutSizing::Arange).set_shape_generic()},
      {"aten::linspace.out", linspace_out, Traits().set_out_sizing(OutSizing::Space)},
      {"aten::logspace.out", logspace_out, Traits().set_out_sizing(OutSizing::Space)},
      {"aten::eye.out", eye_out, Traits().set_out_sizing(OutSizing::Eye)},
      {"aten::eye.m_out", eye_m_out, Traits().set_out_sizing(OutSizing::Eye)},
      {"aten::triu_indices", triu_indices},
      {"aten::tril_indices", tril_indices},
  };
}

}  // namespace torch_pjrt::lowering
