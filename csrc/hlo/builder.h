// StableHLO builder: values, ops, one function, printed as MLIR text.
//
// A Builder emits one `func.func @main` in generic MLIR syntax. Each method
// infers its result type, appends one op and returns the new Value, so a
// lowering reads as straight-line code. Nothing here knows about torch or
// PJRT. A Builder is used by one thread at a time and lives as long as the
// build of one program; Values are plain data and stay valid with it.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/dtype.h"

namespace torch_pjrt::hlo {

using Dims = std::vector<int64_t>;

// The precision_config of float32 matmuls and convolutions: what
// torch.set_float32_matmul_precision asks for. Highest is exact float32;
// High and Default let a platform use faster passes (TPUs: three bf16
// passes, one). The CPU plugin computes exact float32 for all three.
enum class Precision : uint8_t { Default, High, Highest };

// A tensor type. A dim whose bit is set in `dynamic` is bounded-dynamic:
// `dims` holds its bound and the program carries its true size (shape
// buckets, engine/bucket.h). Values with dynamic dims arise only from
// set_dimension_size, and only the Builder methods that say so accept them
// (the others throw BuildError, so an op that is not shape-generic can never
// run on padding); to_static() pads them back to their bounds.
struct TensorType {
  DType dtype = DType::F32;
  Dims dims;
  uint32_t dynamic = 0;  // bit d: dim d is dynamic (dims[d] is its bound)

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  // Elements (at the bounds, for dynamic dims).
  int64_t numel() const;
  bool is_dynamic(int64_t d) const { return (dynamic >> d) & 1u; }
  // "tensor<2x3xf32>", "tensor<f32>" for rank 0, and
  // "tensor<2x?xf32, #stablehlo.bounds<?, 8>>" for a dynamic dim 1 bounded by 8.
  std::string str() const;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && dims == o.dims && dynamic == o.dynamic; }
};

struct Value {
  int id = -1;
  TensorType type;

  DType dtype() const { return type.dtype; }
  const Dims& dims() const { return type.dims; }
  int64_t rank() const { return type.rank(); }
};

// Dims as attribute text for Builder::op: `array<i64: 1, 2>` (a dense
// array, `array<i64>` when empty), and `[1, 2]` (a list inside a #stablehlo
// attribute, also what error messages print).
std::string i64_array(const Dims& d);
std::string dims_str(const Dims& d);

// Thrown when an op is built with operands it cannot take (shape or dtype
// mismatch). The message names the op and the offending types.
struct BuildError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Builder {
 public:
  // Body of a region (reduce, scatter, sort): receives the block arguments
  // and returns the values to yield.
  using RegionFn = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;

  Value parameter(const TensorType& t);
  void set_results(const std::vector<Value>& results);
  // Lets the program reuse parameter `param`'s buffer for result `result`
  // (of the same type) when the caller donates it: `tf.aliasing_output`.
  void alias_parameter(size_t param, size_t result);
  const std::vector<Value>& parameters() const { return params_; }
  const std::vector<Value>& results() const { return results_; }
  // The whole module: `module { func.func public @main(...) { ... } }`.
  std::string module_text() const;

  // Generic escape hatch: one op, one result. `attrs` is the text inside
  // `{...}` without braces (may be empty).
  Value op(std::string_view name, const std::vector<Value>& operands, const TensorType& result,
           std::string_view attrs = {});
  std::vector<Value> op_multi(std::string_view name, const std::vector<Value>& operands,
                              const std::vector<TensorType>& results, std::string_view attrs,
                              const std::vector<std::pair<std::vector<TensorType>, RegionFn>>& regions = {});

  // Constants and shapes.
  Value constant(double v, DType t);          // rank-0
  Value full(double v, const TensorType& t);  // broadcast constant
  Value iota(const TensorType& t, int64_t dim);
  Value convert(Value x, DType to);  // no-op when equal; complex -> real keeps the real part
  Value bitcast_convert(Value x, DType to);
  Value reshape(Value x, const Dims& dims);
  Value transpose(Value x, const Dims& perm);
  Value broadcast_in_dim(Value x, const Dims& dims, const Dims& broadcast_dims);
  // NumPy-style broadcast (trailing dims aligned) to `dims`.
  Value broadcast_to(Value x, const Dims& dims);
  Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides);
  Value pad(Value x, Value pad_value, const Dims& low, const Dims& high, const Dims& interior);
  Value concatenate(const std::vector<Value>& xs, int64_t dim);
  Value dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes);
  Value dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts);
  // Bounded dynamism: dim `dim` of x (static there) gets the true size
  // `size` (a rank-0 i32 value, at most the dim's extent); to_static pads
  // every dynamic dim back to its bound (what lies past the true size is
  // unspecified).
  Value set_dimension_size(Value x, Value size, int64_t dim);
  Value to_static(Value x);
  // The true size of dim `dim` of x, a rank-0 i32 (a constant when static).
  Value dimension_size(Value x, int64_t dim);

  // Elementwise. Operands must share a dtype; shapes broadcast NumPy-style.
  Value unary(std::string_view name, Value x);
  Value binary(std::string_view name, Value a, Value b);
  Value add(Value a, Value b) { return binary("stablehlo.add", a, b); }
  Value sub(Value a, Value b) { return binary("stablehlo.subtract", a, b); }
  Value mul(Value a, Value b) { return binary("stablehlo.multiply", a, b); }
  Value div(Value a, Value b) { return binary("stablehlo.divide", a, b); }
  Value max(Value a, Value b) { return binary("stablehlo.maximum", a, b); }
  Value min(Value a, Value b) { return binary("stablehlo.minimum", a, b); }
  Value and_(Value a, Value b) { return binary("stablehlo.and", a, b); }
  Value or_(Value a, Value b) { return binary("stablehlo.or", a, b); }
  Value neg(Value x) { return unary("stablehlo.negate", x); }
  Value exp(Value x) { return unary("stablehlo.exponential", x); }
  Value log(Value x) { return unary("stablehlo.log", x); }
  Value sqrt(Value x) { return unary("stablehlo.sqrt", x); }
  Value rsqrt(Value x) { return unary("stablehlo.rsqrt", x); }
  Value tanh(Value x) { return unary("stablehlo.tanh", x); }
  // |x|; of a complex x it is the real magnitude (c64 -> f32).
  Value abs(Value x);
  Value not_(Value x) { return unary("stablehlo.not", x); }
  // Complex parts: real/imag of a complex x have its real_type (of a real x,
  // real is x and imag is zero); complex(re, im) pairs two equal real types.
  Value real(Value x);
  Value imag(Value x);
  Value complex(Value re, Value im);
  // stablehlo.fft over the last fft_length.size() dims. `type` is FFT, IFFT,
  // RFFT (real in, complex out, last dim n/2+1) or IRFFT (complex in, real
  // out, last dim fft_length.back()).
  Value fft(Value x, std::string_view type, const Dims& fft_length);
  // direction: EQ NE LT LE GT GE. Result is i1 of the broadcast shape.
  Value compare(Value a, Value b, std::string_view direction);
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);

  // Reductions over `dims` with a single binary combiner such as
  // "stablehlo.add" or "stablehlo.maximum".
  Value reduce(Value x, Value init, const Dims& dims, std::string_view combiner);
  std::vector<Value> reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, const Dims& dims,
                                  const RegionFn& body);

  // Inclusive scan along `dim` with a binary combiner (a reduce_window whose
  // window spans the dim, padded on the low side with `init`). Dynamic dims
  // keep their true sizes. The window runs over the padded value (XLA's
  // dynamic padder gave wrong sums for a true size equal to its bound):
  // element i depends only on elements 0..i, so what lies past a true size
  // never reaches a value inside it.
  Value scan(Value x, Value init, int64_t dim, std::string_view combiner);
  // The same over several operands of one shape at once, combined by `body`
  // (2k scalars in: the running values, then the next elements; k out),
  // which must be associative and commutative.
  std::vector<Value> scan_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, int64_t dim,
                                const RegionFn& body);

  Value dot_general(Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch, const Dims& lhs_contract,
                    const Dims& rhs_contract, DType result);
  // The precision of float32 dot_general and convolution ops built from now
  // on (Default: no precision_config attribute).
  void set_precision(Precision p) { precision_ = p; }
  // ", precision_config = [...]" for an op on `operand`s of this dtype, or "".
  std::string precision_attr(DType operand) const;

  // Gather rows along `dim` of x by integer `index` (any rank): result dims are
  // x.dims[:dim] + index.dims + x.dims[dim+1:]. Index values must be in range.
  Value take_along(Value x, Value index, int64_t dim);
  // General stablehlo.gather: `index` has its index vector in the last dim.
  Value gather(Value x, Value index, const Dims& offset_dims, const Dims& collapsed_slice_dims,
               const Dims& start_index_map, const Dims& slice_sizes, const Dims& result_dims);
  // stablehlo.scatter with one operand; `combiner` empty means replace.
  Value scatter(Value x, Value index, Value updates, const Dims& update_window_dims, const Dims& inserted_window_dims,
                const Dims& scatter_dims_to_operand_dims, std::string_view combiner);

  // Returns {new_state, bits}; state is ui64[2], bits have type `out`.
  std::pair<Value, Value> rng_bit_generator(Value state, const TensorType& out);

 private:
  Precision precision_ = Precision::Default;
  // Set while a method that types dynamic dims itself emits its op; every
  // other op refuses dynamic operands (op_multi).
  bool allow_dynamic_ = false;
  struct Dynamic {
    explicit Dynamic(Builder& b) : b(b), was(b.allow_dynamic_) { b.allow_dynamic_ = true; }
    ~Dynamic() { b.allow_dynamic_ = was; }
    Builder& b;
    bool was;
  };
  int next_id() { return next_id_++; }
  std::string& out() { return *blocks_.back(); }
  void emit_region(const std::vector<TensorType>& arg_types, const RegionFn& body);

  int next_id_ = 0;
  std::vector<Value> params_;
  std::vector<int64_t> param_alias_;  // per parameter: the aliased result, or -1
  std::vector<Value> results_;
  std::string body_;
  std::vector<std::string*> blocks_{&body_};
  int indent_ = 2;
};

// Broadcast shape of two NumPy-style shapes; throws BuildError if they do not
// broadcast.
Dims broadcast_shapes(const Dims& a, const Dims& b);

}  // namespace torch_pjrt::hlo
