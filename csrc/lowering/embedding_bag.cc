// Embedding bags: nn.EmbeddingBag / F.embedding_bag and their backward.
//
// _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights?, include_last_offset, padding_idx) returns (output,
// offset2bag, bag_size, max_indices) as the CPU kernel does:
//   offset2bag[i]   the bag of index i: (number of bag offsets <= i) - 1;
//   bag_size[b]     offsets[b+1] - offsets[b] (the last bag runs to the end of
//                   `indices`) less its padding indices; zeros in sum mode;
//   max_indices     mode max: the row of `weight` each output element came
//                   from (0 for empty bags); mean: a copy of bag_size; sum:
//                   zeros.
// The one difference: CPU leaves offset2bag empty on its fast sum path (the
// backward then recomputes it); here it is always filled.
//
// Bags are segments of `indices`, so every reduction is a scatter into the
// bags by offset2bag: an add for sum and mean, and for max a variadic scatter
// of (value, position) pairs whose combiner is associative, which makes the
// result independent of XLA's update order (see max_bags).
//
// Backward: autograd calls _embedding_bag_backward (CPU-registered, not
// composite, in this PyTorch), which for dense weights calls
// _embedding_bag_dense_backward; both are lowered, and so is
// _embedding_bag_per_sample_weights_backward. scale_grad_by_freq divides each
// index's gradient by how often it occurs in `indices`, as documented and as
// the CUDA kernel does (PyTorch's CPU kernel divides by the count of another
// index when the indices repeat).
#include <cstdint>
#include <string>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

// An integer index tensor (indices, offsets, offset2bag) as 1-D i64.
Value index_vector(Context& cx, Value x, const char* what) {
  if (!hlo::is_integral(x.dtype()) || x.dtype() == DType::Bool)
    cx.fail(std::string("expected ") + what + " to be long or int, got " + std::string(hlo::dtype_name(x.dtype())));
  if (x.rank() != 1)
    cx.fail(std::string(what) + " has to be a 1D Tensor, but got Tensor of dimension " + std::to_string(x.rank()));
  return cx.b.convert(x, DType::I64);
}

// The dtype of offset2bag, bag_size and max_indices: indices and offsets promoted.
DType index_result_type(Value indices, Value offsets) { return hlo::promote_types(indices.dtype(), offsets.dtype()); }

int64_t check_mode(Context& cx, int64_t mode) {
  if (mode < kSum || mode > kMax) cx.fail("embedding_bag: unknown mode " + std::to_string(mode));
  return mode;
}

// Inclusive prefix sum of a 1-D tensor in ceil(log2 n) shift-and-add steps.
Value prefix_sum(hlo::Builder& b, Value x) {
  int64_t n = x.dims()[0];
  for (int64_t s = 1; s < n; s *= 2) {
    Value head = b.slice(x, {0}, {n - s}, {1});
    x = b.add(x, b.pad(head, b.constant(0, x.dtype()), {s}, {0}, {0}));
  }
  return x;
}

// offset2bag for n indices from the bag offsets (i64 [k]): as CPU's
// make_offset2bag, a one added at each offset (offsets past n are dropped),
// a prefix sum, minus one.
Value offset2bag(hlo::Builder& b, Value offsets, int64_t n) {
  int64_t k = offsets.dims()[0];
  Value marks = b.full(0, TensorType{DType::I64, {n + 1}});
  if (k > 0)
    marks = b.scatter(marks, b.reshape(offsets, {k, 1}), b.full(1, TensorType{DType::I64, {k}}), {}, {0}, {0},
                      "stablehlo.add");
  Value counts = b.slice(prefix_sum(b, marks), {0}, {n}, {1});
  return b.sub(counts, b.constant(1, DType::I64));
}

// bag_size before padding: offsets[b+1] - offsets[b], and for the last of the
// `bags` bags, n - offsets[bags-1].
Value bag_lengths(hlo::Builder& b, Value offsets, int64_t bags, int64_t n) {
  if (bags == 0) return b.full(0, TensorType{DType::I64, {0}});
  Value start = b.slice(offsets, {0}, {bags}, {1});
  Value last_end = b.full(static_cast<double>(n), TensorType{DType::I64, {1}});
  Value end = bags == 1 ? last_end : b.concatenate({b.slice(offsets, {1}, {bags}, {1}), last_end}, 0);
  return b.sub(end, start);
}

// Sums the rows of `rows` ([n, d]) into `bags` bags by `bag` (i64 [n]);
// rows whose bag is out of range are dropped.
Value sum_bags(hlo::Builder& b, Value rows, Value bag, int64_t bags) {
  int64_t n = rows.dims()[0], d = rows.dims()[1];
  Value zeros = b.full(0, TensorType{rows.dtype(), {bags, d}});
  return b.scatter(zeros, b.reshape(bag, {n, 1}), rows, {1}, {0}, {0}, "stablehlo.add");
}

// Per-bag count of the true elements of `pred` ([n] i1).
Value count_bags(hlo::Builder& b, Value pred, Value bag, int64_t bags) {
  int64_t n = pred.dims()[0];
  return b.scatter(b.full(0, TensorType{DType::I64, {bags}}), b.reshape(bag, {n, 1}), b.convert(pred, DType::I64), {},
                   {0}, {0}, "stablehlo.add");
}

// Max over each bag of `rows` ([n, d]), per column, as CPU's loop computes it:
// the bag's first row, then each later row that is strictly greater. So the
// earliest maximum wins a tie, a NaN is taken only when it is in the bag's
// first row (nothing is greater than it afterwards), and later NaNs are never
// taken. Every (row, column) is a candidate (value, pos) ranked
//   3: NaN in the bag's first row (its pos is written as -1),
//   2: not NaN, ordered by value, then earlier pos,
//   1: NaN in a later row, ordered by earlier pos,
//   0: none (pos n, past every row: the initial value);
// the combiner keeps the higher-ranked candidate. That is a strict total
// order, so the scatter's result does not depend on the order of updates.
// Returns {values, positions into rows} of shape [bags, d]; empty bags have
// value 0 and position n; pos -1 stands for the bag's first row.
std::pair<Value, Value> max_bags(hlo::Builder& b, Value rows, Value bag, Value is_first, int64_t bags) {
  int64_t n = rows.dims()[0], d = rows.dims()[1];
  double none_pos = static_cast<double>(n);
  DType t = rows.dtype();
  TensorType pos_type{DType::I64, {n, d}};
  Value pos = b.iota(pos_type, 0);
  pos = b.select(b.broadcast_in_dim(is_first, {n, d}, {0}), b.full(-1, pos_type), pos);
  TensorType s{t, {}}, si{DType::I64, {}};
  auto rank = [none_pos](hlo::Builder& b, Value v, Value p) {
    Value none = b.compare(p, b.constant(none_pos, DType::I64), "EQ");
    Value nan = b.compare(v, v, "NE");
    Value first = b.compare(p, b.constant(-1, DType::I64), "EQ");
    Value r =
        b.select(nan, b.select(first, b.constant(3, DType::I32), b.constant(1, DType::I32)), b.constant(2, DType::I32));
    return b.select(none, b.constant(0, DType::I32), r);
  };
  hlo::Builder::RegionFn keep_best = [rank](hlo::Builder& b, const std::vector<Value>& a) {
    Value va = a[0], pa = a[1], vc = a[2], pc = a[3];
    Value ra = rank(b, va, pa), rc = rank(b, vc, pc);
    Value a_earlier = b.compare(pa, pc, "LT");
    Value a_ranks_higher = b.compare(ra, rc, "GT");
    Value same = b.compare(ra, rc, "EQ");
    Value by_value = b.or_(b.compare(va, vc, "GT"), b.and_(b.compare(va, vc, "EQ"), a_earlier));
    Value is_two = b.compare(ra, b.constant(2, DType::I32), "EQ");
    Value a_wins = b.or_(a_ranks_higher, b.and_(same, b.select(is_two, by_value, a_earlier)));
    return std::vector<Value>{b.select(a_wins, va, vc), b.select(a_wins, pa, pc)};
  };
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false";
  Value init_v = b.full(0, TensorType{t, {bags, d}});
  Value init_p = b.full(none_pos, TensorType{DType::I64, {bags, d}});
  auto r = b.op_multi("stablehlo.scatter", {init_v, init_p, b.reshape(bag, {n, 1}), rows, pos},
                      {init_v.type, init_p.type}, attrs, {{{s, si, s, si}, keep_best}});
  return {r[0], r[1]};
}

// ---- forward

// _embedding_bag and _embedding_bag_forward_only (same arguments).
V embedding_bag_impl(Context& cx, bool forward_only) {
  auto& b = cx.b;
  Value weight = cx.tensor(0);
  Value indices0 = cx.tensor(1), offsets0 = cx.tensor(2);
  int64_t mode = check_mode(cx, cx.integer_or(4, kSum));
  bool include_last = cx.flag_or(7, false);
  int64_t padding_idx = cx.integer_or(8, -1);
  if (indices0.rank() == 2)
    cx.fail("2-D indices reach _embedding_bag only through F.embedding_bag, which flattens them; pass 1-D indices");
  if (indices0.rank() != 1)
    cx.fail("input has to be a 1D or 2D Tensor, but got Tensor of dimension " + std::to_string(indices0.rank()));
  Value idx = index_vector(cx, indices0, "indices");
  Value off = index_vector(cx, offsets0, "offsets");
  DType it = index_result_type(indices0, offsets0);
  if (!hlo::is_floating(weight.dtype()))
    cx.fail("expected weight to be floating point type, got " + std::string(hlo::dtype_name(weight.dtype())));
  if (weight.rank() != 2)
    cx.fail("weight has to be a 2D Tensor, but got Tensor of dimension " + std::to_string(weight.rank()));
  bool has_psw = !cx.none(6);
  Value psw;
  if (has_psw) {
    psw = cx.tensor(6);
    if (mode != kSum) cx.fail("embedding_bag: per_sample_weights only supported with mode='sum'");
    if (psw.rank() != 1)
      cx.fail("expected per_sample_weights to be 1D tensor, got " + std::to_string(psw.rank()) + "D");
    if (psw.dtype() != weight.dtype())
      cx.fail("expected per_sample_weights to have the dtype of weight, got " +
              std::string(hlo::dtype_name(psw.dtype())));
  }
  int64_t num_weights = weight.dims()[0], dim = weight.dims()[1];
  int64_t n = idx.dims()[0], k = off.dims()[0];
  if (has_psw && psw.dims()[0] != n)
    cx.fail("expected per_sample_weights.numel() (" + std::to_string(psw.dims()[0]) +
            ") to be the same as indices.numel() (" + std::to_string(n) + ")");
  if (include_last && k < 1) cx.fail("include_last_offset: number of offset should be at least 1");
  int64_t bags = include_last ? k - 1 : k;

  // Runtime checks, as CPU makes them.
  if (k > 0) {
    Value first = b.reshape(b.slice(off, {0}, {1}, {1}), {});
    cx.check(b.compare(first, b.constant(0, DType::I64), "NE"),
             std::string(cx.op()) +
                 ": offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                 "start from position 0",
             ErrorKind::Runtime);
    Value last = b.reshape(b.slice(off, {k - 1}, {k}, {1}), {});
    cx.check(b.compare(last, b.constant(static_cast<double>(n), DType::I64), "GT"),
             std::string(cx.op()) + ": offsets[-1] can not be greater than input's length " + std::to_string(n),
             ErrorKind::Runtime);
  }
  if (n > 0) {
    Value bad = b.or_(b.compare(idx, b.constant(0, DType::I64), "LT"),
                      b.compare(idx, b.constant(static_cast<double>(num_weights), DType::I64), "GE"));
    cx.check(any_true(b, bad),
             std::string(cx.op()) +
                 ": index out of range in self (expected idx >= 0 && idx < "
                 "num_embeddings = " +
                 std::to_string(num_weights) + ")",
             ErrorKind::Runtime);  // CPU's embedding_bag raises these as RuntimeError
  }

  DType out_type = weight.dtype(), t = hlo::opmath_type(out_type);
  Value o2b = offset2bag(b, b.slice(off, {0}, {bags}, {1}), n);
  // Padding indices are left out of every bag: their bag becomes `bags`,
  // out of range, so scatters drop them.
  Value pad;  // i1 [n], when there is a padding index
  if (padding_idx >= 0) pad = b.compare(idx, b.constant(static_cast<double>(padding_idx), DType::I64), "EQ");
  Value target =
      padding_idx >= 0 ? b.select(pad, b.full(static_cast<double>(bags), TensorType{DType::I64, {n}}), o2b) : o2b;
  Value bag_size = bag_lengths(b, off, bags, n);
  if (padding_idx >= 0 && n > 0 && bags > 0) bag_size = b.sub(bag_size, count_bags(b, pad, o2b, bags));

  bool empty = n == 0 || bags == 0 || dim == 0;
  Value rows;
  if (!empty) rows = b.take_along(b.convert(weight, t), idx, 0);  // [n, dim]
  Value output, max_indices;
  if (mode == kMax) {
    if (empty) {
      output = b.full(0, TensorType{t, {bags, dim}});
      max_indices = b.full(0, TensorType{DType::I64, {bags, dim}});
    } else {
      // The first non-padding position of each bag, and whether each index is one.
      Value pos = b.iota(TensorType{DType::I64, {n}}, 0);
      double none_pos = static_cast<double>(n);  // max_bags' position of no row
      Value first = b.scatter(b.full(none_pos, TensorType{DType::I64, {bags}}), b.reshape(target, {n, 1}), pos, {}, {0},
                              {0}, "stablehlo.minimum");
      Value is_first = b.compare(b.take_along(first, o2b, 0), pos, "EQ");
      auto [vals, where] = max_bags(b, rows, target, is_first, bags);
      Value none = b.compare(where, b.constant(none_pos, DType::I64), "EQ");
      Value firsts = b.broadcast_in_dim(first, {bags, dim}, {0});
      Value at = b.select(b.compare(where, b.constant(-1, DType::I64), "EQ"), firsts, where);
      at = b.select(none, b.full(0, TensorType{DType::I64, {bags, dim}}), at);
      output = b.select(none, b.full(0, TensorType{t, {bags, dim}}), vals);
      Value words = b.reshape(b.take_along(idx, b.reshape(at, {bags * dim}), 0), {bags, dim});
      max_indices = b.select(none, b.full(0, TensorType{DType::I64, {bags, dim}}), words);
    }
  } else {
    if (empty) {
      output = b.full(0, TensorType{t, {bags, dim}});
    } else {
      if (has_psw) rows = b.mul(rows, b.broadcast_in_dim(b.convert(psw, t), {n, dim}, {0}));
      output = sum_bags(b, rows, target, bags);
    }
    if (mode == kMean) {
      // As on CPU: the sum is rounded to the output dtype, then divided in it.
      output = b.convert(output, out_type);
      Value div = b.convert(b.max(bag_size, b.constant(1, DType::I64)), out_type);
      output = b.div(output, b.broadcast_in_dim(div, {bags, dim}, {0}));
    }
  }
  if (mode == kSum) {
    // CPU zeroes bag_size in sum mode; forward_only sizes it like offsets.
    bag_size = b.full(0, TensorType{DType::I64, {forward_only ? k : bags}});
  }
  if (mode != kMax) max_indices = bag_size;
  return {b.convert(output, out_type), b.convert(o2b, it), b.convert(bag_size, it), b.convert(max_indices, it)};
}

V embedding_bag(Context& cx) { return embedding_bag_impl(cx, false); }
V embedding_bag_forward_only(Context& cx) { return embedding_bag_impl(cx, true); }

// ---- backward

// offset2bag as the backward receives it: CPU's forward leaves it empty on
// its fast sum path, and then it is recomputed from all the offsets.
Value backward_offset2bag(Context& cx, size_t o2b_arg, size_t offsets_arg, int64_t n) {
  Value o2b = index_vector(cx, cx.tensor(o2b_arg), "offset2bag");
  if (o2b.dims()[0] == n) return o2b;
  if (o2b.dims()[0] != 0 || cx.none(offsets_arg))
    cx.fail("offset2bag of shape " + dims_str(o2b.dims()) + " does not match indices of length " + std::to_string(n));
  return offset2bag(cx.b, index_vector(cx, cx.tensor(offsets_arg), "offsets"), n);
}

// Rows a tensor has for index_select(0, ...): a 0-d one has one.
int64_t rows_of(const Value& v) { return v.rank() == 0 ? 1 : v.dims()[0]; }

// CPU's src.index_select(0, index) where the index takes the positions
// [0, k) for which `used` ([k] i1, or all of them when null) is true, with
// index_select's checks: a 0-d src takes exactly one index, 0; an empty src
// of two or more dims refuses any index when its dim 0 is empty, and one past
// it with a RuntimeError; any other src an index past its rows with an
// IndexError. Checks that depend on `used` are made at run time.
void check_rows(Context& cx, const Value& src, int64_t k, const Value* used) {
  auto& b = cx.b;
  auto fail = [&](Value bad, const std::string& message, ErrorKind kind) {
    if (used)
      cx.check(bad, std::string(cx.op()) + ": " + message, kind);
    else
      cx.fail(message, kind);
  };
  auto used_from = [&](int64_t from) { return any_true(b, b.slice(*used, {from}, {k}, {1})); };
  if (src.rank() == 0) {
    if (!used) {
      if (k != 1)
        cx.fail("index_select(): Index to scalar can have only 1 value, got " + std::to_string(k) + " value(s)");
      return;
    }
    Value count = k == 0 ? b.constant(0, DType::I64)
                         : b.reduce(b.convert(*used, DType::I64), b.constant(0, DType::I64), {0}, "stablehlo.add");
    Value one = b.constant(1, DType::I64);
    cx.check(b.compare(count, one, "NE"),
             std::string(cx.op()) + ": index_select(): Index to scalar can have only 1 value", ErrorKind::Runtime);
    if (k > 1)
      cx.check(b.and_(b.compare(count, one, "EQ"), used_from(1)),
               std::string(cx.op()) + ": index out of range in self");
    return;
  }
  int64_t rows = src.dims()[0];
  if (k <= rows) return;
  Value bad = used ? used_from(rows) : Value{};
  if (src.rank() >= 2 && numel(src.dims()) == 0) {
    if (rows == 0)
      fail(bad, "index_select(): self indexing axis dim should be positive", ErrorKind::Runtime);
    else
      fail(bad, "INDICES element is out of DATA bounds, axis_dim=" + std::to_string(rows), ErrorKind::Runtime);
    return;
  }
  fail(bad, "index out of range in self", ErrorKind::Index);
}

// The first k rows of src (a 0-d one as one row), padded with zeros past its
// rows (positions that check_rows refuses when they are used).
Value first_rows(hlo::Builder& b, Value src, int64_t k) {
  if (src.rank() == 0) src = b.reshape(src, {1});
  int64_t rows = src.dims()[0];
  if (rows > k) {
    Dims lo(src.rank(), 0), hi = src.dims(), step(src.rank(), 1);
    hi[0] = k;
    return b.slice(src, lo, hi, step);
  }
  if (rows == k) return src;
  Dims lo(src.rank(), 0), hi(src.rank(), 0), in(src.rank(), 0);
  hi[0] = k - rows;
  return b.pad(src, b.constant(0, src.dtype()), lo, hi, in);
}

std::string dtype_mismatch(DType want, DType got) {
  return "expected scalar type " + std::string(hlo::scalar_type_name(want)) + " but found " +
         std::string(hlo::scalar_type_name(got));
}

// The gradient of the weight in max mode, as CPU's
// _embedding_bag_dense_backward_cpu_max computes it: the nonempty bags
// (bag_size != 0) are index_selected from max_indices and grad, then each
// of grad's columns is index_add_ed at max_indices' column.
Value dense_backward_max(Context& cx, Value grad, Value bag_size, Value mi, int64_t num_weights) {
  auto& b = cx.b;
  if (bag_size.rank() > 1) cx.not_lowered("bag_size of more than one dim (CPU views its nonzero() coordinates)");
  int64_t k = bag_size.rank() == 0 ? 0 : bag_size.dims()[0];  // a 0-d bag_size's nonzero().view(-1) is empty
  Value used;
  if (k > 0) used = b.compare(bag_size, b.constant(0, bag_size.dtype()), "NE");
  check_rows(cx, mi, k, &used);
  check_rows(cx, grad, k, &used);
  int64_t d = grad.rank() >= 2 ? grad.dims()[1] : 0;  // CPU reads no column of a 1-D grad
  DType out_type = grad.dtype(), t = hlo::opmath_type(out_type);
  Value zeros = b.full(0, TensorType{t, {num_weights, d}});
  if (d == 0) return b.convert(zeros, out_type);
  // Per column: max_indices.select(1, c) is index_add_'s index.
  if (mi.rank() < 2)
    cx.fail("Dimension out of range (expected to be in range of [-1, 0], but got 1)", ErrorKind::Index);
  if (mi.dims()[1] < d)
    cx.fail("select(): index " + std::to_string(mi.dims()[1]) + " out of range for tensor of size " +
                dims_str(mi.dims()) + " at dimension 1",
            ErrorKind::Index);
  if (mi.rank() > 2)
    cx.fail("index_add_(): Index is supposed to be a vector, but got dim: " + std::to_string(mi.rank() - 1) +
                " with type: " + std::string(hlo::scalar_type_name(mi.dtype())),
            ErrorKind::Index);
  if (mi.dtype() != DType::I64 && mi.dtype() != DType::I32)
    cx.fail("index_add_(): Expected dtype int32/int64 for index but got: " +
            std::string(hlo::scalar_type_name(mi.dtype())));
  if (grad.rank() > 2)
    cx.fail("source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = [" +
            std::to_string(num_weights) +
            "] source.shape = " + dims_str(Dims(grad.dims().begin() + 1, grad.dims().end())));
  if (k == 0) return b.convert(zeros, out_type);
  Value m = b.convert(first_rows(b, mi, k), DType::I64);
  m = b.slice(m, {0, 0}, {k, d}, {1, 1});
  Value g = b.convert(first_rows(b, grad, k), t);
  Value use = b.broadcast_in_dim(used, {k, d}, {0});
  Value oob = b.or_(b.compare(m, b.constant(0, DType::I64), "LT"),
                    b.compare(m, b.constant(static_cast<double>(num_weights), DType::I64), "GE"));
  cx.check(any_true(b, b.and_(use, oob)), std::string(cx.op()) + ": index out of range in self");
  // Empty bags contribute nothing: their row goes out of range.
  m = b.select(use, m, b.full(static_cast<double>(num_weights), TensorType{DType::I64, {k, d}}));
  TensorType ct{DType::I64, {k, d, 1}};
  Value coords = b.concatenate({b.reshape(m, ct.dims), b.iota(ct, 1)}, 2);
  return b.convert(b.scatter(zeros, coords, g, {}, {0, 1}, {0, 1}, "stablehlo.add"), out_type);
}

// The gradient of the weight in sum and mean mode. idx and o2b are 1-D i64 of
// the same length n, bag_size 1-D, psw (when given) 1-D of length n and
// grad's dtype, grad 2-D.
Value dense_backward_sum_mean(Context& cx, Value grad, Value idx, Value o2b, Value bag_size, int64_t num_weights,
                              bool scale_grad_by_freq, int64_t mode, const Value* psw, int64_t padding_idx) {
  auto& b = cx.b;
  DType out_type = grad.dtype(), t = hlo::opmath_type(out_type);
  int64_t dim = grad.dims()[1], n = idx.dims()[0];
  Value zeros = b.full(0, TensorType{t, {num_weights, dim}});
  int64_t bags = grad.dims()[0];
  if (n == 0 || bags == 0 || dim == 0) return b.convert(zeros, out_type);
  Value g = b.convert(grad, t);
  Value rows = b.take_along(g, o2b, 0);  // [n, dim]
  bool scaled = psw || scale_grad_by_freq || mode == kMean;
  if (scaled) {
    Value s = psw ? b.convert(*psw, t) : b.full(1, TensorType{t, {n}});
    if (scale_grad_by_freq) {
      Value counts = b.scatter(b.full(0, TensorType{t, {num_weights}}), b.reshape(idx, {n, 1}),
                               b.full(1, TensorType{t, {n}}), {}, {0}, {0}, "stablehlo.add");
      s = b.div(s, b.take_along(counts, idx, 0));
    }
    if (mode == kMean) {
      Value bs = b.take_along(b.convert(bag_size, DType::I64), o2b, 0);
      Value nonzero = b.compare(bs, b.constant(0, DType::I64), "NE");
      s = b.select(nonzero, b.div(s, b.convert(bs, t)), s);
    }
    rows = b.mul(rows, b.broadcast_in_dim(s, {n, dim}, {0}));
  }
  Value target = idx;
  if (padding_idx >= 0) {
    Value pad = b.compare(idx, b.constant(static_cast<double>(padding_idx), DType::I64), "EQ");
    target = b.select(pad, b.full(static_cast<double>(num_weights), TensorType{DType::I64, {n}}), idx);
  }
  return b.convert(b.scatter(zeros, b.reshape(target, {n, 1}), rows, {1}, {0}, {0}, "stablehlo.add"), out_type);
}

// The gradient of the weight of a dense embedding bag, with the checks of
// CPU's _embedding_bag_dense_backward_cpu in its order: grad's dtype, then
// (max mode) dense_backward_max, or (sum and mean) the sort of indices and
// the index_selects of offset2bag and per_sample_weights by its order
// (IndexError for a matrix of indices or fewer rows than indices), the
// index dtype dispatch, the dtypes of offset2bag and bag_size, and last
// grad.size(1), read only when some index is not padding_idx.
Value dense_backward(Context& cx, Value grad, Value indices, Value o2b, Value bag_size, const Value* max_indices,
                     int64_t num_weights, bool scale_grad_by_freq, int64_t mode, const Value* psw,
                     int64_t padding_idx) {
  auto& b = cx.b;
  if (!hlo::is_floating(grad.dtype()))
    cx.fail(
        "Expected tensor for argument #1 'grad_' to have one of the following scalar types: Half, BFloat16, "
        "Float, Double; but got " +
        std::string(hlo::scalar_type_name(grad.dtype())) + " instead (while checking arguments for embedding_bag)");
  if (mode == kMax) {
    if (!max_indices) cx.fail("embedding_bag: mode max needs maximum_indices");
    if (num_weights < 0) cx.fail("zeros: Dimension size must be non-negative.");
    return dense_backward_max(cx, grad, bag_size, *max_indices, num_weights);
  }
  check_mode(cx, mode);
  if (num_weights < 0) cx.fail("zeros: Dimension size must be non-negative.");
  if (hlo::is_complex(indices.dtype())) cx.fail("Sort does not support complex dtypes on CPU");
  if (indices.rank() > 1) cx.fail("index_select(): Index is supposed to be a vector", ErrorKind::Index);
  int64_t n = rows_of(indices);
  check_rows(cx, o2b, n, nullptr);
  if (psw) {
    check_rows(cx, *psw, n, nullptr);
    if (psw->dtype() != grad.dtype()) cx.fail(dtype_mismatch(grad.dtype(), psw->dtype()));
  }
  DType it = indices.dtype();
  if (it != DType::I64 && it != DType::I32) refuse_dtype(cx, it, "_embedding_bag_dense_backward_cpu_sum_mean");
  if (o2b.dtype() != it) cx.fail(dtype_mismatch(it, o2b.dtype()));
  if (bag_size.dtype() != it) cx.fail(dtype_mismatch(it, bag_size.dtype()));
  if (psw && mode != kSum) cx.fail("embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  if (o2b.rank() > 1) cx.not_lowered("offset2bag of more than one dim (CPU reads its index_selected rows flat)");
  if (psw && psw->rank() > 1) cx.not_lowered("per_sample_weights of more than one dim");
  Value idx = b.convert(b.reshape(indices, {n}), DType::I64);
  Value o = b.convert(first_rows(b, o2b, n), DType::I64);
  Value p;
  if (psw) p = first_rows(b, *psw, n);
  Value bs = b.reshape(bag_size, {numel(bag_size.dims())});
  if (grad.rank() < 2) {
    // CPU reads grad.size(1) for the first index that is not padding_idx.
    if (n > 0) {
      Value live = b.compare(idx, b.constant(static_cast<double>(padding_idx), DType::I64), "NE");
      cx.check(any_true(b, live),
               std::string(cx.op()) + ": " +
                   (grad.rank() == 0 ? "Dimension specified as 1 but tensor has no dimensions"
                                     : "Dimension out of range (expected to be in range of [-1, 0], but got 1)"));
    }
    return b.full(0, TensorType{grad.dtype(), {num_weights, 0}});
  }
  // CPU reads a contiguous grad of more dims as rows of grad.size(1).
  int64_t dim = grad.dims()[1];
  if (grad.rank() > 2) {
    if (dim == 0) return b.full(0, TensorType{grad.dtype(), {num_weights, 0}});
    grad = b.reshape(grad, {numel(grad.dims()) / dim, dim});
  }
  return dense_backward_sum_mean(cx, grad, idx, o, bs, num_weights, scale_grad_by_freq, mode, psw ? &p : nullptr,
                                 padding_idx);
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
// per_sample_weights?, padding_idx)
V embedding_bag_backward(Context& cx) {
  if (cx.flag_or(9, false)) cx.fail("sparse gradients are not supported on the tpu device; use sparse=False");
  Value idx = index_vector(cx, cx.tensor(1), "indices");
  int64_t n = idx.dims()[0];
  Value o2b = backward_offset2bag(cx, 3, 2, n);
  Value mi = cx.none(5) ? Value{} : cx.tensor(5);
  Value psw = cx.none(10) ? Value{} : cx.tensor(10);
  int64_t mode = check_mode(cx, cx.integer(8));
  // indices and offset2bag are i64 here, and so is bag_size then.
  Value bag_size = cx.b.convert(cx.tensor(4), DType::I64);
  return {dense_backward(cx, cx.tensor(0), idx, o2b, bag_size, cx.none(5) ? nullptr : &mi, cx.integer(6),
                         cx.flag_or(7, false), mode, cx.none(10) ? nullptr : &psw, cx.integer_or(11, -1))};
}

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size,
// maximum_indices, num_weights, scale_grad_by_freq, mode,
// per_sample_weights?, padding_idx)
V embedding_bag_dense_backward(Context& cx) {
  Value mi = cx.none(4) ? Value{} : cx.tensor(4);
  Value psw = cx.none(8) ? Value{} : cx.tensor(8);
  return {dense_backward(cx, cx.tensor(0), cx.tensor(1), cx.tensor(2), cx.tensor(3), cx.none(4) ? nullptr : &mi,
                         cx.integer(5), cx.flag_or(6, false), cx.integer(7), cx.none(8) ? nullptr : &psw,
                         cx.integer_or(9, -1))};
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets,
// offset2bag, mode, padding_idx): grad[bag of i] . weight[indices[i]].
V embedding_bag_per_sample_weights_backward(Context& cx) {
  auto& b = cx.b;
  Value grad = cx.tensor(0), weight = cx.tensor(1);
  Value idx = index_vector(cx, cx.tensor(2), "indices");
  int64_t mode = check_mode(cx, cx.integer(5));
  if (mode != kSum) cx.fail("embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  if (grad.rank() != 2 || weight.rank() != 2 || weight.dims()[1] != grad.dims()[1])
    cx.fail("grad " + dims_str(grad.dims()) + " and weight " + dims_str(weight.dims()) +
            " must be 2-D with the same embedding dim");
  int64_t padding_idx = cx.integer_or(6, -1);
  int64_t n = idx.dims()[0], dim = grad.dims()[1];
  DType out_type = grad.dtype(), t = hlo::opmath_type(out_type);
  if (n == 0 || dim == 0 || grad.dims()[0] == 0 || weight.dims()[0] == 0) return {b.full(0, TensorType{out_type, {n}})};
  Value o2b = backward_offset2bag(cx, 4, 3, n);
  Value gr = b.take_along(b.convert(grad, t), o2b, 0);
  Value wr = b.take_along(b.convert(weight, t), idx, 0);
  Value dot = b.reduce(b.mul(gr, wr), b.constant(0, t), {1}, "stablehlo.add");
  if (padding_idx >= 0) {
    Value pad = b.compare(idx, b.constant(static_cast<double>(padding_idx), DType::I64), "EQ");
    dot = b.select(pad, b.constant(0, t), dot);
  }
  return {b.convert(dot, out_type)};
}

}  // namespace

std::vector<Entry> embedding_bag_lowerings() {
  return {
      {"aten::_embedding_bag", embedding_bag},
      {"aten::_embedding_bag_forward_only", embedding_bag_forward_only},
      {"aten::_embedding_bag_backward", embedding_bag_backward},
      {"aten::_embedding_bag_dense_backward", embedding_bag_dense_backward},
      {"aten::_embedding_bag_per_sample_weights_backward", embedding_bag_per_sample_weights_backward},
  };
}

}  // namespace torch_pjrt::lowering
