// The tpu generator (seed + offset, which reach programs as runtime
// parameters), each device's default generator and the draw of one random op.
#include <ATen/EmptyTensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/GeneratorImpl.h>

#include <cstring>
#include <mutex>

#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {

// Philox-style generator state: a seed and an offset that advances with each
// random op. Both reach programs as runtime parameters.
struct TpuGenerator final : public c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, d),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    set_current_seed(c10::detail::getNonDeterministicRandom());
    return seed_;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  // The state is a CPU byte tensor, as for CPU and CUDA generators.
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK_TYPE(state.layout() == c10::kStrided && state.device().is_cpu() && state.dtype() == at::kByte,
                     "RNG state must be a torch.ByteTensor");
    TORCH_CHECK(state.numel() == 16, "tpu RNG state must be a 16-byte uint8 tensor");
    TORCH_CHECK(state.has_storage() && state.storage().data(), "RNG state has no data (a fake or meta tensor)");
    uint64_t p[2];
    std::memcpy(p, state.data(), sizeof p);
    seed_ = p[0];
    offset_ = p[1];
  }
  // Allocated directly on the CPU, below the dispatcher: under a
  // FakeTensorMode (tracing, export, checkpointing) an at::empty would be a
  // fake tensor with no memory to write.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::detail::empty_cpu({16}, at::kByte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    uint64_t p[2] = {seed_, offset_};
    std::memcpy(t.data_ptr(), p, sizeof p);
    return t.getIntrusivePtr();
  }
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

std::once_flag g_generators_once;
std::vector<at::Generator> g_generators;

}  // namespace

at::Generator new_generator(c10::DeviceIndex d) {
  return at::make_generator<TpuGenerator>(d < 0 ? current_device() : d);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  std::call_once(g_generators_once, [] {
    for (int i = 0; i < Engine::get().device_count(); ++i) g_generators.push_back(at::make_generator<TpuGenerator>(i));
  });
  if (device < 0) device = current_device();
  check_device(device);
  return g_generators[device];
}

void manual_seed_all(uint64_t seed) {
  for (int i = 0; i < Engine::get().device_count(); ++i) {
    at::Generator g = default_generator(i);
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_current_seed(seed);
  }
}

void next_rng(const std::optional<at::Generator>& gen, c10::DeviceIndex device, uint64_t out[2]) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  auto* impl = g.get<TpuGenerator>();
  TORCH_CHECK(impl, "expected a tpu generator");
  out[0] = impl->seed_;
  out[1] = impl->offset_;
  impl->offset_ += uint64_t{1} << 32;  // each op draws at most 2^32 counters
}

}  // namespace torch_pjrt::glue
