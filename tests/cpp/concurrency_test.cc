// Several threads at once through runtime::Client and engine::Engine. The
// races these tests look for show under ThreadSanitizer (configure a build
// directory with -DCMAKE_CXX_FLAGS=-fsanitize=thread
// -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread and run it with the
// suppressions in tsan_suppressions.txt beside this file); without it they
// check that concurrent compiles, executions and engine calls give the right
// numbers.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "harness.h"

namespace torch_pjrt {
namespace {

using hlo::DType;
using testing::Arg;

constexpr int kThreads = 4;

// Releases all waiting threads at once, so their first calls overlap.
class StartLine {
 public:
  explicit StartLine(int n) : left_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> l(mu_);
    if (--left_ == 0) cv_.notify_all();
    cv_.wait(l, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// Runs body(t) on kThreads threads started together; returns how many
// iterations across all threads saw a wrong value or an exception.
template <typename F>
int run_threads(F body) {
  StartLine start(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        failures += body(t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        failures += 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  return failures.load();
}

testing::Lowered lower_add(int64_t n) {
  return testing::lower("aten::add.Tensor", [n](hlo::Builder& b) {
    return std::vector<Arg>{testing::tensor(b, DType::F32, {n}), testing::tensor(b, DType::F32, {n}),
                            testing::scalar(b, DType::F64)};
  });
}

// Each thread lowers, compiles and runs its own programs (two shapes per
// thread, on two devices), and all threads run one shared executable.
TEST(Concurrency, ClientCompilesAndExecutesFromSeveralThreads) {
  auto shared = testing::client().compile(lower_add(8).text, 0);
  int failures = run_threads([&](int t) {
    int bad = 0;
    for (int it = 0; it < 6; ++it) {
      int64_t n = 8 + (it % 2) * (t + 1);
      int device = it % 2;
      auto l = lower_add(n);
      auto exe = testing::client().compile(l.text, device);
      std::vector<float> x(n), y(n);
      for (int64_t i = 0; i < n; ++i) x[i] = float(t * 100 + i), y[i] = float(it);
      double alpha = 2;
      auto bx = testing::client().from_host(x.data(), runtime::ElementType::F32, {n}, device);
      auto by = testing::client().from_host(y.data(), runtime::ElementType::F32, {n}, device);
      auto ba = testing::client().from_host(&alpha, runtime::ElementType::F64, {}, device);
      auto out = testing::read<float>(exe->execute({bx->get(), by->get(), ba->get()})[0], n);
      for (int64_t i = 0; i < n; ++i) bad += out[i] != x[i] + 2 * y[i];
      if (n == 8) {  // device 0, as `shared`
        auto r = testing::read<float>(shared->execute({bx->get(), by->get(), ba->get()})[0], n);
        for (int64_t i = 0; i < n; ++i) bad += r[i] != x[i] + 2 * y[i];
      }
    }
    return bad;
  });
  EXPECT_EQ(failures, 0);
}

engine::ViewSpec contiguous(int64_t n) { return engine::ViewSpec{DType::F32, {n}, {1}, 0}; }

engine::CallArg tensor_arg(engine::Slot& s, int64_t n) {
  engine::CallArg a;
  a.kind = engine::CallArg::Kind::Tensor;
  a.tensor = {&s, contiguous(n)};
  return a;
}

engine::CallArg scalar_arg(double v) {
  engine::CallArg a;
  a.kind = engine::CallArg::Kind::Scalar;
  a.scalar_dtype = DType::F64;
  std::memcpy(a.scalar_bytes, &v, sizeof v);
  return a;
}

// The engine through its torch-free API, as the glue drives it: each thread
// owns its storages (torch serialises the users of one storage), while the
// plugin load, the op table, the compile cache, the scalar cache, the
// in-flight list and the metrics are shared. Every thread's first call is
// Engine::get(), all at once; then each runs add.Tensor (fresh result) and
// add_.Tensor (written into its first argument) on three shapes, so threads
// miss and hit the same cache keys at the same time, in strict mode and
// then in debug mode.
TEST(Concurrency, EngineRunsOpsFromSeveralThreads) {
  engine::Engine::configure(TORCH_PJRT_TEST_PLUGIN);
  static engine::OpDef add("aten::add.Tensor", lowering::find_lowering("aten::add.Tensor"));
  std::once_flag registered;
  // Other tests of this binary may have run ops first.
  const bool started = engine::Engine::started();
  const size_t cached_before = started ? engine::Engine::get().cache_size() : 0;
  engine::Metrics before = started ? engine::Engine::get().metrics() : engine::Metrics{};
  const int64_t allocated_before = started ? engine::Engine::get().allocated_bytes(0) : 0;
  for (engine::Mode mode : {engine::Mode::Strict, engine::Mode::Debug}) {
    if (mode != engine::Mode::Strict) engine::Engine::get().set_mode(mode);  // the first round starts the engine
    int failures = run_threads([&](int t) {
      auto& e = engine::Engine::get();
      std::call_once(registered, [&] { e.register_op(&add); });
      int bad = 0;
      for (int it = 0; it < 6; ++it) {
        int64_t n = 4 + it % 3;
        double alpha = t + it % 2;
        std::vector<float> x(n), y(n), want(n), out(n);
        for (int64_t i = 0; i < n; ++i) {
          x[i] = float(t * 10 + i);
          y[i] = float(it - i);
          want[i] = float(x[i] + alpha * y[i]);
        }
        engine::Slot a(0, n * 4), b(0, n * 4);
        e.upload(a, x.data(), DType::F32);
        e.upload(b, y.data(), DType::F32);
        engine::OpCall call;
        call.op = &add;
        call.args = {tensor_arg(a, n), tensor_arg(b, n), scalar_arg(alpha)};
        engine::CallResult fresh = e.run(call);
        e.read_result(fresh.buffers.at(0), out.data(), n * 4, add.name);
        bad += out != want;

        call.targets = {{&a, contiguous(n)}};  // a.add_(b, alpha=alpha)
        e.run(call);
        e.download(a, out.data());
        bad += out != want;

        e.metrics();
        e.cache_size();
      }
      return bad;
    });
    EXPECT_EQ(failures, 0);
  }
  auto& e = engine::Engine::get();
  e.set_mode(engine::Mode::Strict);
  EXPECT_EQ(e.cache_size() - cached_before, 6u);  // three shapes, fresh and in place
  engine::Metrics m = e.metrics();
  EXPECT_EQ(m.executions - before.executions, 2 * 2 * kThreads * 6);
  EXPECT_EQ(m.op_calls["aten::add.Tensor"] - before.op_calls["aten::add.Tensor"], 2 * 2 * kThreads * 6);
  // Threads that miss the same key at once wait for one compile.
  EXPECT_EQ(m.compiles - before.compiles, 6);
  // Every slot is gone (the engine's cached scalars are not tensor memory).
  EXPECT_EQ(e.allocated_bytes(0) - allocated_before, 0);
}

}  // namespace
}  // namespace torch_pjrt
