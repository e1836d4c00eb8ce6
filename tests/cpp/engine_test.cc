// The engine's parts through their torch-free API: the program builder over
// sequences of calls (golden StableHLO text), signatures, keys, view offsets
// as parameters, donation, runtime checks and slot states.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness.h"

namespace torch_pjrt {
namespace {

using engine::CallArg;
using engine::OpCall;
using engine::OpDef;
using engine::Slot;
using engine::ViewSpec;
using hlo::DType;

const OpDef& op(const char* name) {
  static std::vector<std::unique_ptr<OpDef>> defs;
  for (const auto& d : defs)
    if (d->name == name) return *d;
  defs.push_back(std::make_unique<OpDef>(name, lowering::find_lowering(name)));
  return *defs.back();
}

ViewSpec view(hlo::Dims sizes, hlo::Dims strides, int64_t offset, DType t = DType::F32) {
  return ViewSpec{t, std::move(sizes), std::move(strides), offset};
}

CallArg tensor(Slot& s, ViewSpec v) {
  CallArg a;
  a.kind = CallArg::Kind::Tensor;
  a.tensor = {&s, std::move(v)};
  return a;
}

CallArg scalar(double v) {
  CallArg a;
  a.kind = CallArg::Kind::Scalar;
  a.scalar_dtype = DType::F64;
  std::memcpy(a.scalar_bytes, &v, sizeof v);
  return a;
}

// x.add_(y, alpha=alpha) on whole 1-D f32 storages.
OpCall add_(Slot& x, Slot& y, double alpha, int64_t n) {
  OpCall c;
  c.op = &op("aten::add.Tensor");
  c.args = {tensor(x, view({n}, {1}, 0)), tensor(y, view({n}, {1}, 0)), scalar(alpha)};
  c.targets = {{&x, view({n}, {1}, 0)}};
  return c;
}

engine::Engine& eng() {
  engine::Engine::configure(TORCH_PJRT_TEST_PLUGIN);
  return engine::Engine::get();
}

std::vector<float> download(Slot& s) {
  std::vector<float> v(s.nbytes / 4);
  eng().download(s, v.data());
  return v;
}

// ---------------------------------------------------------------- builder

// The builder tests' storages were never written, which a program reads as
// zeros of its own; these goldens show how written storages are read (as
// parameters), as the storages of a real program mostly are.
constexpr bool kZeroUnwritten = false;

// x[2:6].add_(y, alpha=2), then x.mul_(x): the second call reads the first
// one's write inside the program.
struct TwoCalls {
  Slot x{0, 32}, y{0, 16};
  OpCall c1, c2;
  TwoCalls() {
    c1.op = &op("aten::add.Tensor");
    c1.args = {tensor(x, view({4}, {1}, 2)), tensor(y, view({4}, {1}, 0)), scalar(2)};
    c1.targets = {{&x, view({4}, {1}, 2)}};
    c2.op = &op("aten::mul.Tensor");
    c2.args = {tensor(x, view({8}, {1}, 0)), tensor(x, view({8}, {1}, 0))};
    c2.targets = {{&x, view({8}, {1}, 0)}};
  }
};

TEST(ProgramBuilder, OneCallGolden) {
  Slot a(0, 16), b(0, 16);
  OpCall c;  // a.view(2, 2) * b.view(2, 2).t()
  c.op = &op("aten::mul.Tensor");
  c.args = {tensor(a, view({2, 2}, {2, 1}, 0)), tensor(b, view({2, 2}, {1, 2}, 0))};
  engine::ProgramBuilder pb(hlo::Precision::Default, kZeroUnwritten);
  pb.add(c);
  // a is its whole storage: no offset. b's transpose is a strided box at a
  // runtime offset (%2): one dynamic_slice, reshaped and transposed.
  EXPECT_EQ(pb.finish().module_text, R"(module @torch_pjrt {
  func.func public @main(%0: tensor<4xf32>, %2: tensor<i64>, %3: tensor<4xf32>) -> (tensor<4xf32>) {
    %1 = "stablehlo.reshape"(%0) : (tensor<4xf32>) -> tensor<2x2xf32>
    %4 = "stablehlo.dynamic_slice"(%3, %2) {slice_sizes = array<i64: 4>} : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
    %5 = "stablehlo.reshape"(%4) : (tensor<4xf32>) -> tensor<2x2x1xf32>
    %6 = "stablehlo.reshape"(%5) : (tensor<2x2x1xf32>) -> tensor<2x2xf32>
    %7 = "stablehlo.transpose"(%6) {permutation = array<i64: 1, 0>} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %8 = "stablehlo.multiply"(%1, %7) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %9 = "stablehlo.reshape"(%8) : (tensor<2x2xf32>) -> tensor<4xf32>
    "func.return"(%9) : (tensor<4xf32>) -> ()
  }
}
)");
}

TEST(ProgramBuilder, TwoCallsGolden) {
  TwoCalls t;
  engine::ProgramBuilder pb(hlo::Precision::Default, kZeroUnwritten);
  pb.add(t.c1);
  pb.add(t.c2);
  engine::Program p = pb.finish();
  // x is one parameter (%1), read at offset %0 and written at offset %9; the
  // mul reads the written value %10, and x's old buffer may be donated to
  // the one result. add's check that alpha fits float32 is made on the host.
  EXPECT_EQ(p.module_text, R"(module @torch_pjrt {
  func.func public @main(%0: tensor<i64>, %1: tensor<8xf32> {tf.aliasing_output = 0 : i32}, %3: tensor<4xf32>, %4: tensor<f64>, %9: tensor<i64>) -> (tensor<8xf32>) {
    %2 = "stablehlo.dynamic_slice"(%1, %0) {slice_sizes = array<i64: 4>} : (tensor<8xf32>, tensor<i64>) -> tensor<4xf32>
    %5 = "stablehlo.convert"(%4) : (tensor<f64>) -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<4xf32>
    %7 = "stablehlo.multiply"(%3, %6) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %8 = "stablehlo.add"(%2, %7) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %10 = "stablehlo.dynamic_update_slice"(%1, %8, %9) : (tensor<8xf32>, tensor<4xf32>, tensor<i64>) -> tensor<8xf32>
    %11 = "stablehlo.multiply"(%10, %10) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    "func.return"(%11) : (tensor<8xf32>) -> ()
  }
}
)");
  using P = engine::Signature::Param;
  const auto& sig = p.signature;
  ASSERT_EQ(sig.params.size(), 5u);
  EXPECT_EQ(sig.params[0].kind, P::Offset);
  EXPECT_EQ(sig.params[1].kind, P::Slot);
  EXPECT_EQ(sig.params[2].kind, P::Slot);
  EXPECT_EQ(sig.params[3].kind, P::Scalar);
  EXPECT_EQ(sig.params[4].kind, P::Offset);
  EXPECT_EQ(sig.params[4].index, 2);  // the third tensor reference: c1's target
  EXPECT_TRUE(sig.checks.empty());
  ASSERT_EQ(sig.scalar_checks.size(), 1u);
  EXPECT_EQ(sig.scalar_checks[0].arg, 2);
  ASSERT_EQ(sig.donations.size(), 1u);
  EXPECT_EQ(sig.donations[0], std::make_pair(1, 0));
}

TEST(ProgramBuilder, TenCallsRunAsOneProgram) {
  auto& e = eng();
  Slot x(0, 32), y(0, 32);
  std::vector<float> hx(8), hy(8);
  for (int i = 0; i < 8; ++i) hx[i] = float(i), hy[i] = float(1 + i % 3);
  e.upload(x, hx.data(), DType::F32);
  e.upload(y, hy.data(), DType::F32);
  engine::ProgramBuilder pb;
  std::vector<OpCall> calls;
  for (int k = 0; k < 10; ++k) calls.push_back(add_(x, y, k, 8));  // x += k * y
  for (const auto& c : calls) pb.add(c);
  engine::Program p = pb.finish();
  // One slot parameter per storage and one scalar per call; one result (each
  // call's check that its alpha fits float32 is made on the host).
  EXPECT_EQ(p.signature.params.size(), 12u);
  EXPECT_EQ(p.signature.outputs.size(), 1u);
  EXPECT_EQ(p.signature.scalar_checks.size(), 10u);
  // Run it with the builder's parameters bound by hand, as the engine does.
  auto exe = e.client().compile(p.module_text, 0);
  std::vector<runtime::BufferPtr> keep;
  std::vector<PJRT_Buffer*> raw;
  for (const auto& param : p.signature.params) {
    if (param.kind == engine::Signature::Param::Slot) {
      keep.push_back(e.ensure_buffer(param.index == 0 ? x : y, DType::F32));
    } else {
      double alpha;
      std::memcpy(&alpha, calls[param.call].args[param.index].scalar_bytes, 8);
      keep.push_back(e.client().from_host(&alpha, runtime::ElementType::F64, {}, 0));
    }
    raw.push_back(keep.back()->get());
  }
  auto out = testing::read<float>(exe->execute(raw)[0], 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], hx[i] + 45 * hy[i]);  // 0 + 1 + ... + 9 = 45
}

TEST(Signature, RoundTrips) {
  TwoCalls t;
  engine::ProgramBuilder pb;
  pb.add(t.c1);
  pb.add(t.c2);
  engine::Signature sig = pb.finish().signature;
  sig.checks.push_back({"index 7 is out of bounds\nfor dim 0", lowering::ErrorKind::Index});
  sig.scalar_checks.push_back({1, 3, DType::I8, "value cannot be converted to type int8_t without overflow"});
  sig.fresh_types.push_back({DType::I64, {2, 3}});
  sig.fresh_calls.push_back(1);
  sig.outputs.push_back({engine::Signature::Output::Fresh, 0});
  EXPECT_EQ(engine::Signature::deserialize(sig.serialize()), sig);
  EXPECT_THROW(engine::Signature::deserialize("sig1\nparams 2 0:0:0"), std::runtime_error);
  EXPECT_THROW(engine::Signature::deserialize("garbage"), std::runtime_error);
}

// ---------------------------------------------------------------- keys

TEST(ProgramKey, DependsOnStructureNotOnRuntimeValues) {
  auto& e = eng();
  Slot a(0, 64), b(0, 64), c(0, 64);
  auto row = [&](Slot& s, int64_t offset, double alpha) {
    OpCall call;  // s[offset:offset+4] + alpha * a[:4]
    call.op = &op("aten::add.Tensor");
    call.args = {tensor(s, view({4}, {1}, offset)), tensor(a, view({4}, {1}, 0)), scalar(alpha)};
    return call;
  };
  std::string k = e.key_of(row(b, 0, 1)).hex();
  EXPECT_EQ(k.size(), 16u);
  EXPECT_EQ(e.key_of(row(b, 8, 1)).hex(), k);    // another offset
  EXPECT_EQ(e.key_of(row(c, 4, 3.5)).hex(), k);  // another storage, scalar
  EXPECT_NE(e.key_of(row(a, 4, 1)).hex(), k);    // one storage read twice
  OpCall mul = row(b, 0, 1);
  mul.op = &op("aten::sub.Tensor");
  EXPECT_NE(e.key_of(mul).hex(), k);
  OpCall whole = row(b, 0, 1);
  whole.args[0] = tensor(b, view({16}, {1}, 0));
  whole.args[1] = tensor(c, view({16}, {1}, 0));
  EXPECT_NE(e.key_of(whole).hex(), k);
}

TEST(ProgramKey, CompilerFlagsArePartOfThePluginIdentity) {
  const char* saved = std::getenv("XLA_FLAGS");
  std::string restore = saved ? saved : "";
  unsetenv("LIBTPU_INIT_ARGS");
  unsetenv("XLA_FLAGS");
  EXPECT_EQ(engine::compiler_flags(), "");
  int64_t plain = engine::plugin_identity(testing::client());
  setenv("XLA_FLAGS", "--xla_dump_to=/tmp/d --xla_cpu_enable_fast_math=true  --xla_backend_optimization_level=1", 1);
  EXPECT_EQ(engine::compiler_flags(), "XLA_FLAGS --xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=true;");
  int64_t fast = engine::plugin_identity(testing::client());
  setenv("XLA_FLAGS", "--xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=true", 1);
  EXPECT_EQ(engine::plugin_identity(testing::client()), fast);  // order and dump flags do not matter
  setenv("XLA_FLAGS", "--xla_dump_to=/tmp/d", 1);
  EXPECT_EQ(engine::plugin_identity(testing::client()), plain);
  EXPECT_NE(fast, plain);
  if (saved)
    setenv("XLA_FLAGS", restore.c_str(), 1);
  else
    unsetenv("XLA_FLAGS");
}

TEST(ProgramKey, RefusesViewsOutsideTheirStorage) {
  auto& e = eng();
  Slot a(0, 16);
  OpCall call;
  call.op = &op("aten::neg");
  call.args = {tensor(a, view({2}, {1}, 3))};  // elements 3 and 4 of 4
  EXPECT_THROW(e.run(call), lowering::LoweringError);
  call.args = {tensor(a, view({2}, {1}, 2))};
  EXPECT_NO_THROW(e.run(call));
}

// ---------------------------------------------------------------- running

TEST(Engine, OffsetsAreParametersOneProgramForEveryRow) {
  auto& e = eng();
  Slot m(0, 8 * 4 * 4);  // an 8x4 matrix
  std::vector<float> h(32);
  for (int i = 0; i < 32; ++i) h[i] = float(i);
  e.upload(m, h.data(), DType::F32);
  int64_t before = e.metrics().compiles;
  for (int64_t i = 0; i < 8; ++i) {
    for (bool column : {false, true}) {
      if (column && i >= 4) continue;
      OpCall call;  // m[i] * 2, or m[:, i] * 2
      call.op = &op("aten::mul.Tensor");
      call.args = {tensor(m, column ? view({8}, {4}, i) : view({4}, {1}, 4 * i)), scalar(2)};
      auto r = e.run(call);
      auto got = testing::read<float>(r.buffers.at(0), column ? 8 : 4);
      for (int64_t k = 0; k < static_cast<int64_t>(got.size()); ++k)
        EXPECT_EQ(got[k], 2 * h[column ? 4 * k + i : 4 * i + k]) << i << " " << k << " " << column;
    }
  }
  EXPECT_EQ(e.metrics().compiles - before, 2);  // one for rows, one for columns

  // Writes at an offset: m[i] = m[i] + 1 for every row, one more program.
  before = e.metrics().compiles;
  for (int64_t i = 0; i < 8; ++i) {
    OpCall call;
    call.op = &op("aten::add.Tensor");
    call.args = {tensor(m, view({4}, {1}, 4 * i)), scalar(1), scalar(1)};
    call.targets = {{&m, view({4}, {1}, 4 * i)}};
    e.run(call);
  }
  EXPECT_EQ(e.metrics().compiles - before, 1);
  auto got = download(m);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], h[i] + 1);
}

// A compiled graph's calls (static_values): the views of a storage an
// earlier call of the sequence made are reached at fixed offsets (constants
// and key words, no parameter), and read as the parameter path reads them:
// strided boxes at offsets that split the storage into rows (static
// slices), one that wraps a row, a transpose and a contiguous run. A view
// of a storage from outside keeps its offset parameter.
TEST(Engine, StaticValuesFixTheOffsetsOfStoragesTheSequenceMade) {
  auto& e = eng();
  std::vector<float> h(24);
  for (int i = 0; i < 24; ++i) h[i] = float(i * i % 17);
  const std::vector<ViewSpec> views = {
      view({6, 2}, {4, 1}, 1),  // m[:, 1:3] of a 6x4 matrix
      view({6, 2}, {4, 1}, 2),  // m[:, 2:4]
      view({5, 2}, {4, 1}, 3),  // wraps rows 0..5: elements 3, 4, 7, 8, ...
      view({2, 6}, {1, 4}, 1),  // m[:, 1:3].t()
      view({5}, {1}, 7),        // a contiguous run
  };
  Slot x(0, 24 * 4);
  e.upload(x, h.data(), DType::F32);
  for (const ViewSpec& v : views) {
    for (bool fixed : {false, true}) {
      Slot m(0, 24 * 4), o(0, v.numel() * 4);
      OpCall made;  // m = x * 2 (all of m), then o = m.as_strided(v) * 3, then x.as_strided(v) * 1
      made.op = &op("aten::mul.Tensor");
      made.args = {tensor(x, view({24}, {1}, 0)), scalar(2)};
      made.targets = {{&m, view({24}, {1}, 0)}};
      OpCall read = made;
      read.args = {tensor(m, v), scalar(3)};
      hlo::Dims contiguous(v.sizes.size(), 1);
      for (size_t d = v.sizes.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * v.sizes[d];
      read.targets = {{&o, view(v.sizes, contiguous, 0)}};
      OpCall outside = read;
      outside.args = {tensor(x, v), scalar(1)};
      outside.targets = {};
      made.static_values = read.static_values = outside.static_values = fixed;
      engine::ProgramBuilder pb;
      pb.add(made);
      pb.add(read);
      pb.add(outside);
      engine::Program p = pb.finish();
      int offsets = 0;
      for (const auto& param : p.signature.params) offsets += param.kind == engine::Signature::Param::Offset;
      const int outside_offset = engine::takes_offset(engine::access_of(v, 24)) ? 1 : 0;
      EXPECT_EQ(offsets, fixed ? outside_offset : 2 * outside_offset) << hlo::dims_str(v.sizes) << " at " << v.offset;
      // o holds 6 * x at v's elements, whichever way the offsets came.
      auto exe = e.client().compile(p.module_text, 0);
      std::vector<runtime::BufferPtr> keep;
      std::vector<PJRT_Buffer*> raw;
      const std::vector<const OpCall*> calls{&made, &read, &outside};
      for (const auto& param : p.signature.params) {
        using P = engine::Signature::Param;
        if (param.kind == P::Slot) {
          keep.push_back(e.ensure_buffer(x, DType::F32));  // the only storage read from outside
        } else if (param.kind == P::Scalar) {
          keep.push_back(e.client().from_host(calls[param.call]->args[param.index].scalar_bytes,
                                              runtime::ElementType::F64, {}, 0));
        } else {
          int64_t off = v.offset;
          keep.push_back(e.client().from_host(&off, runtime::ElementType::S64, {}, 0));
        }
        raw.push_back(keep.back()->get());
      }
      auto outs = exe->execute(raw);
      ASSERT_EQ(p.signature.outputs[0].kind, engine::Signature::Output::Fresh);  // outside's result
      std::vector<float> got;
      for (size_t i = 0; i < outs.size(); ++i)
        if (p.signature.outputs[i].kind == engine::Signature::Output::SlotWrite && p.signature.outputs[i].index == 2)
          got = testing::read<float>(outs[i], v.numel());
      ASSERT_EQ(got.size(), static_cast<size_t>(v.numel()));
      int64_t k = 0;
      std::vector<int64_t> idx(v.sizes.size(), 0);
      for (; k < v.numel(); ++k) {
        int64_t at = v.offset;
        for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * v.strides[d];
        EXPECT_EQ(got[k], 6 * h[at]) << hlo::dims_str(v.sizes) << " at " << v.offset << " element " << k;
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < v.sizes[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
}

// A donating program is enqueued, not waited for: PJRT holds the donated
// buffer until the program ran, and the engine keeps it until then instead
// of destroying it at once (which would block). An add over 2^25 floats
// (128 MiB) runs for tens of milliseconds; the run returns before its
// output is ready (one try in three, against a machine that stalls this
// thread).
TEST(Engine, ADonatingProgramRunsAsynchronously) {
  auto& e = eng();
  const int64_t n = int64_t{1} << 25;
  Slot x(0, n * 4), y(0, n * 4);
  {
    std::vector<float> ones(n, 1.0f);
    e.upload(x, ones.data(), DType::F32);
    e.upload(y, ones.data(), DType::F32);
  }
  OpCall call = add_(x, y, 1, n);
  bool asynchronous = false;
  const int64_t donations = e.metrics().donations;
  for (int attempt = 0; attempt < 3 && !asynchronous; ++attempt) {
    e.sync();
    e.run(call);
    asynchronous = !x.state().buffer->ready_event().is_ready();
  }
  e.sync();
  EXPECT_TRUE(asynchronous);
  EXPECT_GT(e.metrics().donations, donations);
}

// What tpu_dist does on the CPU plugin: a collective reads and writes a
// storage's buffer in place, and the next program reads what it wrote. While
// the loan is held, an in-place op does not take the buffer by donation.
TEST(Engine, LentHostMemoryIsTheSlotsDataInPlace) {
  auto& e = eng();
  const int64_t n = 8;
  Slot x(0, n * 4), y(0, n * 4);
  std::vector<float> hx(n, 1.0f), hy(n, 2.0f);
  e.upload(x, hx.data(), DType::F32);
  e.upload(y, hy.data(), DType::F32);
  e.run(add_(x, y, 1, n));  // x = 3, still in flight: lending waits for it
  runtime::BufferPtr keep;
  auto* memory = static_cast<float*>(e.lend_host_memory(x, DType::F32, &keep));
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory[0], 3.0f);
  for (int64_t i = 0; i < n; ++i) memory[i] = static_cast<float>(i);  // the collective's result
  const int64_t donations = e.metrics().donations;
  e.run(add_(x, y, 1, n));  // x = i + 2, with the loan held
  e.sync();
  EXPECT_EQ(e.metrics().donations, donations);
  EXPECT_EQ(memory[1], 1.0f);  // the lent buffer is not the result's
  keep.reset();
  auto got = download(x);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], static_cast<float>(i) + 2.0f) << i;
  runtime::BufferPtr shared = x.state().buffer;  // another holder: nothing is lent
  EXPECT_EQ(e.lend_host_memory(x, DType::F32, &keep), nullptr);
}

TEST(Engine, RuntimeChecksRaiseAtTheSyncInStrictModeAndAtTheOpInDebug) {
  auto& e = eng();
  Slot x(0, 16), idx(0, 8);
  std::vector<float> hx{1, 2, 3, 4};
  std::vector<int64_t> hi{9};
  e.upload(x, hx.data(), DType::F32);
  e.upload(idx, hi.data(), DType::I64);
  OpCall call;  // x.index_select(0, [9])
  call.op = &op("aten::index_select");
  CallArg dim;
  dim.kind = CallArg::Kind::Int;
  dim.i = 0;
  call.args = {tensor(x, view({4}, {1}, 0)), dim, tensor(idx, view({1}, {1}, 0, DType::I64))};
  e.run(call);  // strict: queued
  EXPECT_THROW(e.sync(), engine::CheckError);
  EXPECT_NO_THROW(e.sync());  // reported once
  e.set_mode(engine::Mode::Debug);
  EXPECT_THROW(e.run(call), engine::CheckError);
  e.set_mode(engine::Mode::Strict);
  EXPECT_NO_THROW(e.sync());
}

TEST(Slot, MaterialisesOnWriteAndReservesUntilThen) {
  auto& e = eng();
  const int64_t before = e.allocated_bytes(0);
  {
    Slot s(0, 4096);
    EXPECT_FALSE(s.has_buffer());
    EXPECT_EQ(e.allocated_bytes(0) - before, 4096);  // reserved
    std::vector<float> z(1024, 0.5f);
    e.upload(s, z.data(), DType::F32);
    EXPECT_TRUE(s.has_buffer());
    EXPECT_EQ(s.state().dtype, DType::F32);
    EXPECT_EQ(e.allocated_bytes(0) - before, 4096);  // now the buffer's bytes
    // Read as another dtype: re-interpreted through the host.
    auto as_int = e.ensure_buffer(s, DType::I32);
    EXPECT_EQ(s.state().dtype, DType::I32);
    std::vector<int32_t> bits(1024);
    as_int->to_host(bits.data(), 4096);
    float f;
    std::memcpy(&f, &bits[7], 4);
    EXPECT_EQ(f, 0.5f);
  }
  EXPECT_EQ(e.allocated_bytes(0), before);
}

// ---------------------------------------------------------------- fused regions

TEST(StreamPeriod, FindsAPeriodOnceItRepeatedTwice) {
  engine::StreamPeriod p;
  std::vector<int64_t> got;
  for (uint64_t h : {1, 2, 3, 1, 2, 3, 1, 2}) got.push_back(p.push(h));
  EXPECT_EQ(got, (std::vector<int64_t>{0, 0, 0, 0, 0, 3, 3, 3}));
  p.reset();
  got.clear();
  for (uint64_t h : {9, 1, 2, 1, 2, 1, 2}) got.push_back(p.push(h));  // a prologue: the stream is not periodic
  EXPECT_EQ(got, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0}));
  p.reset();
  EXPECT_EQ(p.push(5), 0);
  EXPECT_EQ(p.push(5), 1);
}

TEST(RecentPeriod, FindsTheLoopAfterAPrologueAndFollowsABreak) {
  engine::RecentPeriod p;
  // A prologue, then a loop of 40 calls (above kMinRun): found once its last
  // two periods repeat, at the call that completes them.
  for (uint64_t h : {7, 8, 9}) EXPECT_EQ(p.push(h), 0);
  int64_t found = -1;
  for (int64_t i = 0; i < 200; ++i) {
    const int64_t got = p.push(100 + i % 40);
    if (got && found < 0) {
      found = i;
      EXPECT_EQ(p.since_found(), 0);
    }
    if (found >= 0) EXPECT_EQ(got, 40) << i;
  }
  EXPECT_EQ(p.since_found(), 200 - 1 - found);
  EXPECT_EQ(found, 79);
  // A call off the period breaks it; a new loop of 50 calls is found after
  // two of its periods.
  EXPECT_EQ(p.push(1), 0);
  found = -1;
  for (int64_t i = 0; i < 150; ++i)
    if (p.push(500 + i % 50) && found < 0) found = i;
  EXPECT_EQ(found, 99);
  // A repeated call is a period only after kMinRun repeats; two in a row are
  // not one.
  p.reset();
  EXPECT_EQ(p.push(3), 0);
  EXPECT_EQ(p.push(3), 0);
  for (int64_t i = 2; i < engine::RecentPeriod::kMinRun; ++i) EXPECT_EQ(p.push(3), 0);
  EXPECT_EQ(p.push(3), 1);
}

TEST(Region, KeysFollowStructureAndDeadStoragesNotPointers) {
  auto key_of = [](Slot& x, Slot& y, bool y_dead) {
    engine::Region r;
    r.add(add_(x, y, 2, 4), "");
    r.add(add_(y, x, 1, 4), "");
    if (y_dead) r.mark_dead(&y);
    std::string k = r.key().hex();
    EXPECT_EQ(r.slots, (std::vector<Slot*>{&x, &y}));
    r.clear();
    EXPECT_EQ(x.region_index(), -1);
    return k;
  };
  Slot a(0, 16), b(0, 16), c(0, 16), d(0, 16);
  EXPECT_EQ(key_of(a, b, false), key_of(c, d, false));
  EXPECT_NE(key_of(a, b, false), key_of(a, b, true));
}

TEST(Region, SpentCallsComeBackByPositionAcrossRegionsOfOtherLengths) {
  Slot a(0, 64), b(0, 64);
  engine::Region r;
  for (int64_t n : {4, 5, 6}) r.add(add_(a, b, 1, n), "");
  r.clear();
  OpCall first = r.recycled();  // the first region's first call, arguments in place
  ASSERT_EQ(first.args.size(), 3u);
  EXPECT_EQ(first.args[0].tensor.view.sizes, (hlo::Dims{4}));
  r.add(add_(a, b, 1, 7), "");
  r.clear();
  // A shorter region replaced only its own positions: a longer one that
  // follows finds the first region's later calls where they were.
  for (int64_t n : {7, 5, 6}) {
    OpCall c = r.recycled();
    ASSERT_EQ(c.args.size(), 3u);
    EXPECT_EQ(c.args[0].tensor.view.sizes, (hlo::Dims{n}));
  }
  EXPECT_TRUE(r.recycled().args.empty());  // past them: a new call
}

TEST(ProgramBuilder, DeadStoragesAreNotResults) {
  TwoCalls t;
  for (bool dead : {false, true}) {
    engine::ProgramBuilder pb(hlo::Precision::Default, kZeroUnwritten);
    pb.add(t.c1);
    pb.add(t.c2);
    std::vector<uint8_t> marks{static_cast<uint8_t>(dead), 0};
    engine::Program p = pb.finish(&marks);
    size_t writes = 0;
    for (const auto& o : p.signature.outputs) writes += o.kind == engine::Signature::Output::SlotWrite;
    EXPECT_EQ(writes, dead ? 0u : 1u);
    EXPECT_EQ(p.signature.donations.size(), dead ? 0u : 1u);
  }
}

TEST(ProgramBuilder, NeverWrittenStorageReadsZerosWithoutAParameter) {
  for (bool zero_unwritten : {true, false}) {
    Slot x(0, 16), out(0, 16);
    OpCall c;  // out = x + x, with x never written
    c.op = &op("aten::add.Tensor");
    c.args = {tensor(x, view({4}, {1}, 0)), tensor(x, view({4}, {1}, 0)), scalar(1)};
    c.targets = {{&out, view({4}, {1}, 0)}};
    engine::ProgramBuilder pb(hlo::Precision::Default, zero_unwritten);
    pb.add(c);
    engine::Program p = pb.finish();
    size_t slot_params = 0;
    for (const auto& q : p.signature.params) slot_params += q.kind == engine::Signature::Param::Slot;
    EXPECT_EQ(slot_params, zero_unwritten ? 0u : 1u);
    const size_t main = p.module_text.find("@main("), body = p.module_text.find('{', main);
    const std::string params = p.module_text.substr(main, body - main);
    EXPECT_EQ(params.find(": tensor<4xf32>") == std::string::npos, zero_unwritten) << params;
  }
  // Program keys tell the two apart: a storage read before its first write
  // and one read after it never share a program.
  auto key_of = [](Slot& x) {
    OpCall c;
    c.op = &op("aten::neg");
    c.args = {tensor(x, view({4}, {1}, 0))};
    c.targets = {{nullptr, {}}};
    engine::ProgramKey k;
    engine::SlotNumbering n;
    const OpCall* calls[] = {&c};
    engine::make_key(0, calls, 1, k, n);
    return k.words;
  };
  Slot fresh(0, 16), written(0, 16);
  std::vector<float> data{1, 2, 3, 4};
  eng().upload(written, data.data(), DType::F32);
  EXPECT_TRUE(fresh.never_written());
  EXPECT_FALSE(written.never_written());
  EXPECT_NE(key_of(fresh), key_of(written));
}

TEST(Engine, FusedModeRunsARegionAtTheReadAndMatchesStrict) {
  auto& e = eng();
  auto run = [&](engine::Mode mode) {
    Slot x(0, 16), y(0, 16);
    std::vector<float> hx{1, 2, 3, 4}, hy{10, 20, 30, 40};
    e.upload(x, hx.data(), DType::F32);
    e.upload(y, hy.data(), DType::F32);
    e.set_mode(mode);
    e.reset_metrics();
    for (double alpha : {2.0, 0.5, -1.0}) {
      OpCall c = add_(x, y, alpha, 4);
      c.fusable = true;
      engine::CallResult r = e.run(c);
      EXPECT_EQ(r.deferred, mode == engine::Mode::Fused);
      if (r.deferred) e.join(c, nullptr, 0, r);
    }
    EXPECT_EQ(e.metrics().executions, mode == engine::Mode::Fused ? 0 : 3);
    std::vector<float> out = download(x);
    e.set_mode(engine::Mode::Strict);
    return out;
  };
  std::vector<float> strict = run(engine::Mode::Strict);
  std::vector<float> fused = run(engine::Mode::Fused);
  EXPECT_EQ(fused, strict);
  EXPECT_EQ(fused, (std::vector<float>{16, 32, 48, 64}));
  engine::Metrics m = e.metrics();
  EXPECT_EQ(m.regions, 1);
  EXPECT_EQ(m.region_calls_max, 3);
  EXPECT_EQ(m.flush_reasons["read"], 1);
}

TEST(Metrics, DeviceSecondsCountTheUnionOfProgramRuns) {
  using std::chrono::milliseconds;
  engine::MetricsRecorder m;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  m.device_ran(t0, t0 + milliseconds(10));                     // alone: 10 ms
  m.device_ran(t0 + milliseconds(2), t0 + milliseconds(25));   // queued behind it: from its end, 15 ms
  m.device_ran(t0 + milliseconds(40), t0 + milliseconds(45));  // after an idle gap: 5 ms
  m.device_ran(t0 + milliseconds(41), t0 + milliseconds(44));  // done before the last end: nothing new
  EXPECT_NEAR(m.snapshot().device_seconds, 0.030, 1e-9);
  m.reset();
  EXPECT_EQ(m.snapshot().device_seconds, 0.0);
}

}  // namespace
}  // namespace torch_pjrt
