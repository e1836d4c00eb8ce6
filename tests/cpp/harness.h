// Test helpers: lower one ATen op to StableHLO text, and run a program on the
// CPU plugin with host data. No torch anywhere.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/context.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::testing {

using lowering::Arg;

struct Lowered {
  hlo::Builder builder;
  std::vector<hlo::Value> results;
  std::string text;
};

// Lowers `op` with the args `make_args` creates (it may add parameters to the
// builder). Throws if there is no lowering.
inline Lowered lower(const std::string& op, const std::function<std::vector<Arg>(hlo::Builder&)>& make_args) {
  Lowered l;
  auto fn = lowering::find_lowering(op);
  if (!fn) throw std::runtime_error("no lowering for " + op);
  lowering::Context cx(l.builder, make_args(l.builder), op);
  l.results = fn(cx);
  l.builder.set_results(l.results);
  l.text = l.builder.module_text();
  return l;
}

inline runtime::Client& client() {
  static runtime::Client* c = new runtime::Client(runtime::Plugin::load(TORCH_PJRT_TEST_PLUGIN));
  return *c;
}

// Compiles `text` and runs it with one host array per parameter; returns the
// first result as doubles (converted from its element type T).
template <typename T, typename In>
std::vector<T> run(const Lowered& l, const std::vector<std::vector<In>>& inputs, hlo::DType in_type) {
  auto exe = client().compile(l.text, 0);
  std::vector<runtime::BufferPtr> bufs;
  std::vector<PJRT_Buffer*> raw;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bufs.push_back(client().from_host(inputs[i].data(), in_type, l.builder.parameters()[i].dims(), 0));
    raw.push_back(bufs.back()->get());
  }
  auto out = exe->execute(raw);
  std::vector<T> host(l.results[0].type.numel());
  out[0]->to_host(host.data(), host.size() * sizeof(T));
  return host;
}

}  // namespace torch_pjrt::testing
