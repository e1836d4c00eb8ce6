// Convolution: aten::convolution (1d/2d/3d; strided, padded, dilated,
// grouped, transposed) and aten::convolution_backward, each one
// stablehlo.convolution (or a few) in the compute dtype: float16/bfloat16
// convolve in float32 and round once at the end, as PyTorch's CPU kernels do.
//
// Every gradient is itself a convolution:
//   grad_input of a convolution    = transposed convolution of grad_output
//   grad_input of a transposed one = convolution of grad_output
//   grad_weight                    = convolution of the activations with
//     grad_output as the kernel, batch and feature dims swapped, strides and
//     dilations swapped, and groups as batch_group_count.
#include <algorithm>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

std::string join(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s;
}
std::string i64_array(const Dims& d) { return d.empty() ? "array<i64>" : "array<i64: " + join(d) + ">"; }

// A conv operand's layout, one label per dim: "b"/"f" (batch/feature) for
// activations, "o"/"i" (output/input feature) for kernels, "0".."n-1" for
// the spatial dims.
using Layout = std::vector<std::string>;

Layout layout(const char* first, const char* second, int64_t spatial) {
  Layout l{first, second};
  for (int64_t i = 0; i < spatial; ++i) l.push_back(std::to_string(i));
  return l;
}

int64_t position(const Layout& l, const std::string& label) { return std::find(l.begin(), l.end(), label) - l.begin(); }

std::string layout_text(const Layout& l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + l[i];
  return s + "]";
}

struct Window {
  Dims stride, lo, hi, lhs_dilation, rhs_dilation;  // per spatial dim; lo/hi may be negative
  int64_t feature_groups = 1, batch_groups = 1;
};

// stablehlo.convolution of lhs and rhs laid out as `l`, `r`, producing
// layout `o`. Negative padding is applied by cropping the result (for a
// negative low pad, only where the stride is 1, which is where it arises).
Value conv_general(Context& cx, Value lhs, Value rhs, const Layout& l, const Layout& r, const Layout& o,
                   const Window& w) {
  auto& b = cx.b;
  int64_t n = lhs.rank() - 2;
  Dims out(lhs.rank()), want(lhs.rank()), lo(n), hi(n);
  out[position(o, "b")] = want[position(o, "b")] = lhs.dims()[position(l, "b")] / w.batch_groups;
  out[position(o, "f")] = want[position(o, "f")] = rhs.dims()[position(r, "o")];
  std::string pad = "dense<[";
  for (int64_t i = 0; i < n; ++i) {
    std::string s = std::to_string(i);
    int64_t in = lhs.dims()[position(l, s)], k = rhs.dims()[position(r, s)], od = position(o, s);
    int64_t din = (in - 1) * w.lhs_dilation[i] + 1, dk = (k - 1) * w.rhs_dilation[i] + 1;
    lo[i] = std::max<int64_t>(w.lo[i], 0);
    hi[i] = std::max<int64_t>(w.hi[i], 0);
    if (din + w.lo[i] + w.hi[i] - dk < 0) cx.fail("the kernel is larger than the (padded) input");
    if (w.lo[i] < 0 && w.stride[i] != 1) cx.fail("negative low padding with a stride");
    out[od] = (din + lo[i] + hi[i] - dk) / w.stride[i] + 1;
    want[od] = (din + w.lo[i] + w.hi[i] - dk) / w.stride[i] + 1;
    pad += std::string(i ? ", " : "") + "[" + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  }
  pad += "]> : tensor<" + std::to_string(n) + "x2xi64>";
  std::string attrs = "batch_group_count = " + std::to_string(w.batch_groups) +
                      " : i64, dimension_numbers = #stablehlo.conv<" + layout_text(l) + "x" + layout_text(r) + "->" +
                      layout_text(o) + ">, feature_group_count = " + std::to_string(w.feature_groups) +
                      " : i64, lhs_dilation = " + i64_array(w.lhs_dilation) + ", padding = " + pad +
                      ", rhs_dilation = " + i64_array(w.rhs_dilation) + ", window_strides = " + i64_array(w.stride);
  Value y = b.op("stablehlo.convolution", {lhs, rhs}, TensorType{lhs.dtype(), out}, attrs);
  // Crop where a negative pad was replaced by zero.
  Dims start(out.size(), 0), limit = want, step(out.size(), 1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t od = position(o, std::to_string(i));
    start[od] = std::max<int64_t>(-w.lo[i], 0);
    limit[od] += start[od];
  }
  return b.slice(y, start, limit, step);
}

// The spatial parameters of a conv: a list of one value applies to every
// spatial dim.
Dims expand(Context& cx, const std::vector<int64_t>& v, int64_t n, const char* what) {
  if (static_cast<int64_t>(v.size()) == n) return Dims(v.begin(), v.end());
  if (v.size() == 1) return Dims(n, v[0]);
  cx.fail(std::string(what) + " must have " + std::to_string(n) + " elements");
}

struct ConvArgs {
  Dims stride, padding, dilation, output_padding;
  int64_t groups;
};

ConvArgs conv_args(Context& cx, int64_t n, size_t first) {
  ConvArgs a;
  a.stride = expand(cx, cx.ints(first), n, "stride");
  a.padding = expand(cx, cx.ints(first + 1), n, "padding");
  a.dilation = expand(cx, cx.ints(first + 2), n, "dilation");
  a.output_padding = expand(cx, cx.ints(first + 4), n, "output_padding");
  a.groups = cx.integer(first + 5);
  if (a.groups < 1) cx.fail("groups must be positive");
  return a;
}

// x [N, Cin, *] convolved with w [Cout, Cin/groups, *k].
Value conv_forward(Context& cx, Value x, Value w, const ConvArgs& a) {
  int64_t n = x.rank() - 2;
  Window win{a.stride, a.padding, a.padding, Dims(n, 1), a.dilation, a.groups, 1};
  return conv_general(cx, x, w, layout("b", "f", n), layout("o", "i", n), layout("b", "f", n), win);
}

// Transposed convolution of x [N, Cx, *] with w [Cx, Cy/groups, *k] (the
// adjoint of conv_forward with that w): out [N, Cy, *].
Value conv_transpose(Context& cx, Value x, Value w, const ConvArgs& a) {
  auto& b = cx.b;
  int64_t n = x.rank() - 2, g = a.groups;
  Dims spatial;
  for (int64_t i = 0; i < n; ++i) spatial.push_back(2 + i);
  Value wr = b.op("stablehlo.reverse", {w}, w.type, "dimensions = " + i64_array(spatial));
  Layout kl = layout("i", "o", n);
  if (g > 1) {  // [Cx, Cy/g, k] -> [g, Cx/g, Cy/g, k] -> [g, Cy/g, Cx/g, k] -> [Cy, Cx/g, k]
    int64_t cin = w.dims()[0], cy = w.dims()[1] * g;
    if (cin % g) cx.fail("weight channels are not divisible by groups");
    Dims split{g, cin / g, w.dims()[1]}, perm{0, 2, 1}, merged{cy, cin / g};
    for (int64_t i = 0; i < n; ++i) {
      split.push_back(w.dims()[2 + i]);
      perm.push_back(3 + i);
      merged.push_back(w.dims()[2 + i]);
    }
    wr = b.reshape(b.transpose(b.reshape(wr, split), perm), merged);
    kl = layout("o", "i", n);
  }
  Window win{Dims(n, 1), {}, {}, a.stride, a.dilation, g, 1};
  for (int64_t i = 0; i < n; ++i) {
    int64_t edge = a.dilation[i] * (w.dims()[2 + i] - 1) - a.padding[i];
    win.lo.push_back(edge);
    win.hi.push_back(edge + a.output_padding[i]);
  }
  return conv_general(cx, x, wr, layout("b", "f", n), kl, layout("b", "f", n), win);
}

// Gradient of a kernel k (spatial sizes `ks`) that maps act [N, Ca, *] to
// grad [N, Cg, *] (conv_forward with stride/padding/dilation of `a`):
// [Cg, Ca/groups, *ks].
Value weight_grad(Context& cx, Value act, Value grad, const Dims& ks, const ConvArgs& a) {
  int64_t n = act.rank() - 2;
  Window win{a.dilation, a.padding, {}, Dims(n, 1), a.stride, 1, a.groups};
  for (int64_t i = 0; i < n; ++i) {
    int64_t in = act.dims()[2 + i], out = grad.dims()[2 + i];
    win.hi.push_back((ks[i] - 1) * a.dilation[i] + (out - 1) * a.stride[i] + 1 - in - a.padding[i]);
  }
  return conv_general(cx, act, grad, layout("f", "b", n), layout("i", "o", n), layout("f", "b", n), win);
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed,
//   output_padding, groups); _convolution has the same first nine arguments.
V convolution(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0), w = cx.tensor(1);
  if (in.rank() < 3 || w.rank() != in.rank()) cx.fail("expected a batched input and a weight of the same rank");
  int64_t n = in.rank() - 2;
  ConvArgs a = conv_args(cx, n, 3);
  DType out = float_type(cx.result_type({0, 1})), t = hlo::opmath_type(out);
  Value x = b.convert(in, t), k = b.convert(w, t);
  Value y = cx.flag(6) ? conv_transpose(cx, x, k, a) : conv_forward(cx, x, k, a);
  if (!cx.none(2)) y = b.add(y, b.broadcast_in_dim(cx.as(2, t), y.dims(), {1}));
  return {b.convert(y, out)};
}

// convolution_backward(grad_output, input, weight, bias_sizes?, stride,
//   padding, dilation, transposed, output_padding, groups, output_mask)
//   -> (grad_input, grad_weight, grad_bias); masked-off results are zeros.
V convolution_backward(Context& cx) {
  auto& b = cx.b;
  Value go = cx.tensor(0), in = cx.tensor(1), w = cx.tensor(2);
  int64_t n = in.rank() - 2;
  if (n < 1 || w.rank() != in.rank() || go.rank() != in.rank()) cx.fail("expected batched tensors of equal rank");
  ConvArgs a = conv_args(cx, n, 4);
  bool transposed = cx.flag(7);
  const auto& mask = cx.ints(10);
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
  DType t = hlo::opmath_type(float_type(in.dtype()));
  Value g = b.convert(go, t), x = b.convert(in, t), k = b.convert(w, t);
  Dims ks(w.dims().begin() + 2, w.dims().end());

  Value gi;
  if (!wanted(0)) {
    gi = b.full(0, in.type);
  } else if (transposed) {
    // An output_padding of a stride or more (allowed below the dilation)
    // makes trailing outputs no input reaches: crop them.
    gi = conv_forward(cx, g, k, a);
    gi = b.convert(b.slice(gi, Dims(gi.rank(), 0), in.dims(), Dims(gi.rank(), 1)), in.dtype());
  } else {
    ConvArgs ta = a;  // output_padding that gives back the input's size
    for (int64_t i = 0; i < n; ++i)
      ta.output_padding[i] = in.dims()[2 + i] - ((go.dims()[2 + i] - 1) * a.stride[i] - 2 * a.padding[i] +
                                                 a.dilation[i] * (ks[i] - 1) + 1);
    gi = b.convert(conv_transpose(cx, g, k, ta), in.dtype());
  }
  Value gw = !wanted(1)   ? b.full(0, w.type)
             : transposed ? b.convert(weight_grad(cx, g, x, ks, a), w.dtype())
                          : b.convert(weight_grad(cx, x, g, ks, a), w.dtype());
  Dims bias_dims;
  if (!cx.none(3))
    bias_dims = Dims(cx.ints(3).begin(), cx.ints(3).end());
  else
    bias_dims = {go.dims()[1]};
  Value gb;
  if (wanted(2)) {
    Dims red{0};
    for (int64_t i = 0; i < n; ++i) red.push_back(2 + i);
    gb = b.reshape(b.convert(b.reduce(g, b.constant(0, t), red, "stablehlo.add"), go.dtype()), bias_dims);
  } else {
    gb = b.full(0, {go.dtype(), bias_dims});
  }
  return {gi, gw, gb};
}

}  // namespace

std::vector<Entry> conv_lowerings() {
  return {
      {"aten::convolution", convolution},
      {"aten::_convolution", convolution},
      {"aten::convolution_backward", convolution_backward},
  };
}

}  // namespace torch_pjrt::lowering
