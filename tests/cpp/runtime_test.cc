// Compiles and runs real programs on the CPU PJRT plugin.
#include <gtest/gtest.h>

#include "hlo/builder.h"
#include "runtime/pjrt.h"

namespace torch_pjrt {
namespace {

using hlo::DType;

runtime::Client& client() {
  static runtime::Client* c = new runtime::Client(runtime::Plugin::load(TORCH_PJRT_TEST_PLUGIN));
  return *c;
}

TEST(Runtime, AddsOnDevice) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {4}});
  auto y = b.parameter({DType::F32, {4}});
  b.set_results({b.add(x, y)});
  auto exe = client().compile(b.module_text(), 0);
  float a[4] = {1, 2, 3, 4}, c[4] = {10, 20, 30, 40}, out[4];
  auto ba = client().from_host(a, runtime::ElementType::F32, {4}, 0);
  auto bc = client().from_host(c, runtime::ElementType::F32, {4}, 0);
  auto r = exe->execute({ba->get(), bc->get()});
  ASSERT_EQ(r.size(), 1u);
  r[0]->to_host(out, sizeof out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], a[i] + c[i]);
}

// A default Event is complete and owns nothing; one moved into it is
// destroyed once, by its last owner.
TEST(Runtime, DefaultEventIsCompleteAndTakesAMovedEvent) {
  runtime::Event none;
  EXPECT_TRUE(none.is_ready());
  EXPECT_NO_THROW(none.wait());
  float a[2] = {1, 2};
  auto buffer = client().from_host(a, runtime::ElementType::F32, {2}, 0);
  runtime::Event held;
  held = buffer->ready_event();
  held.wait();
  EXPECT_TRUE(held.is_ready());
}

TEST(Runtime, SerializedExecutableLoadsBackAndRuns) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {4}});
  b.set_results({b.mul(x, x)});
  auto exe = client().compile(b.module_text(), 1);
  std::string bytes = exe->serialize();
  ASSERT_GT(bytes.size(), 0u);
  auto loaded = client().deserialize(bytes, 1);
  EXPECT_EQ(loaded->num_outputs(), 1);
  float a[4] = {1, -2, 3, 0.5f}, out[4];
  auto ba = client().from_host(a, runtime::ElementType::F32, {4}, 1);
  auto r = loaded->execute({ba->get()});
  r[0]->to_host(out, sizeof out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], a[i] * a[i]);
}

TEST(Runtime, DamagedSerializedExecutableRaises) {
  EXPECT_THROW(client().deserialize("not an executable", 0), runtime::Error);
}

TEST(Runtime, OffersSeveralDevicesAndRunsOnEach) {
  ASSERT_GE(client().device_count(), 2);
  hlo::Builder b;
  auto x = b.parameter({DType::I64, {3}});
  b.set_results({b.mul(x, x)});
  auto exe = client().compile(b.module_text(), 1);
  int64_t a[3] = {-2, 3, 5}, out[3];
  auto r = exe->execute({client().from_host(a, runtime::ElementType::S64, {3}, 1)->get()});
  r[0]->to_host(out, sizeof out);
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[2], 25);
}

TEST(Runtime, CpuDeviceCountIsAClientOption) {
  runtime::Client two(runtime::Plugin::load(TORCH_PJRT_TEST_PLUGIN), 2);
  EXPECT_EQ(two.device_count(), 2);
  runtime::Client one(runtime::Plugin::load(TORCH_PJRT_TEST_PLUGIN), 1);
  EXPECT_EQ(one.device_count(), 1);
  EXPECT_EQ(client().device_count(), 4);  // 0: the plugin's default
}

TEST(Runtime, ZeroElementResultCopiesNothing) {
  hlo::Builder b;
  auto x = b.parameter({DType::F32, {0, 3}});
  b.set_results({b.add(x, x)});
  auto exe = client().compile(b.module_text(), 0);
  auto r = exe->execute({client().from_host(nullptr, runtime::ElementType::F32, {0, 3}, 0)->get()});
  r[0]->to_host(nullptr, 0);  // used to wait on the null event PJRT returns for a size query
  SUCCEED();
}

TEST(Runtime, BadProgramRaisesInsteadOfAborting) {
  EXPECT_THROW(client().compile("module { this is not mlir }", 0), runtime::Error);
}

TEST(Runtime, MissingPluginRaises) { EXPECT_THROW(runtime::Plugin::load("/nonexistent.so"), runtime::Error); }

TEST(Runtime, CompileOptionsEncodeOneReplica) {
  // executable_build_options{num_replicas:1 num_partitions:1 device_assignment{...}}
  std::string p = runtime::compile_options_proto(2);
  EXPECT_EQ(p.substr(0, 6), std::string("\x1a\x0e\x20\x01\x28\x01", 6));
}

}  // namespace
}  // namespace torch_pjrt
