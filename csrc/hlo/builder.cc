#include "hlo/builder.h"

#include <algorithm>
#include <sstream>

namespace torch_pjrt::hlo {
namespace {

std::string join(const Dims& d, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(d[i]);
  }
  return s;
}

std::string name(const Value& v) { return "%" + std::to_string(v.id); }

std::string types(const std::vector<Value>& vs) {
  std::string s;
  for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + vs[i].type.str();
  return s;
}

std::string types(const std::vector<TensorType>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}

[[noreturn]] void fail(std::string_view op, const std::string& why) { throw BuildError(std::string(op) + ": " + why); }

void check_dim(std::string_view op, int64_t d, int64_t rank) {
  if (d < 0 || d >= rank) fail(op, "dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
}

}  // namespace

std::string i64_array(const Dims& d) { return d.empty() ? "array<i64>" : "array<i64: " + join(d) + ">"; }
std::string dims_str(const Dims& d) { return "[" + join(d) + "]"; }

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (size_t d = 0; d < dims.size(); ++d) s += (is_dynamic(d) ? std::string("?") : std::to_string(dims[d])) + "x";
  s += mlir_name(dtype);
  if (dynamic) {
    s += ", #stablehlo.bounds<";
    for (size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + (is_dynamic(d) ? std::to_string(dims[d]) : "?");
    s += ">";
  }
  return s + ">";
}

Dims broadcast_shapes(const Dims& a, const Dims& b) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw BuildError("shapes [" + join(a) + "] and [" + join(b) + "] are not broadcastable");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value Builder::parameter(const TensorType& t) {
  Value v{next_id(), t};
  params_.push_back(v);
  param_alias_.push_back(-1);
  return v;
}

void Builder::alias_parameter(size_t param, size_t result) { param_alias_.at(param) = static_cast<int64_t>(result); }

void Builder::set_results(const std::vector<Value>& results) { results_ = results; }

std::string Builder::module_text() const {
  std::string s = "module @torch_pjrt {\n  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    s += (i ? ", " : "") + name(params_[i]) + ": " + params_[i].type.str();
    if (param_alias_[i] >= 0) s += " {tf.aliasing_output = " + std::to_string(param_alias_[i]) + " : i32}";
  }
  s += ") -> (" + types(results_) + ") {\n";
  s += body_;
  s += "    \"func.return\"(";
  for (size_t i = 0; i < results_.size(); ++i) s += (i ? ", " : "") + name(results_[i]);
  s += ") : (" + types(results_) + ") -> ()\n  }\n}\n";
  return s;
}

std::vector<Value> Builder::op_multi(std::string_view op_name, const std::vector<Value>& operands,
                                     const std::vector<TensorType>& result_types, std::string_view attrs,
                                     const std::vector<std::pair<std::vector<TensorType>, RegionFn>>& regions) {
  if (!allow_dynamic_) {
    for (const auto& v : operands)
      if (v.type.dynamic) fail(op_name, "takes no shape-bucketed (dynamic) operand: " + v.type.str());
    for (const auto& t : result_types)
      if (t.dynamic) fail(op_name, "makes no shape-bucketed (dynamic) result: " + t.str());
  }
  std::vector<Value> results;
  for (const auto& t : result_types) results.push_back(Value{next_id(), t});
  std::string line(indent_ + 2, ' ');
  if (!results.empty()) {
    for (size_t i = 0; i < results.size(); ++i) line += (i ? ", " : "") + name(results[i]);
    line += " = ";
  }
  line += "\"" + std::string(op_name) + "\"(";
  for (size_t i = 0; i < operands.size(); ++i) line += (i ? ", " : "") + name(operands[i]);
  line += ")";
  out() += line;
  if (!regions.empty()) {
    out() += " (";
    for (size_t r = 0; r < regions.size(); ++r) {
      if (r) out() += ", ";
      emit_region(regions[r].first, regions[r].second);
    }
    out() += ")";
  }
  if (!attrs.empty()) out() += " {" + std::string(attrs) + "}";
  out() += " : (" + types(operands) + ") -> ";
  out() += results.size() == 1 ? results[0].type.str() : "(" + types(result_types) + ")";
  out() += "\n";
  return results;
}

void Builder::emit_region(const std::vector<TensorType>& arg_types, const RegionFn& body) {
  std::vector<Value> args;
  for (const auto& t : arg_types) args.push_back(Value{next_id(), t});
  std::string text = "{\n" + std::string(indent_ + 2, ' ') + "^bb0(";
  for (size_t i = 0; i < args.size(); ++i) text += (i ? ", " : "") + name(args[i]) + ": " + args[i].type.str();
  text += "):\n";
  std::string inner;
  blocks_.push_back(&inner);
  indent_ += 2;
  bool allow = allow_dynamic_;
  allow_dynamic_ = false;  // a region body is not the op that accepted dynamic operands
  std::vector<Value> yielded = body(*this, args);
  op_multi("stablehlo.return", yielded, {}, {});
  allow_dynamic_ = allow;
  indent_ -= 2;
  blocks_.pop_back();
  out() += text + inner + std::string(indent_ + 2, ' ') + "}";
}

Value Builder::op(std::string_view op_name, const std::vector<Value>& operands, const TensorType& result,
                  std::string_view attrs) {
  return op_multi(op_name, operands, {result}, attrs)[0];
}

Value Builder::constant(double v, DType t) {
  TensorType type{t, {}};
  return op("stablehlo.constant", {}, type, "value = dense<" + literal(v, t) + "> : " + type.str());
}

Value Builder::full(double v, const TensorType& t) { return broadcast_in_dim(constant(v, t.dtype), t.dims, {}); }

Value Builder::iota(const TensorType& t, int64_t dim) {
  check_dim("iota", dim, t.rank());
  return op("stablehlo.iota", {}, t, "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::convert(Value x, DType to) {
  if (x.dtype() == to) return x;
  if (to == DType::Bool) return compare(x, constant(0, x.dtype()), "NE");
  if (is_complex(x.dtype()) && !is_complex(to)) return convert(real(x), to);
  Dynamic ok(*this);
  return op("stablehlo.convert", {x}, TensorType{to, x.dims(), x.type.dynamic});
}

Value Builder::abs(Value x) {
  Dynamic ok(*this);
  return op("stablehlo.abs", {x}, TensorType{real_type(x.dtype()), x.dims(), x.type.dynamic});
}

Value Builder::real(Value x) {
  if (!is_complex(x.dtype())) return x;
  Dynamic ok(*this);
  return op("stablehlo.real", {x}, TensorType{real_type(x.dtype()), x.dims(), x.type.dynamic});
}

Value Builder::imag(Value x) {
  if (!is_complex(x.dtype())) return full(0, x.type);
  return op("stablehlo.imag", {x}, TensorType{real_type(x.dtype()), x.dims()});
}

Value Builder::complex(Value re, Value im) {
  if (re.dtype() != im.dtype() || (re.dtype() != DType::F32 && re.dtype() != DType::F64))
    fail("complex", "parts must both be f32 or both f64: " + re.type.str() + " vs " + im.type.str());
  Dims dims = broadcast_shapes(re.dims(), im.dims());
  return op("stablehlo.complex", {broadcast_to(re, dims), broadcast_to(im, dims)},
            TensorType{complex_type(re.dtype()), dims});
}

Value Builder::fft(Value x, std::string_view type, const Dims& fft_length) {
  const int64_t k = static_cast<int64_t>(fft_length.size());
  if (k < 1 || k > 3 || k > x.rank()) fail("fft", "needs 1 to 3 dims within the operand's rank");
  Dims dims = x.dims();
  DType dtype = x.dtype();
  if (type == "RFFT") {
    if (is_complex(dtype)) fail("fft", "RFFT takes a real operand");
    dtype = complex_type(dtype);
    dims.back() = fft_length.back() / 2 + 1;
  } else if (type == "IRFFT") {
    if (!is_complex(dtype)) fail("fft", "IRFFT takes a complex operand");
    dtype = real_type(dtype);
    dims.back() = fft_length.back();
  } else if (!is_complex(dtype)) {
    fail("fft", std::string(type) + " takes a complex operand");
  }
  return op("stablehlo.fft", {x}, TensorType{dtype, dims},
            "fft_type = #stablehlo<fft_type " + std::string(type) + ">, fft_length = " + i64_array(fft_length));
}

Value Builder::bitcast_convert(Value x, DType to) {
  if (byte_size(x.dtype()) != byte_size(to)) fail("bitcast_convert", "element sizes differ");
  Dynamic ok(*this);
  return op("stablehlo.bitcast_convert", {x}, TensorType{to, x.dims(), x.type.dynamic});
}

Value Builder::reshape(Value x, const Dims& dims) {
  TensorType t{x.dtype(), dims};
  if (t.numel() != x.type.numel()) fail("reshape", "cannot reshape " + x.type.str() + " to " + t.str());
  if (dims == x.dims()) return x;
  if (x.type.dynamic) {
    // Only size-1 dims may come or go: each dim of extent > 1 keeps its
    // place among the others, with its dynamic bit.
    Dynamic ok(*this);
    size_t j = 0;
    for (int64_t i = 0; i < x.rank(); ++i) {
      if (x.dims()[i] == 1 && !x.type.is_dynamic(i)) continue;
      while (j < dims.size() && dims[j] == 1 && dims[j] != x.dims()[i]) ++j;
      if (j == dims.size() || dims[j] != x.dims()[i])
        fail("reshape", "cannot reshape shape-bucketed " + x.type.str() + " to " + t.str());
      if (x.type.is_dynamic(i)) t.dynamic |= 1u << j;
      ++j;
    }
    return op("stablehlo.reshape", {x}, t);
  }
  return op("stablehlo.reshape", {x}, t);
}

Value Builder::transpose(Value x, const Dims& perm) {
  if (static_cast<int64_t>(perm.size()) != x.rank()) fail("transpose", "permutation rank mismatch");
  TensorType t{x.dtype(), {}};
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    check_dim("transpose", perm[i], x.rank());
    t.dims.push_back(x.dims()[perm[i]]);
    if (x.type.is_dynamic(perm[i])) t.dynamic |= 1u << i;
    identity &= perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return x;
  Dynamic ok(*this);
  return op("stablehlo.transpose", {x}, t, "permutation = " + i64_array(perm));
}

Value Builder::broadcast_in_dim(Value x, const Dims& dims, const Dims& broadcast_dims) {
  if (static_cast<int64_t>(broadcast_dims.size()) != x.rank()) fail("broadcast_in_dim", "broadcast_dims rank mismatch");
  for (size_t i = 0; i < broadcast_dims.size(); ++i) {
    check_dim("broadcast_in_dim", broadcast_dims[i], static_cast<int64_t>(dims.size()));
    int64_t in = x.dims()[i], outd = dims[broadcast_dims[i]];
    if (in != 1 && in != outd)
      fail("broadcast_in_dim", "cannot broadcast " + x.type.str() + " to [" + join(dims) + "]");
  }
  if (dims == x.dims()) {
    bool identity = true;
    for (size_t i = 0; i < broadcast_dims.size(); ++i) identity &= broadcast_dims[i] == static_cast<int64_t>(i);
    if (identity) return x;
  }
  // StableHLO's broadcast_in_dim takes at most one bounded dim, and XLA
  // expands no bounded dim: with more than one, or a bounded dim of bound 1
  // that expands (its true size is 1: empty dims never run bucketed), the
  // padded value is broadcast, and the dims that stay dynamic get their
  // true sizes back.
  int dynamic = 0;
  bool expands = false;
  for (size_t i = 0; i < broadcast_dims.size(); ++i) {
    if (!x.type.is_dynamic(static_cast<int64_t>(i))) continue;
    ++dynamic;
    expands |= x.dims()[i] != dims[broadcast_dims[i]];
  }
  if (dynamic > 1 || expands) {
    std::vector<std::pair<int64_t, Value>> sizes;
    for (size_t i = 0; i < broadcast_dims.size(); ++i)
      if (x.type.is_dynamic(static_cast<int64_t>(i)) && x.dims()[i] == dims[broadcast_dims[i]])
        sizes.emplace_back(broadcast_dims[i], dimension_size(x, static_cast<int64_t>(i)));
    Value r = broadcast_in_dim(to_static(x), dims, broadcast_dims);
    for (const auto& [d, n] : sizes) r = set_dimension_size(r, n, d);
    return r;
  }
  TensorType t{x.dtype(), dims};
  for (size_t i = 0; i < broadcast_dims.size(); ++i)
    if (x.type.is_dynamic(i)) t.dynamic |= 1u << broadcast_dims[i];
  Dynamic ok(*this);
  return op("stablehlo.broadcast_in_dim", {x}, t, "broadcast_dimensions = " + i64_array(broadcast_dims));
}

Value Builder::broadcast_to(Value x, const Dims& dims) {
  if (x.dims() == dims) return x;
  int64_t lead = static_cast<int64_t>(dims.size()) - x.rank();
  if (lead < 0) fail("broadcast_to", "cannot broadcast " + x.type.str() + " to [" + join(dims) + "]");
  Dims bd;
  for (int64_t i = 0; i < x.rank(); ++i) bd.push_back(lead + i);
  return broadcast_in_dim(x, dims, bd);
}

Value Builder::slice(Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  Dims dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (start[i] < 0 || limit[i] > x.dims()[i] || start[i] > limit[i] || strides[i] < 1) fail("slice", "bad bounds");
    dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  if (dims == x.dims()) return x;
  TensorType t{x.dtype(), dims, x.type.dynamic};
  for (int64_t i = 0; i < x.rank(); ++i)
    if (x.type.is_dynamic(i) && (start[i] != 0 || limit[i] != x.dims()[i] || strides[i] != 1))
      fail("slice", "cannot slice the shape-bucketed dim " + std::to_string(i) + " of " + x.type.str());
  Dynamic ok(*this);
  return op("stablehlo.slice", {x}, t,
            "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                ", strides = " + i64_array(strides));
}

Value Builder::pad(Value x, Value pad_value, const Dims& low, const Dims& high, const Dims& interior) {
  Dims dims;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t d = x.dims()[i];
    dims.push_back(low[i] + high[i] + d + std::max<int64_t>(d - 1, 0) * interior[i]);
  }
  return op("stablehlo.pad", {x, pad_value}, TensorType{x.dtype(), dims},
            "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                ", interior_padding = " + i64_array(interior));
}

Value Builder::concatenate(const std::vector<Value>& xs, int64_t dim) {
  if (xs.empty()) fail("concatenate", "no inputs");
  if (xs.size() == 1) return xs[0];
  TensorType t{xs[0].dtype(), xs[0].dims()};
  check_dim("concatenate", dim, xs[0].rank());
  t.dims[dim] = 0;
  for (const auto& x : xs) {
    if (x.rank() != xs[0].rank() || x.dtype() != xs[0].dtype()) fail("concatenate", "operands differ in rank or dtype");
    t.dims[dim] += x.dims()[dim];
    t.dynamic |= x.type.dynamic;
  }
  // XLA's dynamic padder takes dynamic operands first, static ones after,
  // all alike outside `dim`; anything else aborts its compiler.
  bool seen_static = false;
  const uint32_t outside = t.dynamic & ~(1u << dim);
  for (const auto& x : xs) {
    if (t.dynamic && ((x.type.dynamic & ~(1u << dim)) != outside || (seen_static && x.type.dynamic)))
      fail("concatenate", "takes dynamic operands only before static ones, alike outside the concatenated dim");
    seen_static |= !x.type.is_dynamic(dim);
  }
  Dynamic ok(*this);
  return op("stablehlo.concatenate", xs, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes) {
  std::vector<Value> operands{x};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("stablehlo.dynamic_slice", operands, TensorType{x.dtype(), sizes}, "slice_sizes = " + i64_array(sizes));
}

Value Builder::dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts) {
  std::vector<Value> operands{x, update};
  operands.insert(operands.end(), starts.begin(), starts.end());
  return op("stablehlo.dynamic_update_slice", operands, x.type);
}

Value Builder::set_dimension_size(Value x, Value size, int64_t dim) {
  check_dim("set_dimension_size", dim, x.rank());
  if (x.type.is_dynamic(dim) || !(size.type == TensorType{DType::I32, {}}))
    fail("set_dimension_size", "takes a static dim and a rank-0 i32 size");
  TensorType t = x.type;
  t.dynamic |= 1u << dim;
  Dynamic ok(*this);
  return op("stablehlo.set_dimension_size", {x, size}, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::to_static(Value x) {
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!x.type.is_dynamic(d)) continue;
    TensorType t = x.type;
    t.dynamic &= ~(1u << d);
    Value bound = constant(static_cast<double>(x.dims()[d]), DType::I32);
    Dynamic ok(*this);
    x = op("stablehlo.set_dimension_size", {x, bound}, t, "dimension = " + std::to_string(d) + " : i64");
  }
  return x;
}

Value Builder::dimension_size(Value x, int64_t dim) {
  check_dim("dimension_size", dim, x.rank());
  if (!x.type.is_dynamic(dim)) return constant(static_cast<double>(x.dims()[dim]), DType::I32);
  Dynamic ok(*this);
  return op("stablehlo.get_dimension_size", {x}, TensorType{DType::I32, {}},
            "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::unary(std::string_view op_name, Value x) {
  Dynamic ok(*this);
  return op(op_name, {x}, x.type);
}

Value Builder::binary(std::string_view op_name, Value a, Value b) {
  if (a.dtype() != b.dtype()) fail(op_name, "operand dtypes differ: " + a.type.str() + " vs " + b.type.str());
  Dims dims = broadcast_shapes(a.dims(), b.dims());
  a = broadcast_to(a, dims);
  b = broadcast_to(b, dims);
  Dynamic ok(*this);
  return op(op_name, {a, b}, TensorType{a.dtype(), dims, a.type.dynamic | b.type.dynamic});
}

Value Builder::compare(Value a, Value b, std::string_view direction) {
  if (a.dtype() != b.dtype()) fail("compare", "operand dtypes differ: " + a.type.str() + " vs " + b.type.str());
  Dims dims = broadcast_shapes(a.dims(), b.dims());
  a = broadcast_to(a, dims);
  b = broadcast_to(b, dims);
  Dynamic ok(*this);
  return op("stablehlo.compare", {a, b}, TensorType{DType::Bool, dims, a.type.dynamic | b.type.dynamic},
            "comparison_direction = #stablehlo<comparison_direction " + std::string(direction) +
                ">, compare_type = #stablehlo<comparison_type " + std::string(comparison_type(a.dtype())) + ">");
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  if (on_true.dtype() != on_false.dtype()) fail("select", "branch dtypes differ");
  Dims dims = broadcast_shapes(broadcast_shapes(pred.dims(), on_true.dims()), on_false.dims());
  Value p = broadcast_to(convert(pred, DType::Bool), dims), t = broadcast_to(on_true, dims),
        f = broadcast_to(on_false, dims);
  Dynamic ok(*this);
  return op("stablehlo.select", {p, t, f},
            TensorType{on_true.dtype(), dims, p.type.dynamic | t.type.dynamic | f.type.dynamic});
}

Value Builder::clamp(Value lo, Value x, Value hi) { return min(max(x, lo), hi); }

Value Builder::reduce(Value x, Value init, const Dims& dims, std::string_view combiner) {
  std::string comb(combiner);
  return reduce_multi({x}, {init}, dims, [comb](Builder& b, const std::vector<Value>& args) {
    return std::vector<Value>{b.op(comb, {args[0], args[1]}, args[0].type)};
  })[0];
}

Value Builder::scan(Value x, Value init, int64_t dim, std::string_view combiner) {
  std::string comb(combiner);
  return scan_multi({x}, {init}, dim, [comb](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.op(comb, {a[0], a[1]}, a[0].type)};
  })[0];
}

std::vector<Value> Builder::scan_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, int64_t dim,
                                       const RegionFn& body) {
  const Value& x = xs[0];
  check_dim("scan", dim, x.rank());
  const int64_t n = x.dims()[dim];
  if (n <= 1) return xs;
  std::string win, str, pad;
  for (int64_t i = 0; i < x.rank(); ++i) {
    win += (i ? ", " : "") + std::to_string(i == dim ? n : 1);
    str += i ? ", 1" : "1";
    pad += (i ? ", " : "") + std::string(i == dim ? "[" + std::to_string(n - 1) + ", 0]" : "[0, 0]");
  }
  std::string attrs = "window_dimensions = array<i64: " + win + ">, window_strides = array<i64: " + str +
                      ">, padding = dense<[" + pad + "]> : tensor<" + std::to_string(x.rank()) + "x2xi64>";
  std::vector<Value> operands;
  std::vector<TensorType> results, region_args;
  for (const Value& v : xs) {
    operands.push_back(to_static(v));
    results.push_back(operands.back().type);
  }
  operands.insert(operands.end(), inits.begin(), inits.end());
  for (int pass = 0; pass < 2; ++pass)
    for (const Value& v : xs) region_args.push_back(TensorType{v.dtype(), {}});
  std::vector<Value> r = op_multi("stablehlo.reduce_window", operands, results, attrs, {{region_args, body}});
  for (Value& v : r)
    for (int64_t d = 0; d < x.rank(); ++d)
      if (x.type.is_dynamic(d)) v = set_dimension_size(v, dimension_size(x, d), d);
  return r;
}

std::vector<Value> Builder::reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits,
                                         const Dims& dims, const RegionFn& body) {
  Dims kept;
  uint32_t dynamic = 0;
  for (int64_t i = 0; i < xs[0].rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
      for (const auto& x : xs)
        if (x.type.is_dynamic(i)) dynamic |= 1u << kept.size();
      kept.push_back(xs[0].dims()[i]);
    }
  for (int64_t d : dims) check_dim("reduce", d, xs[0].rank());
  Dims sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  std::vector<TensorType> results, region_args;
  for (const auto& x : xs) results.push_back(TensorType{x.dtype(), kept, dynamic});
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& x : xs) region_args.push_back(TensorType{x.dtype(), {}});
  std::vector<Value> operands = xs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  Dynamic ok(*this);
  return op_multi("stablehlo.reduce", operands, results, "dimensions = " + i64_array(sorted), {{region_args, body}});
}

Value Builder::dot_general(Value a, Value b, const Dims& lb, const Dims& rb, const Dims& lc, const Dims& rc,
                           DType result) {
  if (lb.size() != rb.size() || lc.size() != rc.size()) fail("dot_general", "dimension lists differ in length");
  Dims dims;
  uint32_t dynamic = 0;
  auto keep = [&](int64_t extent, bool dyn) {
    if (dyn) dynamic |= 1u << dims.size();
    dims.push_back(extent);
  };
  for (size_t i = 0; i < lb.size(); ++i) keep(a.dims()[lb[i]], a.type.is_dynamic(lb[i]) || b.type.is_dynamic(rb[i]));
  for (size_t i = 0; i < lc.size(); ++i)
    if (a.dims()[lc[i]] != b.dims()[rc[i]])
      fail("dot_general", "contracting dimensions differ: " + a.type.str() + " and " + b.type.str());
  for (int64_t i = 0; i < a.rank(); ++i)
    if (std::find(lb.begin(), lb.end(), i) == lb.end() && std::find(lc.begin(), lc.end(), i) == lc.end())
      keep(a.dims()[i], a.type.is_dynamic(i));
  for (int64_t i = 0; i < b.rank(); ++i)
    if (std::find(rb.begin(), rb.end(), i) == rb.end() && std::find(rc.begin(), rc.end(), i) == rc.end())
      keep(b.dims()[i], b.type.is_dynamic(i));
  std::string nums = "dot_dimension_numbers = #stablehlo.dot<";
  std::vector<std::string> parts;
  if (!lb.empty()) parts.push_back("lhs_batching_dimensions = " + dims_str(lb));
  if (!rb.empty()) parts.push_back("rhs_batching_dimensions = " + dims_str(rb));
  parts.push_back("lhs_contracting_dimensions = " + dims_str(lc));
  parts.push_back("rhs_contracting_dimensions = " + dims_str(rc));
  for (size_t i = 0; i < parts.size(); ++i) nums += (i ? ", " : "") + parts[i];
  nums += ">" + precision_attr(a.dtype());
  Dynamic ok(*this);
  return op("stablehlo.dot_general", {a, b}, TensorType{result, dims, dynamic}, nums);
}

std::string Builder::precision_attr(DType operand) const {
  if (precision_ == Precision::Default || operand != DType::F32) return "";
  const char* p = precision_ == Precision::Highest ? "HIGHEST" : "HIGH";
  return std::string(", precision_config = [#stablehlo<precision ") + p + ">, #stablehlo<precision " + p + ">]";
}

Value Builder::gather(Value x, Value index, const Dims& offset_dims, const Dims& collapsed_slice_dims,
                      const Dims& start_index_map, const Dims& slice_sizes, const Dims& result_dims) {
  std::string attrs = "dimension_numbers = #stablehlo.gather<offset_dims = " + dims_str(offset_dims) +
                      ", collapsed_slice_dims = " + dims_str(collapsed_slice_dims) +
                      ", start_index_map = " + dims_str(start_index_map) +
                      ", index_vector_dim = " + std::to_string(index.rank() - 1) +
                      ">, indices_are_sorted = false, slice_sizes = " + i64_array(slice_sizes);
  return op("stablehlo.gather", {x, index}, TensorType{x.dtype(), result_dims}, attrs);
}

Value Builder::take_along(Value x, Value index, int64_t dim) {
  check_dim("take_along", dim, x.rank());
  Value idx = reshape(index, [&] {
    Dims d = index.dims();
    d.push_back(1);
    return d;
  }());
  Dims slice_sizes = x.dims(), offset_dims, result;
  slice_sizes[dim] = 1;
  for (int64_t i = 0; i < dim; ++i) result.push_back(x.dims()[i]);
  for (int64_t d : index.dims()) result.push_back(d);
  for (int64_t i = dim + 1; i < x.rank(); ++i) result.push_back(x.dims()[i]);
  // Offset dims are the kept dims of x, placed around the index dims.
  for (int64_t i = 0; i < dim; ++i) offset_dims.push_back(i);
  for (int64_t i = dim + 1; i < x.rank(); ++i) offset_dims.push_back(i - 1 + index.rank());
  return gather(x, idx, offset_dims, {dim}, {dim}, slice_sizes, result);
}

Value Builder::scatter(Value x, Value index, Value updates, const Dims& update_window_dims,
                       const Dims& inserted_window_dims, const Dims& scatter_dims_to_operand_dims,
                       std::string_view combiner) {
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " + dims_str(update_window_dims) +
      ", inserted_window_dims = " + dims_str(inserted_window_dims) +
      ", scatter_dims_to_operand_dims = " + dims_str(scatter_dims_to_operand_dims) +
      ", index_vector_dim = " + std::to_string(index.rank() - 1) +
      ">, indices_are_sorted = false, unique_indices = false";
  std::string comb(combiner);
  TensorType scalar{x.dtype(), {}};
  return op_multi("stablehlo.scatter", {x, index, updates}, {x.type}, attrs,
                  {{{scalar, scalar}, [comb](Builder& b, const std::vector<Value>& args) {
                      if (comb.empty()) return std::vector<Value>{args[1]};
                      return std::vector<Value>{b.op(comb, {args[0], args[1]}, args[0].type)};
                    }}})[0];
}

std::pair<Value, Value> Builder::rng_bit_generator(Value state, const TensorType& out_type) {
  auto r = op_multi("stablehlo.rng_bit_generator", {state}, {state.type, out_type},
                    "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return {r[0], r[1]};
}

}  // namespace torch_pjrt::hlo
