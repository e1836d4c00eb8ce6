// Test helpers: lower one ATen op to StableHLO text, and run a program on the
// CPU plugin with host data. No torch anywhere.
//
// Three ways to run a program, all on device 0 of one process-wide client:
//   run_all(l, buffers) / read<T>(buffer, n)  device buffers in, buffers out;
//   run<T>(l, inputs, dtype)                  host arrays of one dtype in, the first result out;
//   exec(l, bytes)                            raw host bytes in (dtype and dims from each
//                                             parameter), every result out as raw bytes;
// and run_op(prog, op, args) for a program whose parameters carry their host
// data (Prog), with the lowering's runtime checks as extra results. At the
// end, one-dtype shorthands for each: buffers::f32(values, dims) and
// hosts::f32(dims, values), and the checks several files share.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
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

// The message of the LoweringError that lowering `op` raises ("" if none).
inline std::string lowering_error(const std::string& op,
                                  const std::function<std::vector<Arg>(hlo::Builder&)>& make_args) {
  try {
    lower(op, make_args);
  } catch (const lowering::LoweringError& e) {
    return e.what();
  }
  return "";
}

// A tensor / rank-0 scalar argument backed by a new parameter of `b`.
inline Arg tensor(hlo::Builder& b, hlo::DType t, hlo::Dims dims) {
  return Arg::tensor(b.parameter({t, std::move(dims)}));
}
inline Arg scalar(hlo::Builder& b, hlo::DType t) { return Arg::scalar(b.parameter({t, {}})); }

inline runtime::Client& client() {
  static runtime::Client* c = new runtime::Client(runtime::Plugin::load(TORCH_PJRT_TEST_PLUGIN));
  return *c;
}

// ---- device buffers in, buffers out

// Uploads dense row-major host data of dtype `t` to device 0.
inline runtime::BufferPtr upload(const void* data, hlo::DType t, const hlo::Dims& dims) {
  return client().from_host(data, static_cast<runtime::ElementType>(hlo::pjrt_code(t)), dims, 0);
}
template <typename T>
runtime::BufferPtr upload(const std::vector<T>& v, hlo::DType t, const hlo::Dims& dims) {
  return upload(v.data(), t, dims);
}

// Compiles `text` and runs it once with `inputs`, one per parameter; returns
// every result buffer.
inline std::vector<runtime::BufferPtr> run_all(const std::string& text, const std::vector<runtime::BufferPtr>& inputs) {
  auto exe = client().compile(text, 0);
  std::vector<PJRT_Buffer*> raw;
  for (const auto& b : inputs) raw.push_back(b->get());
  return exe->execute(raw);
}
inline std::vector<runtime::BufferPtr> run_all(const Lowered& l, const std::vector<runtime::BufferPtr>& inputs) {
  return run_all(l.text, inputs);
}

// A buffer of `n` elements of T (its whole size) copied to the host.
template <typename T>
std::vector<T> read(const runtime::BufferPtr& b, size_t n) {
  std::vector<T> host(n);
  b->to_host(host.data(), n * sizeof(T));
  return host;
}

// Compiles `l` and runs it with one host array per parameter, all of dtype
// `in_type`; returns the first result as T (its element type).
template <typename T, typename In>
std::vector<T> run(const Lowered& l, const std::vector<std::vector<In>>& inputs, hlo::DType in_type) {
  std::vector<runtime::BufferPtr> bufs;
  for (size_t i = 0; i < inputs.size(); ++i)
    bufs.push_back(upload(inputs[i], in_type, l.builder.parameters()[i].dims()));
  return read<T>(run_all(l, bufs)[0], l.results[0].type.numel());
}

// ---- raw bytes in, raw bytes out

using Bytes = std::vector<uint8_t>;

template <typename T>
Bytes bytes(const std::vector<T>& v) {
  Bytes out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> values(const Bytes& b) {
  std::vector<T> out(b.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

// Compiles `text` and runs it with one raw host array per parameter in
// `params` (its dtype and dims come from the parameter); returns each of
// `results` as raw bytes.
inline std::vector<Bytes> exec(const std::string& text, const std::vector<hlo::Value>& params,
                               const std::vector<hlo::Value>& results, const std::vector<Bytes>& inputs) {
  EXPECT_EQ(inputs.size(), params.size()) << "one input per parameter";
  std::vector<runtime::BufferPtr> bufs;
  for (size_t i = 0; i < inputs.size() && i < params.size(); ++i) {
    const auto& p = params[i];
    EXPECT_EQ(inputs[i].size(), static_cast<size_t>(p.type.numel() * hlo::byte_size(p.dtype()))) << "input " << i;
    bufs.push_back(upload(inputs[i].data(), p.dtype(), p.dims()));
  }
  auto outs = run_all(text, bufs);
  std::vector<Bytes> host;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    host.emplace_back(r.type.numel() * hlo::byte_size(r.dtype()));
    if (!host.back().empty()) outs[i]->to_host(host.back().data(), host.back().size());
  }
  return host;
}
inline std::vector<Bytes> exec(const Lowered& l, const std::vector<Bytes>& inputs) {
  return exec(l.text, l.builder.parameters(), l.results, inputs);
}

// ---- programs whose parameters carry their host data, run with their checks

// One host array fed to a program parameter.
struct Host {
  hlo::DType dtype;
  hlo::Dims dims;
  Bytes bytes;
};
template <typename T>
Host host(hlo::DType t, hlo::Dims dims, const std::vector<T>& v) {
  return {t, std::move(dims), testing::bytes(v)};
}

// A program under construction: parameters are declared with their host data.
struct Prog {
  hlo::Builder b;
  std::vector<Host> inputs;
  hlo::Value in(Host h) {
    inputs.push_back(h);
    return b.parameter({h.dtype, h.dims});
  }
  Arg t(Host h) { return Arg::tensor(in(std::move(h))); }
  Arg scalar(double v) { return Arg::scalar(in(host(hlo::DType::F64, {}, std::vector<double>{v}))); }
  Arg ints(std::vector<int64_t> v) { return Arg::integers(std::move(v)); }
};

// One element of dtype `t` at `p` as a double.
inline double to_double(const uint8_t* p, hlo::DType t) {
  using hlo::DType;
  switch (t) {
    case DType::Bool:
    case DType::U8:
      return *p;
    case DType::I8:
      return *reinterpret_cast<const int8_t*>(p);
    case DType::I16:
      return *reinterpret_cast<const int16_t*>(p);
    case DType::I32:
      return *reinterpret_cast<const int32_t*>(p);
    case DType::I64:
      return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::F32:
      return *reinterpret_cast<const float*>(p);
    case DType::F64:
      return *reinterpret_cast<const double*>(p);
    case DType::BF16: {
      uint32_t u = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p)) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    default:
      throw std::runtime_error("unsupported output dtype in test");
  }
}

struct Output {
  hlo::DType dtype;
  hlo::Dims dims;
  std::vector<double> v;
};

struct Result {
  std::vector<Output> outs;  // the op's results
  std::vector<bool> checks;  // its runtime checks: true = failed
  std::vector<std::string> messages;
  std::string text;
};

// Lowers `op` with `args`, returns its results plus its checks as extra
// program results, compiled and run on the CPU plugin with `p`'s inputs.
inline Result run_op(Prog& p, const std::string& op, std::vector<Arg> args) {
  auto fn = lowering::find_lowering(op);
  if (!fn) throw std::runtime_error("no lowering for " + op);
  lowering::Context cx(p.b, std::move(args), op);
  std::vector<hlo::Value> outs = fn(cx);
  std::vector<hlo::Value> all = outs;
  for (const auto& c : cx.checks()) all.push_back(c.failed);
  p.b.set_results(all);
  Result r;
  r.text = p.b.module_text();
  std::vector<Bytes> inputs;
  for (const Host& h : p.inputs) inputs.push_back(h.bytes);
  std::vector<Bytes> res = exec(r.text, p.b.parameters(), all, inputs);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& type = all[i].type;
    size_t size = hlo::byte_size(type.dtype);
    std::vector<double> v;
    for (size_t k = 0; k < res[i].size(); k += size) v.push_back(to_double(&res[i][k], type.dtype));
    if (i < outs.size()) {
      r.outs.push_back({type.dtype, type.dims, v});
    } else {
      r.checks.push_back(v.at(0) != 0);
      r.messages.push_back(cx.checks()[i - outs.size()].message);
    }
  }
  return r;
}

inline bool any_failed(const Result& r) {
  for (bool c : r.checks)
    if (c) return true;
  return false;
}

// `o` has this dtype and shape and these values (to 1e-5; NaN matches NaN).
inline void expect_values(const Output& o, hlo::DType dtype, const hlo::Dims& dims, const std::vector<double>& want) {
  EXPECT_EQ(o.dtype, dtype);
  EXPECT_EQ(o.dims, dims);
  ASSERT_EQ(o.v.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(o.v[i])) << "at " << i;
    else
      EXPECT_NEAR(o.v[i], want[i], 1e-5) << "at " << i;
  }
}

// ---- shorthands the lowering tests share

// Device buffers of one dtype, for run_all.
namespace buffers {
inline runtime::BufferPtr f32(const std::vector<float>& v, const hlo::Dims& dims) {
  return upload(v, hlo::DType::F32, dims);
}
inline runtime::BufferPtr f64(double v) { return upload(std::vector<double>{v}, hlo::DType::F64, {}); }
inline runtime::BufferPtr i64(const std::vector<int64_t>& v, const hlo::Dims& dims) {
  return upload(v, hlo::DType::I64, dims);
}
}  // namespace buffers

// Host arrays of one dtype, for Prog parameters.
namespace hosts {
inline Host f32(hlo::Dims d, const std::vector<float>& v) { return host(hlo::DType::F32, std::move(d), v); }
inline Host f64(hlo::Dims d, const std::vector<double>& v) { return host(hlo::DType::F64, std::move(d), v); }
inline Host i64(hlo::Dims d, const std::vector<int64_t>& v) { return host(hlo::DType::I64, std::move(d), v); }
inline Host i32(hlo::Dims d, const std::vector<int32_t>& v) { return host(hlo::DType::I32, std::move(d), v); }
inline Host bools(hlo::Dims d, const std::vector<uint8_t>& v) { return host(hlo::DType::Bool, std::move(d), v); }
// bfloat16 from floats that bfloat16 holds exactly (the top 16 bits of each).
inline Host bf16(hlo::Dims d, const std::vector<float>& v) {
  std::vector<uint16_t> bits;
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits.push_back(static_cast<uint16_t>(u >> 16));
  }
  return host(hlo::DType::BF16, std::move(d), bits);
}
// 0, 1, 2, ... as float32 of shape d.
inline Host arange(hlo::Dims d) {
  std::vector<float> v(hlo::TensorType{hlo::DType::F32, d}.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(std::move(d), v);
}
}  // namespace hosts

// Float32 tensor arguments of these shapes, each a new parameter of `b`.
inline std::vector<Arg> f32_args(hlo::Builder& b, const std::vector<hlo::Dims>& shapes) {
  std::vector<Arg> args;
  for (const auto& s : shapes) args.push_back(tensor(b, hlo::DType::F32, s));
  return args;
}

// `got` equals `want` element by element, to `tol`.
inline void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// How often `what` occurs in `text` (ops of one kind in a module's text).
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace torch_pjrt::testing
