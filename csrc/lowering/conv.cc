// Convolution: aten::convolution (1d/2d/3d; strided, padded, dilated,
// grouped, transposed), im2col and col2im, and aten::convolution_backward,
// each one stablehlo.convolution (or a few) in the compute dtype:
// float16/bfloat16 convolve in float32 and round once at the end, as
// PyTorch's CPU kernels do.
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

// Whether XLA's operand swap takes this convolution (its
// ConvOperandSwapper, part of the algebraic simplifier): a kernel whose
// spatial extent exceeds the input's becomes the input, with its window
// reversed, and XLA:CPU's Eigen convolution takes no reversed window, so it
// runs as a naive loop nest (the input gradient of resnet18's 2x2 layer:
// 430 us against 181 us as patches, one op with its dispatch). `lo`/`hi`
// are the padding as emitted. The same rule
// as XLA's: dims that are a plain contraction or a group dim do not count.
bool xla_swaps_operands(const Dims& in, const Dims& k, const Window& w, const Dims& lo, const Dims& hi) {
  if (w.feature_groups != 1 || w.batch_groups != 1) return false;
  int64_t kernel = 1, swapped = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const bool unpadded = lo[i] == 0 && hi[i] == 0 && w.rhs_dilation[i] == 1;
    const bool group = unpadded && w.lhs_dilation[i] == k[i] && w.stride[i] == k[i] - 1;
    const bool contraction = unpadded && k[i] == in[i] && w.lhs_dilation[i] == 1 && w.stride[i] == 1;
    if (group || contraction) continue;
    kernel *= k[i];
    const bool full =
        in[i] == 1 && w.stride[i] == 1 && w.rhs_dilation[i] == 1 && lo[i] == k[i] - 1 && hi[i] == k[i] - 1;
    swapped *= full ? k[i] : in[i];
  }
  return kernel > swapped;
}

// The same convolution as one dot_general over the input's patches
// (im2col): the padded, dilated input, channels last, sliced once per
// kernel tap and concatenated along the channels, contracted with the
// kernel over (tap, feature). For a kernel larger than its input the
// patches are few. `out` is the exact output extent per spatial dim.
// Feature and batch groups of 1 only.
Value conv_as_patches(Context& cx, Value lhs, Value rhs, const Layout& l, const Layout& r, const Layout& o,
                      const Window& w, const Dims& out) {
  auto& b = cx.b;
  const int64_t n = lhs.rank() - 2;
  Dims lp{position(l, "b")}, rp;
  for (int64_t i = 0; i < n; ++i) {
    lp.push_back(position(l, std::to_string(i)));
    rp.push_back(position(r, std::to_string(i)));
  }
  lp.push_back(position(l, "f"));
  rp.push_back(position(r, "i"));
  rp.push_back(position(r, "o"));
  Value x = b.transpose(lhs, lp), k = b.transpose(rhs, rp);  // [B, *in, C], [*k, C, F]
  Dims lo{0}, hi{0}, interior{0};
  for (int64_t i = 0; i < n; ++i) {
    lo.push_back(w.lo[i]);
    hi.push_back(w.hi[i]);
    interior.push_back(w.lhs_dilation[i] - 1);
  }
  lo.push_back(0), hi.push_back(0), interior.push_back(0);
  x = b.pad(x, b.constant(0, x.dtype()), lo, hi, interior);
  const Dims ks(k.dims().begin(), k.dims().begin() + n);
  int64_t taps = 1;
  for (int64_t e : ks) taps *= e;
  std::vector<Value> patches;
  Dims tap(n, 0);
  for (int64_t t = 0; t < taps; ++t) {  // row-major over the kernel's spatial dims
    Dims start{0}, limit{x.dims()[0]}, step{1};
    for (int64_t i = 0; i < n; ++i) {
      start.push_back(tap[i] * w.rhs_dilation[i]);
      limit.push_back(start.back() + (out[i] - 1) * w.stride[i] + 1);
      step.push_back(w.stride[i]);
    }
    start.push_back(0), limit.push_back(x.dims()[n + 1]), step.push_back(1);
    patches.push_back(b.slice(x, start, limit, step));
    for (int64_t i = n; i-- > 0 && ++tap[i] == ks[i];) tap[i] = 0;
  }
  Value p = patches.size() == 1 ? patches[0] : b.concatenate(patches, n + 1);  // [B, *out, taps * C]
  k = b.reshape(k, {taps * k.dims()[n], k.dims()[n + 1]});                     // [taps * C, F]
  Value y = b.dot_general(p, k, {}, {}, {n + 1}, {0}, lhs.dtype());            // [B, *out, F]
  Dims perm;
  for (const auto& label : o) perm.push_back(label == "b" ? 0 : label == "f" ? n + 1 : 1 + std::stoll(label));
  return b.transpose(y, perm);
}

// stablehlo.convolution of lhs and rhs laid out as `l`, `r`, producing
// layout `o`. Negative padding is applied by cropping the result (for a
// negative low pad, only where the stride is 1, which is where it arises).
// A convolution XLA would swap into a naive loop is a dot_general of
// patches instead (conv_as_patches).
Value conv_general(Context& cx, Value lhs, Value rhs, const Layout& l, const Layout& r, const Layout& o,
                   const Window& w) {
  auto& b = cx.b;
  int64_t n = lhs.rank() - 2;
  Dims out(lhs.rank()), want(lhs.rank()), lo(n), hi(n), in_sizes(n), k_sizes(n), spatial_out(n);
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
    in_sizes[i] = in, k_sizes[i] = k, spatial_out[i] = want[od];
    pad += std::string(i ? ", " : "") + "[" + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + "]";
  }
  if (xla_swaps_operands(in_sizes, k_sizes, w, lo, hi)) return conv_as_patches(cx, lhs, rhs, l, r, o, w, spatial_out);
  pad += "]> : tensor<" + std::to_string(n) + "x2xi64>";
  std::string attrs = "batch_group_count = " + std::to_string(w.batch_groups) +
                      " : i64, dimension_numbers = #stablehlo.conv<" + layout_text(l) + "x" + layout_text(r) + "->" +
                      layout_text(o) + ">, feature_group_count = " + std::to_string(w.feature_groups) +
                      " : i64, lhs_dilation = " + i64_array(w.lhs_dilation) + ", padding = " + pad +
                      ", rhs_dilation = " + i64_array(w.rhs_dilation) + ", window_strides = " + i64_array(w.stride) +
                      b.precision_attr(lhs.dtype());
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
  // CPU's backend choice: an empty batch or channel dim makes an empty
  // result, any other empty input is refused (after a plain convolution's
  // kernel-size check; a transposed one has none before it).
  auto refuse_empty = [&] {
    if (in.dims()[0] != 0 && in.dims()[1] != 0 && in.type.numel() == 0)
      cx.fail("Only zero batch or zero channel inputs are supported, but got input shape: " + dims_str(in.dims()));
  };
  Value y;
  if (cx.flag(6)) {
    refuse_empty();
    y = conv_transpose(cx, x, k, a);
  } else {
    y = conv_forward(cx, x, k, a);
    refuse_empty();
  }
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

// ---- im2col / col2im (nn.functional.unfold / fold)

// The 2-d window geometry of im2col/col2im: kernel, dilation, padding and
// stride per spatial dim, checked positive as on CPU.
struct Window2d {
  Dims k, d, p, s;
};
Window2d window2d(Context& cx, size_t first) {
  Window2d w{cx.ints(first), cx.ints(first + 1), cx.ints(first + 2), cx.ints(first + 3)};
  for (const Dims* v : {&w.k, &w.d, &w.p, &w.s})
    if (v->size() != 2) cx.fail("It is expected kernel_size, dilation, padding and stride to have 2 elements each");
  for (int i = 0; i < 2; ++i) {
    if (w.k[i] <= 0)
      cx.fail("kernel_size should be greater than zero, but got kernel_height: " + std::to_string(w.k[0]) +
              " kernel_width: " + std::to_string(w.k[1]));
    if (w.d[i] <= 0)
      cx.fail("dilation should be greater than zero, but got dilation_height: " + std::to_string(w.d[0]) +
              " dilation_width: " + std::to_string(w.d[1]));
    if (w.s[i] <= 0)
      cx.fail("stride should be greater than zero, but got stride_height: " + std::to_string(w.s[0]) +
              " stride_width: " + std::to_string(w.s[1]));
    if (w.p[i] < 0)
      cx.fail("padding should be non-negative, but got pad_height: " + std::to_string(w.p[0]) +
              " pad_width: " + std::to_string(w.p[1]));
  }
  return w;
}
// Number of window positions along spatial dim i of a size-n input.
int64_t blocks(const Window2d& w, int i, int64_t n) {
  return (n + 2 * w.p[i] - (w.d[i] * (w.k[i] - 1) + 1)) / w.s[i] + 1;
}

// im2col(self [N?, C, H, W], kernel_size, dilation, padding, stride)
//   -> [N?, C * kh * kw, L]; column c * kh * kw + i * kw + j holds
//   x[c, i * dh + oh * sh - ph, j * dw + ow * sw - pw] (0 in the padding).
V im2col(Context& cx) {
  auto& b = cx.b;
  Value x = cx.tensor(0);
  bool batched = x.rank() == 4;
  // CPU's im2col_shape_check: the window, then input.size(1) and size(2)
  // (IndexError for a smaller rank), then the rank and zero sizes
  Window2d w = window2d(cx, 1);
  bool valid_dims = size_at(cx, x, 1) != 0 && size_at(cx, x, 2) != 0;
  if (!((x.rank() == 3 && x.dims()[0] != 0 && valid_dims) || (batched && valid_dims && x.dims()[3] != 0)))
    cx.fail(
        "Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
        "input, but got: " +
        dims_str(x.dims()));
  if (!batched) x = b.reshape(x, {1, x.dims()[0], x.dims()[1], x.dims()[2]});
  int64_t n = x.dims()[0], c = x.dims()[1], oh = blocks(w, 0, x.dims()[2]), ow = blocks(w, 1, x.dims()[3]);
  if (oh < 1 || ow < 1)
    cx.fail("Given input with spatial size (" + std::to_string(x.dims()[2]) + ", " + std::to_string(x.dims()[3]) +
            "), calculated shape of the array of sliding blocks as (" + std::to_string(oh) + ", " + std::to_string(ow) +
            "), which is too small (non-positive)");
  if (hlo::is_integral(x.dtype())) refuse_dtype(cx, x.dtype(), "im2col_out_cpu");  // floats, complex and bool
  Value xp = b.pad(x, b.constant(0, x.dtype()), {0, 0, w.p[0], w.p[1]}, {0, 0, w.p[0], w.p[1]}, {0, 0, 0, 0});
  std::vector<Value> cols;
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      Dims start{0, 0, i * w.d[0], j * w.d[1]};
      Dims limit{n, c, start[2] + (oh - 1) * w.s[0] + 1, start[3] + (ow - 1) * w.s[1] + 1};
      cols.push_back(b.reshape(b.slice(xp, start, limit, {1, 1, w.s[0], w.s[1]}), {n, c, 1, oh * ow}));
    }
  Value r = b.reshape(b.concatenate(cols, 2), {n, c * w.k[0] * w.k[1], oh * ow});
  if (!batched) r = b.reshape(r, {r.dims()[1], r.dims()[2]});
  return {r};
}

// col2im(self [N?, C * kh * kw, L], output_size, kernel_size, dilation,
//   padding, stride) -> [N?, C, H, W]: im2col's adjoint, each column summed
//   back into the position it was read from.
V col2im(Context& cx) {
  auto& b = cx.b;
  Value in = cx.tensor(0);
  bool batched = in.rank() == 3;
  if (in.rank() != 2 && in.rank() != 3)
    cx.fail("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions");
  if (!batched) in = b.reshape(in, {1, in.dims()[0], in.dims()[1]});
  const auto& size = cx.ints(1);
  if (size.size() != 2) cx.fail("It is expected output_size equals to 2");
  Window2d w = window2d(cx, 2);
  int64_t kk = w.k[0] * w.k[1], n = in.dims()[0];
  if (in.dims()[1] % kk)
    cx.fail(
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)=" +
        std::to_string(in.dims()[1]) + " and kernel_size=(" + std::to_string(w.k[0]) + ", " + std::to_string(w.k[1]) +
        ")");
  int64_t c = in.dims()[1] / kk, oh = blocks(w, 0, size[0]), ow = blocks(w, 1, size[1]);
  if (oh < 1 || ow < 1 || oh * ow != in.dims()[2])
    cx.fail(
        "Given output_size=(" + std::to_string(size[0]) + ", " + std::to_string(size[1]) +
        "), kernel_size, dilation, padding and stride, expected size of input's dimension 2 to match the calculated "
        "number of sliding blocks " +
        std::to_string(oh) + " * " + std::to_string(ow) + " = " + std::to_string(oh * ow) +
        ", but got input.size(2)=" + std::to_string(in.dims()[2]) + ".");
  DType t = hlo::opmath_type(in.dtype());
  Value x = b.reshape(b.convert(in, t), {n, c, kk, oh, ow});
  int64_t hp = size[0] + 2 * w.p[0], wp = size[1] + 2 * w.p[1];
  Value zero = b.constant(0, t), acc = b.full(0, {t, {n, c, hp, wp}});
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      int64_t q = i * w.k[1] + j;
      Value piece = b.reshape(b.slice(x, {0, 0, q, 0, 0}, {n, c, q + 1, oh, ow}, {1, 1, 1, 1, 1}), {n, c, oh, ow});
      int64_t h0 = i * w.d[0], w0 = j * w.d[1];
      int64_t h1 = hp - (h0 + (oh - 1) * w.s[0] + 1), w1 = wp - (w0 + (ow - 1) * w.s[1] + 1);
      acc = b.add(acc, b.pad(piece, zero, {0, 0, h0, w0}, {0, 0, h1, w1}, {0, 0, w.s[0] - 1, w.s[1] - 1}));
    }
  Value r = b.slice(acc, {0, 0, w.p[0], w.p[1]}, {n, c, w.p[0] + size[0], w.p[1] + size[1]}, {1, 1, 1, 1});
  r = b.convert(r, in.dtype());
  if (!batched) r = b.reshape(r, {c, size[0], size[1]});
  return {r};
}

}  // namespace

std::vector<Entry> conv_lowerings() {
  return {
      {"aten::im2col", im2col},
      {"aten::col2im", col2im},
      {"aten::convolution", convolution},
      {"aten::_convolution", convolution},
      {"aten::convolution_backward", convolution_backward},
  };
}

}  // namespace torch_pjrt::lowering
