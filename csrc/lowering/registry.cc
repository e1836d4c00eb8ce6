// The lowering table (find_entry, lowered_ops): the union of the per-family
// tables of families.h, and the helpers it declares for several families
// (promote, infer_size, float_type).
#include <algorithm>
#include <string>
#include <unordered_map>

#include "lowering/families.h"

namespace torch_pjrt::lowering {
namespace {

const std::unordered_map<std::string, Entry>& table() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<std::string, Entry>();
    for (auto family : {
             elementwise_lowerings,
             special_lowerings,
             reduction_lowerings,
             linalg_lowerings,
             linalg_spectral_lowerings,
             fft_lowerings,
             shape_lowerings,
             pad_lowerings,
             indexing_lowerings,
             sorting_lowerings,
             data_dependent_lowerings,
             creation_lowerings,
             random_lowerings,
             activation_lowerings,
             loss_lowerings,
             distance_lowerings,
             norm_lowerings,
             conv_lowerings,
             pool_lowerings,
             sampling_lowerings,
             embedding_bag_lowerings,
             optim_lowerings,
             foreach_lowerings,
         }) {
      for (const Entry& e : family()) {
        if (!m->emplace(e.aten_name, e).second)
          throw std::logic_error(std::string("duplicate lowering ") + e.aten_name);
      }
    }
    return m;
  }();
  return *t;
}

}  // namespace

const Entry* find_entry(std::string_view aten_name) {
  auto it = table().find(std::string(aten_name));
  return it == table().end() ? nullptr : &it->second;
}

LowerFn find_lowering(std::string_view aten_name) {
  const Entry* e = find_entry(aten_name);
  return e ? e->fn : nullptr;
}

std::vector<std::string> lowered_ops() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : table()) names.push_back(name);
  return names;
}

std::pair<Value, Value> promote(Context& cx, size_t i, size_t j) {
  DType t = cx.result_type({i, j});
  return {cx.as(i, t), cx.as(j, t)};
}

Dims infer_size(const Context& cx, const Dims& a, const Dims& b) {
  size_t n = std::max(a.size(), b.size());
  Dims full(n);
  for (size_t i = 0; i < n; ++i) {  // aligned from the right
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      cx.fail("The size of tensor a (" + std::to_string(da) + ") must match the size of tensor b (" +
              std::to_string(db) + ") at non-singleton dimension " + std::to_string(n - 1 - i));
    full[n - 1 - i] = da == 1 ? db : da;
  }
  return full;
}

DType float_type(DType t) { return hlo::is_floating(t) || hlo::is_complex(t) ? t : DType::F32; }

}  // namespace torch_pjrt::lowering
