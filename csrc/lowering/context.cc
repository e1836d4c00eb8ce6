// Context: the argument accessors and errors of context.h, and the scalar
// overflow test the engine runs on the host.
#include "lowering/context.h"

namespace torch_pjrt::lowering {

void Context::fail(const std::string& why, ErrorKind kind) const { throw LoweringError(op_ + ": " + why, kind); }
void Context::not_lowered(const std::string& why) const { throw NotLowered(op_ + ": " + why); }

const Arg& Context::arg(size_t i) const {
  if (i >= args_.size()) fail("missing argument " + std::to_string(i));
  return args_[i];
}

Value Context::tensor(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Tensor && a.kind != Arg::Kind::Scalar)
    fail("argument " + std::to_string(i) + " is not a tensor");
  return a.value;
}

const std::vector<Value>& Context::tensors(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::TensorList) fail("argument " + std::to_string(i) + " is not a tensor list");
  return a.values;
}

int64_t Context::integer(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Int && a.kind != Arg::Kind::Bool) fail("argument " + std::to_string(i) + " is not an int");
  return a.i;
}

const std::vector<int64_t>& Context::ints(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Ints) fail("argument " + std::to_string(i) + " is not an int list");
  return a.ints;
}

bool Context::flag(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Bool) fail("argument " + std::to_string(i) + " is not a bool");
  return a.i != 0;
}

DType Context::dtype(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::DType) fail("argument " + std::to_string(i) + " is not a dtype");
  return static_cast<DType>(a.i);
}

const std::string& Context::str(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::String) fail("argument " + std::to_string(i) + " is not a string");
  return a.s;
}

Value Context::rng(size_t i) const {
  const Arg& a = arg(i);
  if (a.kind != Arg::Kind::Rng) fail("argument " + std::to_string(i) + " is not a generator");
  return a.value;
}

DType Context::result_type(std::initializer_list<size_t> idx) const {
  hlo::ResultType rt;
  for (size_t i : idx) {
    const Arg& a = arg(i);
    if (a.kind == Arg::Kind::Scalar)
      rt.add(a.value.dtype(), hlo::ResultType::Kind::Wrapped);
    else if (a.kind == Arg::Kind::Tensor)
      rt.add(a.value.dtype(),
             a.value.rank() == 0 ? hlo::ResultType::Kind::ZeroDim : hlo::ResultType::Kind::Dimensioned);
  }
  try {
    return rt.result();
  } catch (const hlo::UnsupportedDType& e) {
    fail(std::string("dtype ") + e.what() + " is not supported on the tpu device", ErrorKind::NotImplemented);
  }
}

int64_t Context::dim(int64_t d, int64_t rank) const {
  int64_t r = rank == 0 ? 1 : rank;  // a scalar accepts dim 0 and -1
  if (d < -r || d >= r)
    throw std::out_of_range(op_ + ": Dimension out of range (expected to be in range of [" + std::to_string(-r) + ", " +
                            std::to_string(r - 1) + "], but got " + std::to_string(d) + ")");
  return d < 0 ? d + r : d;
}

Dims Context::dims(const std::vector<int64_t>& ds, int64_t rank) const {
  Dims out;
  for (int64_t d : ds) out.push_back(dim(d, rank));
  return out;
}

}  // namespace torch_pjrt::lowering
