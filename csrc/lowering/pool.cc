// Pooling and resampling, with their backward passes: max pooling with
// indices and average pooling (2d and 3d; PyTorch's 1d pools call the 2d
// ops), adaptive average and max pooling, nearest, (bi/tri)linear, bicubic
// and antialiased bilinear upsampling, and max_unpool.
// Sums and interpolation run in the compute dtype (float32 for
// float16/bfloat16) and round once, as PyTorch's CPU kernels do.
//
// Windows are stablehlo.reduce_window over the input padded with
// stablehlo.pad (negative high padding drops what floor mode leaves out,
// positive high padding is ceil mode's last partial window). A backward
// pass is a scatter-add (max pool, upsampling), the window sum of the
// dilated gradient (avg pool), or a masked gather-sum (adaptive pool).
#include <algorithm>
#include <cmath>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// A rank-1 constant from host values (finite).
Value vec_constant(hlo::Builder& b, const std::vector<double>& v, DType t) {
  TensorType type{t, {static_cast<int64_t>(v.size())}};
  std::string s = "value = dense<[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + hlo::literal(v[i], t);
  return b.op("stablehlo.constant", {}, type, s + "]> : " + type.str());
}

// ---- window geometry

// The spatial parameters of a pool: one value applies to every spatial dim;
// an empty stride means the kernel size.
Dims expand(Context& cx, const std::vector<int64_t>& v, int64_t n, const char* what) {
  if (static_cast<int64_t>(v.size()) == n) return Dims(v.begin(), v.end());
  if (v.size() == 1) return Dims(n, v[0]);
  cx.fail(std::string(what) + " must have 1 or " + std::to_string(n) + " elements");
}

// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

struct Pool {
  int64_t lead;  // leading (batch, channel) dims, not pooled
  Dims k, s, p, d, in, out;
  // Padding that makes the windows of the output tile the padded input:
  // low = p, high may be negative (floor mode) or exceed p (ceil mode).
  Dims pad_lo() const {
    Dims r(lead, 0);
    r.insert(r.end(), p.begin(), p.end());
    return r;
  }
  Dims pad_hi() const {
    Dims r(lead, 0);
    for (size_t i = 0; i < k.size(); ++i) r.push_back((out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 - in[i] - p[i]);
    return r;
  }
  Dims full(const Dims& spatial) const {  // leading ones + spatial
    Dims r(lead, 1);
    r.insert(r.end(), spatial.begin(), spatial.end());
    return r;
  }
};

// Reads kernel_size, stride, padding (and dilation when dil >= 0) of an
// n-d pool over `x` at argument positions ki..., with the checks of CPU's
// pool{2,3}d_shape_check (`kernel` names the 3-d one in its messages).
Pool pool_geometry(Context& cx, const Value& x, int64_t n, size_t ki, int dil, bool ceil, const char* kernel) {
  if (x.rank() != n + 1 && x.rank() != n + 2)
    cx.fail("expected a " + std::to_string(n + 1) + "d or " + std::to_string(n + 2) + "d input");
  Pool g;
  g.lead = x.rank() - n;
  g.k = expand(cx, cx.ints(ki), n, "kernel_size");
  g.s = cx.ints(ki + 1).empty() ? g.k : expand(cx, cx.ints(ki + 1), n, "stride");
  g.p = expand(cx, cx.ints(ki + 2), n, "padding");
  g.d = dil >= 0 ? expand(cx, cx.ints(dil), n, "dilation") : Dims(n, 1);
  for (int64_t i = 0; i < n; ++i) {
    if (g.k[i] < 1 || g.s[i] < 1 || g.d[i] < 1 || g.p[i] < 0) cx.fail("kernel, stride and dilation must be positive");
    if (g.p[i] > (g.d[i] * (g.k[i] - 1) + 1) / 2) cx.fail("pad should be at most half of effective kernel size");
  }
  // pool{2,3}d_shape_check: every dim but a batch dim may not be empty.
  const Dims& dims = x.dims();
  for (int64_t i = x.rank() == n + 2 ? 1 : 0; i < x.rank(); ++i) {
    if (dims[i] != 0) continue;
    if (n == 2)
      cx.fail("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:" +
              dims_str(dims));
    // CPU's message names dimension 0 whichever dim is empty.
    cx.fail(std::string(kernel) +
            ": Expected input's non-batch dimensions to have positive length, but input has a "
            "shape of " +
            dims_str(dims) + " and non-batch dimension 0 has length zero!");
  }
  for (int64_t i = 0; i < n; ++i) {
    g.in.push_back(x.dims()[g.lead + i]);
    g.out.push_back(pool_out(g.in[i], g.k[i], g.p[i], g.s[i], g.d[i], ceil));
    if (g.out[i] < 1) cx.fail("output size is too small");
  }
  return g;
}

// stablehlo.reduce_window over `xs` (no padding) with one region.
std::vector<Value> reduce_window(hlo::Builder& b, const std::vector<Value>& xs, const std::vector<Value>& inits,
                                 const Dims& window, const Dims& strides, const Dims& dilations,
                                 const hlo::Builder::RegionFn& body) {
  Dims out;
  for (size_t i = 0; i < window.size(); ++i)
    out.push_back((xs[0].dims()[i] - (window[i] - 1) * dilations[i] - 1) / strides[i] + 1);
  std::vector<TensorType> results, args;
  for (const auto& x : xs) results.push_back({x.dtype(), out});
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& x : xs) args.push_back({x.dtype(), {}});
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return b.op_multi("stablehlo.reduce_window", operands, results,
                    "window_dimensions = " + i64_array(window) + ", window_strides = " + i64_array(strides) +
                        ", window_dilations = " + i64_array(dilations),
                    {{args, body}});
}

Value window_sum(hlo::Builder& b, Value x, const Dims& window, const Dims& strides) {
  return reduce_window(b, {x}, {b.constant(0, x.dtype())}, window, strides, Dims(window.size(), 1),
                       [](hlo::Builder& b, const std::vector<Value>& a) { return V{b.add(a[0], a[1])}; })[0];
}

// ---- max pool

// The flat index of each element within its plane (the pooled dims).
Value plane_index(hlo::Builder& b, const Dims& dims, int64_t lead) {
  TensorType t{DType::I64, dims};
  Value idx;
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= lead; --d) {
    Value term = b.mul(b.iota(t, d), b.constant(static_cast<double>(stride), DType::I64));
    idx = idx.id < 0 ? term : b.add(idx, term);
    stride *= dims[d];
  }
  return idx;
}

// Larger of two (value, index) pairs as PyTorch's CPU kernel picks while it
// scans a window in order: NaN beats everything (the last NaN wins), then
// the larger value, then on ties the first (smaller) index. A total order,
// so the reduction order does not matter.
V max_with_index(hlo::Builder& b, const std::vector<Value>& a) {
  Value va = a[0], ia = a[1], vb = a[2], ib = a[3];
  Value a_nan = b.compare(va, va, "NE"), b_nan = b.compare(vb, vb, "NE");
  Value by_value = b.or_(b.compare(vb, va, "GT"), b.and_(b.compare(vb, va, "EQ"), b.compare(ib, ia, "LT")));
  Value by_nan = b.or_(b.and_(b_nan, b.not_(a_nan)), b.and_(b.and_(a_nan, b_nan), b.compare(ib, ia, "GT")));
  Value take_b = b.or_(by_nan, by_value);
  return {b.select(take_b, vb, va), b.select(take_b, ib, ia)};
}

// Padding's index: larger than any real one, so a real -inf wins a tie.
constexpr double kPadIndex = 4611686018427387904.0;  // 2^62

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation,
//   ceil_mode) -> (out, indices)
template <int N>
V max_pool_with_indices(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  Pool g = pool_geometry(cx, x, N, 1, 4, cx.flag(5), "max_pool3d_with_indices_out_cpu_template()");
  Dims zeros(x.rank(), 0);
  Value idx = plane_index(b, x.dims(), g.lead);
  Value xp = b.pad(x, b.constant(-INFINITY, x.dtype()), g.pad_lo(), g.pad_hi(), zeros);
  Value ip = b.pad(idx, b.constant(kPadIndex, DType::I64), g.pad_lo(), g.pad_hi(), zeros);
  auto r = reduce_window(b, {xp, ip}, {b.constant(-INFINITY, x.dtype()), b.constant(kPadIndex, DType::I64)},
                         g.full(g.k), g.full(g.s), g.full(g.d), max_with_index);
  return {r[0], r[1]};
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size,
//   stride, padding, dilation, ceil_mode, indices) and
// adaptive_max_pool{2,3}d_backward(grad_output, self, indices): each
// gradient is added at its window's recorded index.
template <int N, size_t IndicesArg = 7>
V max_pool_with_indices_backward(Context& cx) {
  auto& b = cx.b;
  Value go = cx.tensor(0), self = cx.tensor(1);
  int64_t lead = self.rank() - N;
  if (lead < 1) cx.fail("input has too few dims");
  DType t = hlo::opmath_type(float_type(self.dtype()));
  int64_t rows = numel(Dims(self.dims().begin(), self.dims().begin() + lead));
  int64_t plane = numel(Dims(self.dims().begin() + lead, self.dims().end()));
  int64_t q = go.type.numel() / std::max<int64_t>(rows, 1);
  Value g = b.reshape(b.convert(go, t), {rows, q});
  Value ind = b.reshape(cx.as(IndicesArg, DType::I64), {rows, q, 1});
  Value index = b.concatenate({b.iota({DType::I64, {rows, q, 1}}, 0), ind}, 2);
  Value r = b.scatter(b.full(0, {t, {rows, plane}}), index, g, {}, {0, 1}, {0, 1}, "stablehlo.add");
  return {b.convert(b.reshape(r, self.dims()), self.dtype())};
}

// ---- average pool

// Divisor of each output along one dim (PyTorch's cpu_avg_pool): the window
// clipped to the padded input, or to the input itself; 1 for a window that
// lies wholly in the padding (its sum is 0).
std::vector<double> avg_factors(int64_t in, int64_t k, int64_t s, int64_t p, int64_t out, bool include_pad) {
  std::vector<double> f;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p, end = std::min(start + k, in + p), size = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    f.push_back(end <= start ? 1.0 : static_cast<double>(include_pad ? size : end - start));
  }
  return f;
}

// The divisor of every output element, broadcastable to `dims`.
Value avg_divisor(Context& cx, const Pool& g, bool include_pad, size_t override_arg, DType t, const Dims& dims) {
  auto& b = cx.b;
  if (!cx.none(override_arg)) {
    int64_t d = cx.integer(override_arg);
    if (d == 0) cx.fail("divisor must be not zero");
    return b.constant(static_cast<double>(d), t);
  }
  Value div;
  for (size_t i = 0; i < g.k.size(); ++i) {
    Value f = vec_constant(b, avg_factors(g.in[i], g.k[i], g.s[i], g.p[i], g.out[i], include_pad), t);
    f = b.broadcast_in_dim(f, dims, {g.lead + static_cast<int64_t>(i)});
    div = div.id < 0 ? f : b.mul(div, f);
  }
  return div;
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode,
//   count_include_pad, divisor_override?)
// What CPU's avg_pool meta functions check before the rank: the window's
// lengths and divisor_override, then the input's sizes from dim -(N + 1)
// on (IndexError for a smaller rank; 2-d only).
void avg_pool_sizes(Context& cx, const Value& x, int64_t n, size_t ki, size_t override_arg) {
  expand(cx, cx.ints(ki), n, "kernel_size");
  if (!cx.ints(ki + 1).empty()) expand(cx, cx.ints(ki + 1), n, "stride");
  expand(cx, cx.ints(ki + 2), n, "padding");
  if (!cx.none(override_arg) && cx.integer(override_arg) == 0) cx.fail("divisor must be not zero");
  if (n == 2)  // avg_pool3d checks the rank first
    for (int64_t d = -(n + 1); d < 0; ++d) size_at(cx, x, d);
}
// The dtypes CPU's avg_pool kernels take: float, double and int64, and
// float16/bfloat16 in 2-d. An empty input returns before the kernel.
void avg_pool_dtype(Context& cx, const Value& x, int64_t n, bool backward) {
  DType t = x.dtype();
  bool ok = t == DType::F32 || t == DType::F64 || t == DType::I64 || (n == 2 && (t == DType::F16 || t == DType::BF16));
  if (!ok && x.type.numel() != 0)
    refuse_dtype(cx, t,
                 n == 2 ? (backward ? "avg_pool2d_backward" : "avg_pool2d")
                        : (backward ? "avg_pool3d_backward_out_frame" : "avg_pool3d_out_frame"));
}

template <int N>
V avg_pool(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  avg_pool_sizes(cx, in, N, 1, 6);
  Pool g = pool_geometry(cx, in, N, 1, -1, cx.flag(4), "avg_pool3d()");
  avg_pool_dtype(cx, in, N, false);
  Value x = b.pad(b.convert(in, t), b.constant(0, t), g.pad_lo(), g.pad_hi(), Dims(in.rank(), 0));
  Value sum = window_sum(b, x, g.full(g.k), g.full(g.s));
  return {b.convert(b.div(sum, avg_divisor(cx, g, cx.flag(5), 6, t, sum.dims())), in.dtype())};
}

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding,
//   ceil_mode, count_include_pad, divisor_override?): input element i gets
// the scaled gradients of the windows that cover it, a window sum over the
// gradient dilated by the stride.
template <int N>
V avg_pool_backward(Context& cx) {
  auto& b = cx.b;
  Value self = cx.tensor(1);
  DType t = hlo::opmath_type(float_type(self.dtype()));
  avg_pool_sizes(cx, self, N, 2, 7);
  Pool g = pool_geometry(cx, self, N, 2, -1, cx.flag(5), "avg_pool3d_backward()");
  {  // CPU's check_dim_size of grad_output: planes, then each pooled dim
    Value grad = cx.tensor(0);
    int64_t r = self.rank();
    std::vector<std::pair<int64_t, int64_t>> want{{r - N - 1, self.dims()[r - N - 1]}};
    for (int64_t i = 0; i < N; ++i) want.push_back({g.lead + i, g.out[i]});
    for (auto [dim, size] : want)
      if (grad.rank() != r || grad.dims()[dim] != size)
        cx.fail("Expected a tensor of dimension " + std::to_string(r) + " and tensor.size[" + std::to_string(dim) +
                "] == " + std::to_string(size) + " but got: dimension " + std::to_string(grad.rank()) +
                " and tensor.size[" + std::to_string(dim) +
                "] = " + (dim < grad.rank() ? std::to_string(grad.dims()[dim]) : std::string("?")));
  }
  avg_pool_dtype(cx, cx.tensor(0), N, true);
  Value go = b.convert(cx.tensor(0), t);
  Value scaled = b.div(go, avg_divisor(cx, g, cx.flag(6), 7, t, go.dims()));
  Dims lo(g.lead, 0), hi(g.lead, 0), interior(g.lead, 0);
  for (int64_t i = 0; i < N; ++i) {
    lo.push_back(g.k[i] - 1 - g.p[i]);
    interior.push_back(g.s[i] - 1);
    hi.push_back(g.in[i] + g.k[i] - 1 - lo.back() - ((g.out[i] - 1) * g.s[i] + 1));
  }
  Value padded = b.pad(scaled, b.constant(0, t), lo, hi, interior);
  Value r = window_sum(b, padded, g.full(g.k), g.full(Dims(N, 1)));
  return {b.convert(r, self.dtype())};
}

// ---- adaptive average pool

// Window of output o of an adaptive pool from `in` to `out`: [start, end).
int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

// Sums x along `dim` over a table of index lists, one list per result row:
// result[..., r, ...] = sum of x[..., j, ...] for j in table[r].
Value gather_sum(hlo::Builder& b, Value x, int64_t dim, const std::vector<std::vector<int64_t>>& table) {
  int64_t rows = static_cast<int64_t>(table.size()), width = 1;
  for (const auto& row : table) width = std::max<int64_t>(width, static_cast<int64_t>(row.size()));
  // Rows shorter than `width` are padded with index 0, masked off. (The mask
  // is a constant of its own: the plugin folds compares of constant signed
  // integers as unsigned.)
  std::vector<double> flat, present;
  for (const auto& row : table)
    for (int64_t j = 0; j < width; ++j) {
      bool in = j < static_cast<int64_t>(row.size());
      flat.push_back(in ? static_cast<double>(row[j]) : 0.0);
      present.push_back(in ? 1.0 : 0.0);
    }
  Value idx = b.reshape(vec_constant(b, flat, DType::I64), {rows, width});
  Value valid = b.reshape(vec_constant(b, present, DType::Bool), {rows, width});
  Value got = b.take_along(x, idx, dim);
  got = b.select(b.broadcast_in_dim(valid, got.dims(), {dim, dim + 1}), got, b.constant(0, x.dtype()));
  return b.reduce(got, b.constant(0, x.dtype()), {dim + 1}, "stablehlo.add");
}

// Window sizes of an adaptive pool, multiplied over the pooled dims.
Value adaptive_counts(hlo::Builder& b, const Dims& in, const Dims& out, int64_t lead, DType t, const Dims& dims) {
  Value cnt;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<double> c;
    for (int64_t o = 0; o < out[i]; ++o)
      c.push_back(static_cast<double>(adaptive_end(o, in[i], out[i]) - adaptive_start(o, in[i], out[i])));
    Value f = b.broadcast_in_dim(vec_constant(b, c, t), dims, {lead + static_cast<int64_t>(i)});
    cnt = cnt.id < 0 ? f : b.mul(cnt, f);
  }
  return cnt;
}

// adaptive_{avg,max}_pool{2,3}d: no dim from `from` on may be empty (every
// one but the first; adaptive_avg_pool2d checks only the pooled ones).
void adaptive_nonempty(Context& cx, const Value& x, const std::string& name, int64_t from = 1) {
  for (int64_t i = from; i < x.rank(); ++i)
    if (x.dims()[i] == 0)
      cx.fail(name + "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes " +
              dims_str(x.dims()) + " with dimension " + std::to_string(i) + " being empty");
}

// _adaptive_avg_pool{2,3}d(self, output_size)
template <int N>
V adaptive_avg_pool(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  int64_t lead = in.rank() - N;
  if (lead < 1 || lead > 2) cx.fail("unexpected input rank");
  if (N == 2)
    adaptive_nonempty(cx, in, "adaptive_avg_pool2d", in.rank() - 2);
  else
    adaptive_nonempty(cx, in, "adaptive_avg_pool3d");
  Dims out = expand(cx, cx.ints(1), N, "output_size"), sizes(in.dims().begin() + lead, in.dims().end());
  if (in.type.numel() != 0) floating_kernel(cx, in.dtype(), N == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d_cpu");
  DType t = hlo::opmath_type(float_type(in.dtype()));
  Value x = b.convert(in, t);
  for (int64_t i = N - 1; i >= 0; --i) {
    std::vector<std::vector<int64_t>> table(out[i]);
    for (int64_t o = 0; o < out[i]; ++o)
      for (int64_t j = adaptive_start(o, sizes[i], out[i]); j < adaptive_end(o, sizes[i], out[i]); ++j)
        table[o].push_back(j);
    x = gather_sum(b, x, lead + i, table);
  }
  return {b.convert(b.div(x, adaptive_counts(b, sizes, out, lead, t, x.dims())), in.dtype())};
}

// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
template <int N>
V adaptive_avg_pool_backward(Context& cx) {
  auto& b = cx.b;
  Value go = cx.tensor(0), self = cx.tensor(1);
  int64_t lead = self.rank() - N;
  if (N ==
      3) {  // CPU: grad_output's non-batch sizes, both ranks, then input.size(-4 .. -1), grad_output.size(-3 .. -1)
    for (int64_t d = 1; d < go.rank(); ++d)
      if (go.dims()[d] == 0)
        cx.fail(
            "adaptive_avg_pool3d_backward(): Expected grad_output to have non-zero size for non-batch dimensions, "
            "but grad_output has sizes " +
            dims_str(go.dims()) + " with dimension " + std::to_string(d) + " being empty");
    if (go.rank() != self.rank())
      cx.fail("adaptive_avg_pool3d_backward_out_cpu_template: Expected dimensions " + std::to_string(self.rank()) +
              " for `gradOutput_` but got dimensions " + std::to_string(go.rank()));
    for (int64_t d = -4; d < 0; ++d) size_at(cx, self, d);
    for (int64_t d = -3; d < 0; ++d) size_at(cx, go, d);
  }
  if (lead < 1 || go.rank() != self.rank()) cx.fail("unexpected input rank");
  floating_kernel(cx, self.dtype(), N == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward_cpu");
  Dims in(self.dims().begin() + lead, self.dims().end()), out(go.dims().begin() + lead, go.dims().end());
  DType t = hlo::opmath_type(float_type(self.dtype()));
  Value g = b.convert(go, t);
  g = b.div(g, adaptive_counts(b, in, out, lead, t, g.dims()));
  for (int64_t i = N - 1; i >= 0; --i) {
    std::vector<std::vector<int64_t>> table(in[i]);
    for (int64_t o = 0; o < out[i]; ++o)
      for (int64_t j = adaptive_start(o, in[i], out[i]); j < adaptive_end(o, in[i], out[i]); ++j) table[j].push_back(o);
    g = gather_sum(b, g, lead + i, table);
  }
  return {b.convert(g, self.dtype())};
}

// adaptive_max_pool{2,3}d(self, output_size) -> (out, indices): each pooled
// dim is gathered into [out_i, width_i] windows (padded, masked off), then
// the window dims are reduced with max_with_index.
template <int N>
V adaptive_max_pool(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  int64_t lead = x.rank() - N;
  if (lead < 1 || lead > 2) cx.fail("unexpected input rank");
  adaptive_nonempty(cx, x, N == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d");
  Dims out = expand(cx, cx.ints(1), N, "output_size"), in(x.dims().begin() + lead, x.dims().end());
  Value vals = x, flat, mask;
  int64_t stride = numel(in);
  Dims window_dims;
  for (int64_t i = 0; i < N; ++i) {
    stride /= in[i];
    int64_t width = 1;
    for (int64_t o = 0; o < out[i]; ++o)
      width = std::max(width, adaptive_end(o, in[i], out[i]) - adaptive_start(o, in[i], out[i]));
    std::vector<double> idx, present;
    for (int64_t o = 0; o < out[i]; ++o)
      for (int64_t j = 0; j < width; ++j) {
        int64_t k = adaptive_start(o, in[i], out[i]) + j;
        bool ok = k < adaptive_end(o, in[i], out[i]);
        idx.push_back(ok ? static_cast<double>(k) : 0.0);
        present.push_back(ok ? 1.0 : 0.0);
      }
    int64_t d = lead + 2 * i;
    Value ix = b.reshape(vec_constant(b, idx, DType::I64), {out[i], width});
    vals = b.take_along(vals, ix, d);
    window_dims.push_back(d + 1);
    // Partial flat index and mask over the [out_0, width_0, ..., out_i, width_i] dims so far.
    Dims shape(vals.dims().begin() + lead, vals.dims().begin() + d + 2);
    auto widen = [&](Value v, Value* acc, bool is_and) {
      Value w = b.broadcast_in_dim(v, shape, {2 * i, 2 * i + 1});
      if (acc->id >= 0) {
        Dims keep;
        for (int64_t k = 0; k < 2 * i; ++k) keep.push_back(k);
        Value prev = b.broadcast_in_dim(*acc, shape, keep);
        w = is_and ? b.and_(prev, w) : b.add(prev, w);
      }
      *acc = w;
    };
    widen(b.mul(ix, b.constant(static_cast<double>(stride), DType::I64)), &flat, false);
    widen(b.reshape(vec_constant(b, present, DType::Bool), {out[i], width}), &mask, true);
  }
  Dims pooled;
  for (int64_t k = lead; k < vals.rank(); ++k) pooled.push_back(k);
  Value m = b.broadcast_in_dim(mask, vals.dims(), pooled);
  Value neg = b.constant(-INFINITY, x.dtype()), pad = b.constant(kPadIndex, DType::I64);
  Value v = b.select(m, vals, neg);
  Value i = b.select(m, b.broadcast_in_dim(flat, vals.dims(), pooled), pad);
  auto r = b.reduce_multi({v, i}, {neg, pad}, window_dims, max_with_index);
  return {r[0], r[1]};
}

// ---- upsampling

// Adds src's slices along `dim` into a zero tensor of `size` rows at the
// rows `idx` ([src.dims[dim]] i64) names.
Value scatter_rows(hlo::Builder& b, Value src, int64_t dim, Value idx, int64_t size) {
  Dims dims = src.dims(), window;
  dims[dim] = size;
  for (int64_t i = 0; i < src.rank(); ++i)
    if (i != dim) window.push_back(i);
  Value index = b.reshape(idx, {idx.dims()[0], 1});
  return b.scatter(b.full(0, {src.dtype(), dims}), index, src, window, {dim}, {dim}, "stablehlo.add");
}

// in / out as PyTorch computes it in dtype t (float or double).
double ratio(int64_t in, int64_t out, DType t) {
  if (t == DType::F64) return static_cast<double>(in) / static_cast<double>(out);
  return static_cast<double>(static_cast<float>(in) / static_cast<float>(out));
}

// compute_scales_value: 1/scale when the optional `scales` argument is given
// and positive, else in/out; rank 0 of dtype t. The scale is a runtime value.
Value scale_value(Context& cx, size_t arg, int64_t in, int64_t out, DType t) {
  auto& b = cx.b;
  Value dflt = b.constant(ratio(in, out, t), t);
  if (cx.none(arg)) return dflt;
  Value s = cx.as(arg, DType::F64);
  Value inv = b.convert(b.div(b.constant(1, DType::F64), s), t);
  return b.select(b.compare(s, b.constant(0, DType::F64), "GT"), inv, dflt);
}

// Source row of each output row for nearest (exact = false) and
// nearest-exact interpolation, as PyTorch's nearest_idx /
// nearest_exact_idx compute it in float.
Value nearest_index(Context& cx, size_t scale_arg, int64_t in, int64_t out, bool exact) {
  auto& b = cx.b;
  TensorType it{DType::I64, {out}};
  Value o = b.iota(it, 0);
  if (!exact && out == in) return o;
  if (!exact && out == 2 * in) return b.div(o, b.constant(2, DType::I64));
  Value scale = scale_value(cx, scale_arg, in, out, DType::F32);
  Value pos;
  if (exact) {  // floorf((dst_index + 0.5) * scale): a double product rounded to float
    Value od = b.add(b.convert(o, DType::F64), b.constant(0.5, DType::F64));
    pos = b.convert(b.mul(od, b.convert(scale, DType::F64)), DType::F32);
  } else {  // floorf(dst_index * scale) in float
    pos = b.mul(b.convert(o, DType::F32), scale);
  }
  Value src = b.unary("stablehlo.floor", pos);
  return b.min(b.convert(src, DType::I64), b.constant(static_cast<double>(in - 1), DType::I64));
}

struct Linear {
  Value i0, i1, l0, l1;  // [out]: source rows and their weights
};

// compute_indices_weights_linear in dtype t.
Linear linear_index(Context& cx, size_t scale_arg, int64_t in, int64_t out, bool align_corners, DType t) {
  auto& b = cx.b;
  Value o = b.convert(b.iota({DType::I64, {out}}, 0), t);
  Value src;
  if (align_corners) {
    double scale = out > 1 ? ratio(in - 1, out - 1, t) : 0.0;
    src = b.mul(o, b.constant(scale, t));
  } else {
    Value half = b.constant(0.5, t);
    src = b.sub(b.mul(scale_value(cx, scale_arg, in, out, t), b.add(o, half)), half);
    src = b.max(src, b.constant(0, t));
  }
  Value last = b.constant(static_cast<double>(in - 1), DType::I64);
  Value i0 = b.min(b.convert(b.unary("stablehlo.floor", src), DType::I64), last);
  Value step = b.convert(b.compare(i0, last, "LT"), DType::I64);
  Value l1 = b.clamp(b.constant(0, t), b.sub(src, b.convert(i0, t)), b.constant(1, t));
  return {i0, b.add(i0, step), b.sub(b.constant(1, t), l1), l1};
}

// upsample_{1,2,3}d_common_check (ATen's UpSample.h): output_size has N
// entries, input_size N + 2, and every spatial size is positive.
void upsample_common_check(Context& cx, int64_t n, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  auto sz = [](size_t v) { return std::to_string(v); };
  if (static_cast<int64_t>(out.size()) != n)
    cx.fail("It is expected output_size equals to " + sz(n) + ", but got size " + sz(out.size()));
  if (static_cast<int64_t>(in.size()) != n + 2)
    cx.fail("It is expected input_size equals to " + sz(n + 2) + ", but got size " + sz(in.size()));
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok = ok && in[2 + i] > 0 && out[i] > 0;
  if (ok) return;
  const char* names[3] = {"D", "H", "W"};
  auto list = [&](const std::vector<int64_t>& v, int64_t off) {
    std::string r;
    for (int64_t i = 0; i < n; ++i)
      r += std::string(i ? ", " : "") + names[3 - n + i] + ": " + std::to_string(v[off + i]);
    return r;
  };
  std::string msg = "Input and output sizes should be greater than 0, but got input (" + list(in, 2) + ")" +
                    (n == 1 ? " and output (" : " output (") + list(out, 0) + ")";
  cx.fail(msg);
}

// The forward's checks: the common check on self's sizes, then a non-empty
// batch (ATen: "Non-empty <N + 2>D data tensor expected").
void upsample_forward_check(Context& cx, int64_t n, Value x, const std::vector<int64_t>& out) {
  std::vector<int64_t> in(x.dims().begin(), x.dims().end());
  upsample_common_check(cx, n, in, out);
  int64_t rest = 1;
  for (size_t i = 1; i < in.size(); ++i) rest *= in[i];
  if (x.type.numel() == 0 && rest == 0) {
    std::string sizes;
    for (size_t i = 0; i < in.size(); ++i) sizes += (i ? ", " : "") + std::to_string(in[i]);
    cx.fail("Non-empty " + std::to_string(n + 2) + "D data tensor expected but got a tensor with sizes [" + sizes +
            "]");
  }
}

// The backward's checks: the common check on input_size, then grad_output
// shaped as the output [N, C, out...] (ATen's check_dim_size for the 1-d
// ops and nearest; the others' "same shape as output" message).
void upsample_backward_check(Context& cx, int64_t n, Value go, const std::vector<int64_t>& in,
                             const std::vector<int64_t>& out, bool dim_size_style) {
  upsample_common_check(cx, n, in, out);
  std::vector<int64_t> full = {in[0], in[1]};
  full.insert(full.end(), out.begin(), out.end());
  int64_t rank = n + 2;
  if (dim_size_style) {
    for (int64_t i = 0; i < rank; ++i)
      if (go.rank() != rank || go.dims()[i] != full[i])
        cx.fail("Expected a tensor of dimension " + std::to_string(rank) + " and tensor.size[" + std::to_string(i) +
                "] == " + std::to_string(full[i]) + " but got: dimension " + std::to_string(go.rank()) +
                " and tensor.size[" + std::to_string(i) +
                "] = " + (i < go.rank() ? std::to_string(go.dims()[i]) : std::string("?")));
    return;
  }
  if (go.rank() != rank)
    cx.fail("Expected grad_output to be a tensor of dimension " + std::to_string(rank) + " but got: dimension " +
            std::to_string(go.rank()));
  for (int64_t i = 0; i < rank; ++i)
    if (go.dims()[i] != full[i])
      cx.fail("Expected grad_output to have the same shape as output; output.size(" + std::to_string(i) +
              ") = " + std::to_string(full[i]) + " but got grad_output.size(" + std::to_string(i) +
              ") = " + std::to_string(go.dims()[i]));
}

// The dtypes an upsample CPU kernel dispatches, after its shape checks:
// floating types (Half and BFloat16 only when `half`), and Byte when `byte`;
// any other raises NotImplementedError naming `kernel`, for empty inputs too.
void upsample_dtype(Context& cx, DType t, bool byte, bool half, const char* kernel) {
  bool ok = hlo::is_floating(t) ? half || (t != DType::F16 && t != DType::BF16) : byte && t == DType::U8;
  if (!ok) refuse_dtype(cx, t, kernel);
}

// What an upsample forward starts from: self (argument 0) checked against
// output_size (argument 1), its dtype checked as `kernel` dispatches, the
// number of leading (batch and channel) dims, and the N output sizes.
struct UpsampleIn {
  Value in;
  int64_t lead;
  Dims out;
};
UpsampleIn upsample_input(Context& cx, int64_t n, bool byte, bool half, const char* kernel) {
  Value in = cx.tensor(0);
  upsample_forward_check(cx, n, in, cx.ints(1));
  upsample_dtype(cx, in.dtype(), byte, half, kernel);
  return {in, in.rank() - n, expand(cx, cx.ints(1), n, "output_size")};
}

// What an upsample backward starts from: grad_output (argument 0) checked
// against output_size and input_size (arguments 1 and 2), its dtype checked
// as `kernel` dispatches, the number of leading dims, and grad_output in the
// compute dtype t.
struct UpsampleGrad {
  Value go;
  const std::vector<int64_t>& in;
  int64_t lead;
  DType t;
  Value g;
};
UpsampleGrad upsample_grad(Context& cx, int64_t n, bool dim_size_style, bool half, const char* kernel) {
  Value go = cx.tensor(0);
  const auto& in = cx.ints(2);
  upsample_backward_check(cx, n, go, in, cx.ints(1), dim_size_style);
  upsample_dtype(cx, go.dtype(), false, half, kernel);
  DType t = hlo::opmath_type(float_type(go.dtype()));
  return {go, in, go.rank() - n, t, cx.b.convert(go, t)};
}

// upsample_nearest{1,2,3}d / _upsample_nearest_exact{1,2,3}d(self,
//   output_size, scales...?)
template <int N, bool Exact>
V upsample_nearest(Context& cx) {
  auto& b = cx.b;
  auto [x, lead, out] = upsample_input(cx, N, true, true,
                                       N == 2 ? "upsample_nearest2d_channels_last" : "compute_indices_weights_nearest");
  for (int64_t i = 0; i < N; ++i)
    x = b.take_along(x, nearest_index(cx, 2 + i, x.dims()[lead + i], out[i], Exact), lead + i);
  return {x};
}

// upsample_nearest{1,2,3}d_backward / _upsample_nearest_exact{1,2,3}d_backward
//   (grad_output, output_size, input_size, scales...?)
template <int N, bool Exact>
V upsample_nearest_backward(Context& cx) {
  auto& b = cx.b;
  static const char* kernels[2][3] = {
      {"upsample_nearest1d_backward", "upsample_nearest2d_backward", "_upsample_nearest3d_backward_cl"},
      {"_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
       "_upsample_nearest_exact3d_backward_cl"}};
  auto [go, in, lead, t, g] = upsample_grad(cx, N, N == 1, true, kernels[Exact][N - 1]);
  for (int64_t i = 0; i < N; ++i) {
    int64_t d = lead + i;
    g = scatter_rows(b, g, d, nearest_index(cx, 3 + i, in[d], go.dims()[d], Exact), in[d]);
  }
  return {b.convert(g, go.dtype())};
}

// upsample_linear1d / upsample_bilinear2d / upsample_trilinear3d(self,
//   output_size, align_corners, scales...?): separable, last dim first.
template <int N>
V upsample_linear(Context& cx) {
  auto& b = cx.b;
  // Only upsample_bilinear2d has a Byte kernel.
  auto [in, lead, out] = upsample_input(
      cx, N, N == 2, true, N == 2 ? "upsample_bilinear2d_channels_last" : "compute_indices_weights_linear");
  bool align = cx.flag(2);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  Value x = b.convert(in, t);
  for (int64_t i = N - 1; i >= 0; --i) {
    int64_t d = lead + i;
    Linear li = linear_index(cx, 3 + i, x.dims()[d], out[i], align, t);
    Value x0 = b.take_along(x, li.i0, d), x1 = b.take_along(x, li.i1, d);
    x = b.add(b.mul(x0, b.broadcast_in_dim(li.l0, x0.dims(), {d})),
              b.mul(x1, b.broadcast_in_dim(li.l1, x1.dims(), {d})));
  }
  return {b.convert(x, in.dtype())};
}

// upsample_linear1d_backward / upsample_bilinear2d_backward /
//   upsample_trilinear3d_backward(grad_output, output_size, input_size,
//   align_corners, scales...?)
template <int N>
V upsample_linear_backward(Context& cx) {
  auto& b = cx.b;
  static const char* kernels[3] = {"upsample_linear1d_backward", "upsample_bilinear2d_backward",
                                   "upsample_trilinear3d_backward_channels_last"};
  auto [go, in, lead, t, g] = upsample_grad(cx, N, N == 1, true, kernels[N - 1]);
  bool align = cx.flag(3);
  for (int64_t i = 0; i < N; ++i) {
    int64_t d = lead + i;
    Linear li = linear_index(cx, 4 + i, in[d], go.dims()[d], align, t);
    Value g0 = b.mul(g, b.broadcast_in_dim(li.l0, g.dims(), {d}));
    Value g1 = b.mul(g, b.broadcast_in_dim(li.l1, g.dims(), {d}));
    g = b.add(scatter_rows(b, g0, d, li.i0, in[d]), scatter_rows(b, g1, d, li.i1, in[d]));
  }
  return {b.convert(g, go.dtype())};
}

// ---- bicubic

struct Cubic {
  Value idx[4], w[4];  // [out]: the four source rows and their weights
};

// The cubic convolution weights of upsample_bicubic2d (A = -0.75) for each
// output row, as PyTorch's HelperInterpCubic computes them in dtype t: the
// source position is not clamped at 0; the taps are clamped to the edges.
Cubic cubic_index(Context& cx, size_t scale_arg, int64_t in, int64_t out, bool align_corners, DType t) {
  auto& b = cx.b;
  Value o = b.convert(b.iota({DType::I64, {out}}, 0), t);
  Value src;
  if (align_corners) {
    double scale = out > 1 ? ratio(in - 1, out - 1, t) : 0.0;
    src = b.mul(o, b.constant(scale, t));
  } else {
    Value half = b.constant(0.5, t);
    Value scale = scale_value(cx, scale_arg, in, out, t);
    src = b.sub(b.mul(scale, b.add(o, half)), half);
  }
  Value last = b.constant(static_cast<double>(in - 1), DType::I64);
  Value i0 = b.min(b.convert(b.unary("stablehlo.floor", src), DType::I64), last);
  Value zero = b.constant(0, t), one = b.constant(1, t);
  Value lam = b.clamp(zero, b.sub(src, b.convert(i0, t)), one);
  double a = -0.75;
  Value A = b.constant(a, t);
  // ((A + 2) x - (A + 3)) x x + 1 for |x| <= 1
  auto conv1 = [&](Value x) {
    Value p = b.sub(b.mul(b.constant(a + 2, t), x), b.constant(a + 3, t));
    return b.add(b.mul(b.mul(p, x), x), one);
  };
  // ((A x - 5 A) x + 8 A) x - 4 A for 1 < |x| < 2
  auto conv2 = [&](Value x) {
    Value p = b.sub(b.mul(A, x), b.constant(5 * a, t));
    Value q = b.add(b.mul(p, x), b.constant(8 * a, t));
    return b.sub(b.mul(q, x), b.constant(4 * a, t));
  };
  Cubic c;
  c.w[0] = conv2(b.add(lam, one));
  c.w[1] = conv1(lam);
  Value rest = b.sub(one, lam);
  c.w[2] = conv1(rest);
  c.w[3] = conv2(b.add(rest, one));
  Value lo = b.constant(0, DType::I64);
  for (int k = 0; k < 4; ++k)
    c.idx[k] = b.clamp(lo, b.add(i0, b.constant(static_cast<double>(k - 1), DType::I64)), last);
  return c;
}

// upsample_bicubic2d(self, output_size, align_corners, scales_h?, scales_w?):
// separable, last dim first, in the compute dtype.
V upsample_bicubic2d(Context& cx) {
  auto& b = cx.b;
  auto [in, lead, out] = upsample_input(cx, 2, true, true, "compute_indices_weights_cubic");
  bool align = cx.flag(2);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  Value x = b.convert(in, t);
  for (int64_t i = 1; i >= 0; --i) {
    int64_t d = lead + i;
    Cubic c = cubic_index(cx, 3 + i, x.dims()[d], out[i], align, t);
    Value acc;
    for (int k = 0; k < 4; ++k) {
      Value xk = b.take_along(x, c.idx[k], d);
      Value term = b.mul(xk, b.broadcast_in_dim(c.w[k], xk.dims(), {d}));
      acc = k ? b.add(acc, term) : term;
    }
    x = acc;
  }
  return {b.convert(x, in.dtype())};
}

// upsample_bicubic2d_backward(grad_output, output_size, input_size,
//   align_corners, scales_h?, scales_w?): each tap's weighted gradient summed
//   back into its source row, one dim at a time.
V upsample_bicubic2d_backward(Context& cx) {
  auto& b = cx.b;
  auto [go, in, lead, t, g] = upsample_grad(cx, 2, false, true, "upsample_bicubic2d_backward");
  bool align = cx.flag(3);
  for (int64_t i = 0; i < 2; ++i) {
    int64_t d = lead + i;
    Cubic c = cubic_index(cx, 4 + i, in[d], go.dims()[d], align, t);
    Value acc;
    for (int k = 0; k < 4; ++k) {
      Value gk = scatter_rows(b, b.mul(g, b.broadcast_in_dim(c.w[k], g.dims(), {d})), d, c.idx[k], in[d]);
      acc = k ? b.add(acc, gk) : gk;
    }
    g = acc;
  }
  return {b.convert(g, go.dtype())};
}

// ---- antialiased bilinear

// The [out, in] weight matrix of _upsample_bilinear2d_aa along one dim, as
// PyTorch's _compute_weights_aa builds it in dtype t: a triangle filter
// stretched by the scale when downsampling, over the window
// [trunc(center - support + 0.5), trunc(center + support + 0.5)), normalised
// to sum 1 per output row.
Value aa_weights(Context& cx, size_t scale_arg, int64_t in, int64_t out, bool align_corners, DType t) {
  auto& b = cx.b;
  Value scale =
      align_corners ? b.constant(out > 1 ? ratio(in - 1, out - 1, t) : 0.0, t) : scale_value(cx, scale_arg, in, out, t);
  Value one = b.constant(1, t), zero = b.constant(0, t);
  Value down = b.compare(scale, one, "GE");
  Value support = b.select(down, scale, one);  // interp_size / 2 = 1, times scale when >= 1
  Value invscale = b.select(down, b.div(one, scale), one);
  TensorType m{t, {out, in}};
  Value o = b.iota(m, 0), a = b.iota(m, 1);
  Value center = b.mul(b.broadcast_to(scale, m.dims), b.add(o, b.full(0.5, m)));
  Value sup = b.broadcast_to(support, m.dims), hm = b.full(0.5, m);
  Value xmin = b.max(b.unary("stablehlo.floor", b.add(b.sub(center, sup), hm)), b.full(0, m));
  Value xmax = b.min(b.unary("stablehlo.floor", b.add(b.add(center, sup), hm)), b.full(static_cast<double>(in), m));
  Value inside = b.and_(b.compare(a, xmin, "GE"), b.compare(a, xmax, "LT"));
  Value arg = b.abs(b.mul(b.add(b.sub(a, center), hm), b.broadcast_to(invscale, m.dims)));
  Value w = b.select(b.compare(arg, b.full(1, m), "LT"), b.sub(b.full(1, m), arg), b.full(0, m));
  w = b.select(inside, w, b.full(0, m));
  Value total = b.broadcast_in_dim(b.reduce(w, zero, {1}, "stablehlo.add"), m.dims, {0});
  return b.select(b.compare(total, b.full(0, m), "EQ"), w, b.div(w, total));
}

// x with dim d (size in) mapped through w [out, in]; dim d keeps its place.
Value apply_rows(hlo::Builder& b, Value x, Value w, int64_t d) {
  Value r = b.dot_general(x, w, {}, {}, {d}, {1}, x.dtype());
  Dims perm;
  for (int64_t i = 0; i < x.rank() - 1; ++i) {
    if (i == d) perm.push_back(x.rank() - 1);
    perm.push_back(i);
  }
  if (d == x.rank() - 1) perm.push_back(x.rank() - 1);
  return b.transpose(r, perm);
}

// _upsample_bilinear2d_aa(self, output_size, align_corners, scales_h?,
//   scales_w?): separable, width first.
V upsample_bilinear2d_aa(Context& cx) {
  auto& b = cx.b;
  auto [in, lead, out] = upsample_input(cx, 2, true, false, "compute_index_ranges_weights");
  bool align = cx.flag(2);
  DType t = hlo::opmath_type(float_type(in.dtype()));
  Value x = b.convert(in, t);
  for (int64_t i = 1; i >= 0; --i) {
    int64_t d = lead + i;
    x = apply_rows(b, x, aa_weights(cx, 3 + i, x.dims()[d], out[i], align, t), d);
  }
  return {b.convert(x, in.dtype())};
}

// _upsample_bilinear2d_aa_backward(grad_output, output_size, input_size,
//   align_corners, scales_h?, scales_w?): the transposed weights.
V upsample_bilinear2d_aa_backward(Context& cx) {
  auto& b = cx.b;
  auto [go, in, lead, t, g] = upsample_grad(cx, 2, false, false, "upsample_bilinear2d_aa_backward_cpu");
  bool align = cx.flag(3);
  for (int64_t i = 0; i < 2; ++i) {
    int64_t d = lead + i;
    Value w = aa_weights(cx, 4 + i, in[d], go.dims()[d], align, t);
    g = apply_rows(b, g, b.transpose(w, {1, 0}), d);
  }
  return {b.convert(g, go.dtype())};
}

// ---- max_unpool

// max_unpool2d(self, indices, output_size) and max_unpool3d(self, indices,
// output_size, stride, padding): each value of self written at its flat index
// into a zero [N?, C, *output_size] plane; the index is checked in range.
template <int K>
V max_unpool(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  Value idx = cx.as(1, DType::I64);
  const auto& size = cx.ints(2);
  if (static_cast<int64_t>(size.size()) != K)
    cx.fail("There should be exactly " + std::to_string(K) + " elements (height, width) in output_size, but got " +
            std::to_string(size.size()) + " elements.");
  if (x.rank() != K + 1 && x.rank() != K + 2)
    cx.fail("Input to max_unpooling" + std::to_string(K) + "d should be a " + std::to_string(K + 1) + "d or " +
            std::to_string(K + 2) + "d Tensor");
  if (idx.dims() != x.dims()) cx.fail("Expected shape of indices to be same as that of the input tensor");
  int64_t plane = 1, q = 1;
  for (int64_t i = x.rank() - K; i < x.rank(); ++i) plane *= x.dims()[i];
  for (int64_t v : size) q *= v;
  int64_t rows = plane ? x.type.numel() / plane : 0;
  Dims out(x.dims().begin(), x.dims().end() - K);
  out.insert(out.end(), size.begin(), size.end());
  if (rows == 0 || plane == 0) return {b.full(0, {x.dtype(), out})};
  Value flat = b.reshape(idx, {rows, plane});
  Value bad = b.or_(b.compare(flat, b.constant(0, DType::I64), "LT"),
                    b.compare(flat, b.constant(static_cast<double>(q), DType::I64), "GE"));
  cx.check(b.reduce(bad, b.constant(0, DType::Bool), {0, 1}, "stablehlo.or"),
           "Found an invalid max index (output volumes are of size " + std::to_string(q) + ")", ErrorKind::Runtime);
  Value row = b.iota({DType::I64, {rows, plane, 1}}, 0);
  Value index = b.concatenate({row, b.reshape(flat, {rows, plane, 1})}, 2);
  Value r = b.scatter(b.full(0, {x.dtype(), {rows, q}}), index, b.reshape(x, {rows, plane}), {}, {0, 1}, {0, 1}, "");
  return {b.reshape(r, out)};
}

}  // namespace

std::vector<Entry> pool_lowerings() {
  return {
      {"aten::max_unpool2d", max_unpool<2>},
      {"aten::upsample_bicubic2d", upsample_bicubic2d},
      {"aten::_upsample_bilinear2d_aa", upsample_bilinear2d_aa},
      {"aten::_upsample_bilinear2d_aa_backward", upsample_bilinear2d_aa_backward},
      {"aten::upsample_bicubic2d_backward", upsample_bicubic2d_backward},
      {"aten::max_unpool3d", max_unpool<3>},
      {"aten::max_pool2d_with_indices", max_pool_with_indices<2>},
      {"aten::max_pool3d_with_indices", max_pool_with_indices<3>},
      {"aten::max_pool2d_with_indices_backward", max_pool_with_indices_backward<2>},
      {"aten::max_pool3d_with_indices_backward", max_pool_with_indices_backward<3>},
      {"aten::avg_pool2d", avg_pool<2>},
      {"aten::avg_pool3d", avg_pool<3>},
      {"aten::avg_pool2d_backward", avg_pool_backward<2>},
      {"aten::avg_pool3d_backward", avg_pool_backward<3>},
      {"aten::_adaptive_avg_pool2d", adaptive_avg_pool<2>, Traits().set_out_same_dtype()},
      {"aten::_adaptive_avg_pool3d", adaptive_avg_pool<3>},
      {"aten::_adaptive_avg_pool2d_backward", adaptive_avg_pool_backward<2>},
      {"aten::_adaptive_avg_pool3d_backward", adaptive_avg_pool_backward<3>},
      {"aten::adaptive_max_pool2d", adaptive_max_pool<2>},
      {"aten::adaptive_max_pool3d", adaptive_max_pool<3>},
      {"aten::adaptive_max_pool2d_backward", max_pool_with_indices_backward<2, 2>},
      {"aten::adaptive_max_pool3d_backward", max_pool_with_indices_backward<3, 2>},
      {"aten::upsample_nearest1d", upsample_nearest<1, false>},
      {"aten::upsample_nearest2d", upsample_nearest<2, false>},
      {"aten::upsample_nearest3d", upsample_nearest<3, false>},
      {"aten::_upsample_nearest_exact1d", upsample_nearest<1, true>},
      {"aten::_upsample_nearest_exact2d", upsample_nearest<2, true>},
      {"aten::_upsample_nearest_exact3d", upsample_nearest<3, true>},
      {"aten::upsample_nearest1d_backward", upsample_nearest_backward<1, false>},
      {"aten::upsample_nearest2d_backward", upsample_nearest_backward<2, false>},
      {"aten::upsample_nearest3d_backward", upsample_nearest_backward<3, false>},
      {"aten::_upsample_nearest_exact1d_backward", upsample_nearest_backward<1, true>},
      {"aten::_upsample_nearest_exact2d_backward", upsample_nearest_backward<2, true>},
      {"aten::_upsample_nearest_exact3d_backward", upsample_nearest_backward<3, true>},
      {"aten::upsample_linear1d", upsample_linear<1>},
      {"aten::upsample_bilinear2d", upsample_linear<2>},
      {"aten::upsample_trilinear3d", upsample_linear<3>},
      {"aten::upsample_linear1d_backward", upsample_linear_backward<1>},
      {"aten::upsample_bilinear2d_backward", upsample_linear_backward<2>},
      {"aten::upsample_trilinear3d_backward", upsample_linear_backward<3>},
  };
}

}  // namespace torch_pjrt::lowering
