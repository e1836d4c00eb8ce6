// What a lowering sees: the builder and the ATen call's arguments.
//
// The torch glue turns each argument of an ATen call into an Arg, in schema
// order: tensors and runtime scalars arrive as StableHLO Values (program
// parameters), static arguments (dims, flags, dtypes) as plain data that is
// part of the compile key. A lowering reads them by position and returns the
// op's results as Values. It never branches on dtype: promotion and
// conversion go through the helpers here, which ask hlo/dtype.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/builder.h"

namespace torch_pjrt::lowering {

using hlo::Dims;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;

struct Arg {
  enum class Kind : uint8_t { None, Tensor, TensorList, Scalar, Int, Ints, Bool, DType, String, Rng };
  Kind kind = Kind::None;
  Value value;                // Tensor, Scalar (rank 0: f64, i64 or i1), Rng (ui64[2] state)
  std::vector<Value> values;  // TensorList
  int64_t i = 0;              // Int, Bool, DType (as hlo::DType)
  std::vector<int64_t> ints;  // Ints
  std::string s;              // String
  // Scalar: its value, when the program holds it as a constant (Traits::fixed_values).
  std::optional<double> fixed;

  static Arg none() { return Arg{}; }
  static Arg tensor(Value v) { return Arg{Kind::Tensor, v, {}, 0, {}, {}, {}}; }
  static Arg scalar(Value v) { return Arg{Kind::Scalar, v, {}, 0, {}, {}, {}}; }
  static Arg integer(int64_t i) { return Arg{Kind::Int, {}, {}, i, {}, {}, {}}; }
  static Arg integers(std::vector<int64_t> v) { return Arg{Kind::Ints, {}, {}, 0, std::move(v), {}, {}}; }
  static Arg boolean(bool b) { return Arg{Kind::Bool, {}, {}, b, {}, {}, {}}; }
  static Arg dtype(DType t) { return Arg{Kind::DType, {}, {}, static_cast<int64_t>(t), {}, {}, {}}; }
  static Arg string(std::string s) { return Arg{Kind::String, {}, {}, 0, {}, std::move(s), {}}; }
  static Arg tensor_list(std::vector<Value> v) { return Arg{Kind::TensorList, {}, std::move(v), 0, {}, {}, {}}; }
  static Arg rng(Value state) { return Arg{Kind::Rng, state, {}, 0, {}, {}, {}}; }
};

// The Python exception class an error becomes, chosen to match what CPU
// PyTorch raises for the same input. The glue maps it in one place.
enum class ErrorKind : uint8_t { Runtime, Index, Value, Type, NotImplemented, ZeroDivision };

// Raised for arguments a lowering cannot take; the glue turns it into a
// Python error of `kind` naming the op.
struct LoweringError : std::runtime_error {
  explicit LoweringError(const std::string& what, ErrorKind kind = ErrorKind::Runtime)
      : std::runtime_error(what), kind(kind) {}
  ErrorKind kind;
};

// Raised for inputs PyTorch accepts but a lowering has no native algorithm
// for (say a complex dtype): the glue runs that call through the CPU
// fallback instead, warned and counted like any other fallback.
struct NotLowered : LoweringError {
  using LoweringError::LoweringError;
};

// A runtime check a program makes about its inputs (for example an index out
// of range, or an integer division by zero). `failed` is a rank-0 i1 that is
// true when the input was bad. The engine reads it at the next sync point (or
// at once in debug mode) and raises `message` as an error of `kind`.
struct Check {
  Value failed;
  std::string message;
  ErrorKind kind = ErrorKind::Index;
};

// A runtime check on a Python scalar argument alone (a value that must fit
// the dtype the op computes in, c10's checked_convert rule): the engine
// makes it on the host before the program runs, at no device cost, and
// raises `message` as a RuntimeError.
struct ScalarCheck {
  size_t arg;
  DType fits;
  std::string message;
};
// Whether the scalar `bytes` of dtype `from` (as CallArg holds it) does not
// fit dtype `to`: out of its range (NaN and infinities fit a float type,
// NaN fits no integer type), or a nonzero imaginary part for a real `to`.
bool scalar_overflows(const uint8_t* bytes, DType from, DType to);

class Context {
 public:
  Context(hlo::Builder& b, std::vector<Arg> args, std::string_view op) : b(b), args_(std::move(args)), op_(op) {}

  hlo::Builder& b;

  size_t size() const { return args_.size(); }
  std::string_view op() const { return op_; }
  const Arg& arg(size_t i) const;
  bool none(size_t i) const { return i >= args_.size() || args_[i].kind == Arg::Kind::None; }

  // Tensor or scalar argument as a Value (scalars are rank 0).
  Value tensor(size_t i) const;
  const std::vector<Value>& tensors(size_t i) const;
  int64_t integer(size_t i) const;
  int64_t integer_or(size_t i, int64_t fallback) const { return none(i) ? fallback : integer(i); }
  const std::vector<int64_t>& ints(size_t i) const;
  bool flag(size_t i) const;
  bool flag_or(size_t i, bool fallback) const { return none(i) ? fallback : flag(i); }
  DType dtype(size_t i) const;
  const std::string& str(size_t i) const;
  // A Scalar argument's value when it is a program constant (Traits::fixed_values),
  // else nullopt (a runtime parameter).
  std::optional<double> fixed_scalar(size_t i) const { return none(i) ? std::nullopt : args_[i].fixed; }
  Value rng(size_t i) const;

  // torch.result_type over the given arguments (tensors, zero-dim tensors and
  // Python scalars each with their own priority).
  DType result_type(std::initializer_list<size_t> idx) const;
  // Argument i converted to dtype t.
  Value as(size_t i, DType t) const { return b.convert(tensor(i), t); }
  // A dim argument normalised against `rank` (negative dims wrap).
  int64_t dim(int64_t d, int64_t rank) const;
  Dims dims(const std::vector<int64_t>& ds, int64_t rank) const;

  void check(Value failed, std::string message, ErrorKind kind = ErrorKind::Index) {
    checks_.push_back({failed, std::move(message), kind});
  }
  const std::vector<Check>& checks() const { return checks_; }
  void check_scalar(size_t arg, DType fits, std::string message) {
    scalar_checks_.push_back({arg, fits, std::move(message)});
  }
  const std::vector<ScalarCheck>& scalar_checks() const { return scalar_checks_; }

  // Throws LoweringError("<op>: why") of `kind`.
  [[noreturn]] void fail(const std::string& why, ErrorKind kind = ErrorKind::Runtime) const;
  // Throws NotLowered: this call takes the CPU fallback.
  [[noreturn]] void not_lowered(const std::string& why) const;

 private:
  std::vector<Arg> args_;
  std::string op_;
  std::vector<Check> checks_;
  std::vector<ScalarCheck> scalar_checks_;
};

using LowerFn = std::vector<Value> (*)(Context&);

// How the glue prepares an op's arguments on the host before the call is
// described: the CPU kernels read these values from the data first.
enum class HostPrep : uint8_t {
  None,
  RepeatInterleave,  // repeat_interleave.Tensor: output_size = repeats.sum()
  Bincount,          // bincount: minlength = max(minlength, self.max() + 1)
};
// How an out= op's out tensor is sized before the lowering writes it
// (OutDirect lowerings, keyed by the out= name): from values the lowering
// takes as static arguments.
enum class OutSizing : uint8_t {
  Given,   // the out tensor has its size already (or the glue resizes it to the result)
  Arange,  // arange.start_out(start, end, step): ceil((end - start) / step)
  Eye,     // eye.out(n) / eye.m_out(n, m): [n, m]
  Space,   // linspace.out / logspace.out(start, end, steps): [steps]
};

// Facts about an op that the torch glue needs beside its lowering. Every
// op-specific rule of the glue lives here, next to the lowering, so a
// torch.compile path that reads the table keeps them too. Each trait has one
// name: the glue reads the field `x`, a table sets it with `set_x()`.
struct Traits {
  // Data-dependent result sizes: the lowering returns results padded to the
  // largest size and, last, a rank-0 i64 count; these results are narrowed to
  // it (along dim 0, or result 0 along the op's `dim` argument at position
  // `narrow_dim_arg` when given).
  std::vector<int> narrowed;
  int narrow_dim_arg = -1;
  // Values the glue reads from the data before the call (HostPrep).
  HostPrep prepare = HostPrep::None;
  // How an out= op's out tensor is sized first (OutSizing).
  OutSizing out_sizing = OutSizing::Given;
  // Advanced indexing whose bool/uint8 masks become long indices first.
  bool expand_masks = false;
  // Arguments the op updates although its schema does not mark them written.
  std::vector<int> unmarked_writes;
  // The lowering draws random numbers though the schema has no Generator.
  bool implicit_rng = false;
  // The results depend on the first argument's memory layout: the glue
  // appends a Bool, self.is_contiguous().
  bool contiguity_flag = false;
  // linalg *_ex: with check_errors=True a nonzero info (the last result)
  // raises under this API name, as ATen's composite does.
  const char* check_errors_api = nullptr;
  // The CPU kernel accepts a written tensor with internal overlap (fills,
  // reductions into out=, index_put_).
  bool overlap_allowed = false;
  // Its CPU kernel (not a TensorIterator) lets an input share some elements
  // with the written tensor.
  bool partial_overlap_allowed = false;
  // Its out= form wants an out tensor of exactly the result's dtype (CPU's
  // structured and same-dtype kernels), not just one it can be cast to
  // (TensorIterator's type-promoting ops).
  bool out_same_dtype = false;
  // Its out= form wants a bool or uint8 out tensor, checked first (any, all).
  bool out_bool_or_byte = false;
  // Its native out= kernel is no TensorIterator although it takes any out
  // dtype the result casts to: it sizes the out tensor before it checks it.
  bool out_sized_first = false;
  // Its out= form is not resized: an out of another shape than the result's
  // is refused (CPU's kernel sizes a squeezed view of it, then fails).
  bool out_fixed_shape = false;
  // The in-place op this functional op computes when its name is not this
  // one's plus "_" (normal_ -> normal_functional).
  const char* in_place = nullptr;
  // Its in-place form refuses a complex tensor with this message (abs_:
  // CPU does not write |x| into a complex tensor).
  const char* in_place_refuses_complex = nullptr;
  // The glue registers kernels of its own for this op and its in-place form
  // (copy, copy_); the lowering serves them.
  bool own_kernel = false;
  // Shape buckets (engine/bucket.h) may run it: its lowering is correct on
  // operands whose dims are bounded-dynamic, because it never turns a dim's
  // extent into a value (no mean's divisor, no iota mask, no flip) and
  // builds only ops that type dynamic dims.
  bool shape_generic = false;
  // A Scalar argument (position `fixed_arg`) whose value picks another
  // kernel on CPU (pow's exponents 2, 0.5, ...): when it equals one of
  // `fixed_values` the program holds it as a constant and its value is part
  // of the program key (a bounded set, so a changing value compiles at most
  // one program per listed value, plus one for all others, which stay
  // parameters).
  int fixed_arg = -1;
  std::vector<double> fixed_values;

  // The setters, chained in the tables: Traits().set_out_same_dtype().set_shape_generic().
  Traits& set_narrowed(std::vector<int> results, int dim_arg = -1) {
    narrowed = std::move(results);
    narrow_dim_arg = dim_arg;
    return *this;
  }
  Traits& set_prepare(HostPrep p) {
    prepare = p;
    return *this;
  }
  Traits& set_out_sizing(OutSizing s) {
    out_sizing = s;
    return *this;
  }
  Traits& set_expand_masks() {
    expand_masks = true;
    return *this;
  }
  Traits& set_unmarked_writes(std::vector<int> args) {
    unmarked_writes = std::move(args);
    return *this;
  }
  Traits& set_implicit_rng() {
    implicit_rng = true;
    return *this;
  }
  Traits& set_contiguity_flag() {
    contiguity_flag = true;
    return *this;
  }
  Traits& set_check_errors_api(const char* api) {
    check_errors_api = api;
    return *this;
  }
  Traits& set_overlap_allowed() {
    overlap_allowed = true;
    return *this;
  }
  Traits& set_partial_overlap_allowed() {
    partial_overlap_allowed = true;
    return *this;
  }
  Traits& set_out_same_dtype() {
    out_same_dtype = true;
    return *this;
  }
  Traits& set_out_bool_or_byte() {
    out_bool_or_byte = true;
    return *this;
  }
  Traits& set_out_sized_first() {
    out_sized_first = true;
    return *this;
  }
  Traits& set_out_fixed_shape() {
    out_fixed_shape = true;
    return *this;
  }
  Traits& set_in_place(const char* name) {
    in_place = name;
    return *this;
  }
  Traits& set_in_place_refuses_complex(const char* message) {
    in_place_refuses_complex = message;
    return *this;
  }
  Traits& set_own_kernel() {
    own_kernel = true;
    return *this;
  }
  Traits& set_shape_generic() {
    shape_generic = true;
    return *this;
  }
  Traits& set_fixed(int arg, std::vector<double> values) {
    fixed_arg = arg;
    fixed_values = std::move(values);
    return *this;
  }
};

struct Entry {
  const char* aten_name;  // "aten::add.Tensor": schema name and overload
  LowerFn fn;
  Traits traits = {};
};

// The table entry for an ATen op, or nullptr.
const Entry* find_entry(std::string_view aten_name);
// The lowering for an ATen op, or nullptr.
LowerFn find_lowering(std::string_view aten_name);
// All ATen names that have a lowering.
std::vector<std::string> lowered_ops();

}  // namespace torch_pjrt::lowering
