// The lowering table is the union of these per-family tables, one file each.
#pragma once

#include <vector>

#include "lowering/context.h"

namespace torch_pjrt::lowering {

std::vector<Entry> elementwise_lowerings();  // elementwise.cc
std::vector<Entry> reduction_lowerings();    // reduction.cc
std::vector<Entry> linalg_lowerings();       // linalg.cc
std::vector<Entry> shape_lowerings();        // shape.cc
std::vector<Entry> nn_lowerings();           // nn.cc
std::vector<Entry> random_lowerings();       // random.cc
std::vector<Entry> creation_lowerings();     // creation.cc
std::vector<Entry> optim_lowerings();        // optim.cc
std::vector<Entry> conv_lowerings();         // conv.cc
std::vector<Entry> pool_lowerings();         // pool.cc
std::vector<Entry> norm_lowerings();         // norm.cc
std::vector<Entry> embedding_bag_lowerings();  // embedding_bag.cc
std::vector<Entry> select_lowerings();         // select.cc
std::vector<Entry> pad_lowerings();          // pad.cc
std::vector<Entry> special_lowerings();      // special.cc
std::vector<Entry> fft_lowerings();            // fft.cc
std::vector<Entry> linalg_spectral_lowerings();  // linalg_spectral.cc
std::vector<Entry> sampling_lowerings();       // sampling.cc

// Shared helpers for lowerings of several families.
// Arguments i and j promoted to their common dtype (torch.result_type).
std::pair<Value, Value> promote(Context& cx, size_t i, size_t j);
// dtype for ops that compute in floating point (sqrt of an int tensor is f32).
DType float_type(DType t);
// Rank-0 constant of x's dtype.
inline Value scalar_like(Context& cx, double v, const Value& x) { return cx.b.constant(v, x.dtype()); }

}  // namespace torch_pjrt::lowering
