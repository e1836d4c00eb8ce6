// Registration: every ATen schema whose functional form has a lowering gets
// the lowered kernel, as its functional, in-place, out= or direct out= variant.
#include <deque>
#include <unordered_map>

#include "torch/ops.h"

namespace torch_pjrt::glue {
namespace {

bool has_list_out(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite() && a.type()->kind() == c10::TypeKind::ListType)
      return true;
  return false;
}

bool is_out_variant(const c10::FunctionSchema& s) {
  for (const auto& a : s.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite()) return true;
  return false;
}

// The functional op an out= schema computes: same base name, same non-out
// argument names and types, no mutation.
std::string functional_of_out(const c10::FunctionSchema& out,
                              const std::unordered_map<std::string, std::vector<c10::OperatorHandle>>& by_base) {
  std::vector<const c10::Argument*> inputs;
  for (const auto& a : out.arguments())
    if (!(a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite())) inputs.push_back(&a);
  auto it = by_base.find(out.name());
  if (it == by_base.end()) return "";
  for (const auto& h : it->second) {
    const auto& s = h.schema();
    if (s.is_mutable() || s.arguments().size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; i < inputs.size(); ++i)
      same &= s.arguments()[i].name() == inputs[i]->name() && *s.arguments()[i].type() == *inputs[i]->type();
    if (same) return full_name(s.operator_name());
  }
  return "";
}

torch::Library* g_library = nullptr;
std::vector<std::string> g_registered;

}  // namespace

// ---------------------------------------------------------------- registration

// The functional overload an in-place schema derives from: `foo_.X` ->
// `foo.X`, unless another overload of `foo` takes the same argument types in
// the same order (pow_.Scalar takes (Tensor, Scalar): pow.Tensor_Scalar, not
// pow.Scalar, which is (Scalar, Tensor)).
std::string functional_of_inplace(const c10::FunctionSchema& schema,
                                  const std::unordered_map<std::string, std::vector<c10::OperatorHandle>>& by_base) {
  std::string base = schema.name().substr(0, schema.name().size() - 1);
  std::string by_name = base + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  auto same_types = [&](const c10::FunctionSchema& f) {
    const auto &a = schema.arguments(), &b = f.arguments();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].type()->str() != b[i].type()->str()) return false;
    return true;
  };
  auto it = by_base.find(base);
  if (it == by_base.end()) return by_name;
  for (const auto& h : it->second)
    if (full_name(h.schema().operator_name()) == by_name && same_types(h.schema())) return by_name;
  for (const auto& h : it->second)
    if (same_types(h.schema()) && lowering::find_lowering(full_name(h.schema().operator_name())))
      return full_name(h.schema().operator_name());
  return by_name;
}

std::vector<std::string> register_lowered_ops() {
  if (g_library) return g_registered;
  g_library = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  std::unordered_map<std::string, std::vector<c10::OperatorHandle>> by_base;
  std::vector<c10::OperatorHandle> handles;
  for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
    if (n.name.rfind("aten::", 0) != 0) continue;
    auto h = c10::Dispatcher::singleton().findOp(n);
    if (!h) continue;
    by_base[n.name].push_back(*h);
    handles.push_back(*h);
  }
  // In-place ops whose functional sibling is not simply the name without "_".
  std::unordered_map<std::string, std::string> in_place_of;
  for (const std::string& op : lowering::lowered_ops())
    if (const char* in_place = lowering::find_entry(op)->traits.in_place) in_place_of[in_place] = op;
  for (const auto& h : handles) {
    const auto& schema = h.schema();
    std::string name = full_name(schema.operator_name());
    if (h.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) continue;
    Variant variant = Variant::Functional;
    std::string functional = name;
    if (is_out_variant(schema)) {
      variant = lowering::find_lowering(name) ? Variant::OutDirect : Variant::Out;
      if (variant == Variant::Out) functional = functional_of_out(schema, by_base);
      // out= tensor lists (`_fused_adamw.out`) take the CPU fallback.
      if (variant == Variant::Out && has_list_out(schema)) continue;
    } else if (schema.name().back() == '_' && schema.is_mutable()) {
      variant = Variant::InPlace;
      auto alias = in_place_of.find(name);
      functional = alias != in_place_of.end() ? alias->second : functional_of_inplace(schema, by_base);
    }
    if (functional.empty()) continue;
    const lowering::Entry* entry = lowering::find_entry(functional);
    if (!entry || (entry->traits.own_kernel && variant != Variant::Out)) continue;  // copy_, copy: kernels below
    static std::deque<std::string> impl_names;  // torch keeps pointers to registration names
    impl_names.push_back(name.substr(6));
    g_library->impl(impl_names.back().c_str(), lowered_kernel(*entry, variant, schema));
    g_registered.push_back(name);
  }
  return g_registered;
}

}  // namespace torch_pjrt::glue
