// The tpu device guard (c10::impl::DeviceGuardImplInterface): the current
// device, streams (ordering domains of the host API) and events (engine
// markers).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>

#include "torch/device.h"

namespace torch_pjrt::glue {

namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(kType, current_device());
    if (d.index() >= 0) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current_device_unchecked(d.index());
  }
  // Streams are ordering domains of the host API: every stream of a device
  // feeds its one PJRT device, which orders work by data (a program or copy
  // waits for the buffers it reads), so wait_event and wait_stream need no
  // device-side action. Stream 0 is the default; new ones get fresh ids.
  c10::Stream getStream(c10::Device d) const override { return current_stream(d); }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kType, index_of(d)));
  }
  c10::Stream getNewStream(c10::Device d, int) const override { return new_stream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return new_stream(d); }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = current_stream(s.device());
    t_stream[index_of(s.device())] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count_or_zero(); }
  // An event is an engine marker (Engine::record): a Completion of all the
  // work enqueued before it on the device, held through `*event`.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag) const override {
    TORCH_CHECK(stream.device_type() == kType, "a tpu event can only be recorded on a tpu stream");
    engine::CompletionPtr marker = Engine::get().record();
    if (*event) {
      *static_cast<engine::CompletionPtr*>(*event) = std::move(marker);
    } else {
      *event = new engine::CompletionPtr(std::move(marker));
    }
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    return !event || (*static_cast<engine::CompletionPtr*>(event))->done();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<engine::CompletionPtr*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event) (*static_cast<engine::CompletionPtr*>(event))->wait();
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    double t0 = (*static_cast<engine::CompletionPtr*>(start))->completed_at();
    double t1 = (*static_cast<engine::CompletionPtr*>(end))->completed_at();
    return (t1 - t0) * 1e3;
  }
  bool queryStream(const c10::Stream&) const override { return Engine::get().idle(); }
  void synchronizeStream(const c10::Stream&) const override { Engine::get().sync(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { Engine::get().sync(); }

 private:
  static constexpr int kMaxDevices = 64;
  static thread_local c10::StreamId t_stream[kMaxDevices];
  static int index_of(c10::Device d) {
    int i = d.index() < 0 ? current_device() : d.index();
    TORCH_CHECK(i >= 0 && i < kMaxDevices, "tpu device index out of range: ", i);
    return i;
  }
  static c10::Stream current_stream(c10::Device d) {
    int i = index_of(d);
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, i), t_stream[i]);
  }
  static c10::Stream new_stream(c10::Device d) {
    static std::atomic<c10::StreamId> next{1};
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, index_of(d)), next.fetch_add(1));
  }
};

thread_local c10::StreamId TpuGuardImpl::t_stream[TpuGuardImpl::kMaxDevices] = {};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

}  // namespace torch_pjrt::glue
