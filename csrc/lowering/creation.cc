// Factory ops that fill a preallocated output (their out= form is the one
// backends implement). The output tensor arrives as the last argument.
#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

using V = std::vector<Value>;

// arange.start_out(start, end, step, *, out): out[i] = start + i * step. The
// composite op sized `out` on the host, so only start and step matter here.
V arange_start_out(Context& cx) {
  Value out = cx.tensor(3);
  DType t = out.dtype();
  DType compute = hlo::is_floating(t) ? DType::F64 : DType::I64;
  Value i = cx.b.iota(TensorType{compute, out.dims()}, 0);
  Value r = cx.b.add(cx.as(0, compute), cx.b.mul(i, cx.as(2, compute)));
  return {cx.b.convert(r, t)};
}

}  // namespace

std::vector<Entry> creation_lowerings() {
  return {
      {"aten::arange.start_out", arange_start_out},
  };
}

}  // namespace torch_pjrt::lowering
