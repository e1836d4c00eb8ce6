// The `tpu` device as torch sees it: dtype mapping, allocators (device and
// pinned host), device guard with streams and events, hooks, generators and
// error translation.
#include <ATen/EmptyTensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/record_function.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/Exceptions.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "engine/trace.h"
#include "torch/common.h"

namespace torch_pjrt::glue {

using hlo::DType;

// ---------------------------------------------------------------- dtypes

hlo::DType to_hlo(at::ScalarType t) {
  switch (t) {
    case at::kBool:
      return DType::Bool;
    case at::kByte:
      return DType::U8;
    case at::kChar:
      return DType::I8;
    case at::kShort:
      return DType::I16;
    case at::kInt:
      return DType::I32;
    case at::kLong:
      return DType::I64;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    case at::kFloat:
      return DType::F32;
    case at::kDouble:
      return DType::F64;
    case at::kComplexFloat:
      return DType::C64;
    case at::kComplexDouble:
      return DType::C128;
    case at::kUInt16:
      return DType::U16;
    case at::kUInt32:
      return DType::U32;
    case at::kUInt64:
      return DType::U64;
    default:
      break;
  }
  TORCH_CHECK_TYPE(false, "torch_pjrt: dtype ", t, " is not supported on the tpu device");
}

at::ScalarType to_torch(hlo::DType t) {
  static const at::ScalarType table[] = {at::kBool,   at::kByte,   at::kChar,         at::kShort,         at::kInt,
                                         at::kLong,   at::kHalf,   at::kBFloat16,     at::kFloat,         at::kDouble,
                                         at::kUInt32, at::kUInt64, at::kComplexFloat, at::kComplexDouble, at::kUInt16};
  static_assert(sizeof(table) / sizeof(table[0]) == hlo::kNumDTypes, "one torch dtype per hlo::DType");
  return table[static_cast<int>(t)];
}

void view_into(const at::Tensor& t, engine::ViewSpec& v) {
  v.dtype = to_hlo(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  // A size-1 dim's stride reaches no element, and PyTorch leaves any value
  // there (x[:, -1:] of a growing x keeps x's row stride): 1 keeps it out
  // of program keys and shape histories.
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] == 1) v.strides[d] = 1;
  v.offset = t.storage_offset();
}

engine::ViewSpec view_of(const at::Tensor& t) {
  engine::ViewSpec v;
  view_into(t, v);
  return v;
}

// ---------------------------------------------------------------- errors

std::string (*python_location)() = nullptr;
struct _object* zero_division_error = nullptr;

namespace {

// CPU raises RuntimeError("ZeroDivisionError") for an integer division by
// zero; the tpu error is a subclass of both RuntimeError and Python's
// ZeroDivisionError, so either `except` catches it.
[[noreturn]] void raise_zero_division(const std::string& msg) {
  TORCH_CHECK(zero_division_error, msg);
  pybind11::gil_scoped_acquire gil;
  PyErr_SetString(zero_division_error, msg.c_str());
  python_error e;
  e.persist();
  throw e;
}

// The one place an error kind becomes a torch (and so Python) exception.
[[noreturn]] void raise_kind(lowering::ErrorKind kind, const std::string& msg) {
  using K = lowering::ErrorKind;
  switch (kind) {
    case K::Index:
      TORCH_CHECK_INDEX(false, msg);
    case K::Value:
      TORCH_CHECK_VALUE(false, msg);
    case K::Type:
      TORCH_CHECK_TYPE(false, msg);
    case K::NotImplemented:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    case K::ZeroDivision:
      raise_zero_division(msg);
    case K::Runtime:
      break;
  }
  TORCH_CHECK(false, msg);
}

}  // namespace

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// "tpu:0 out of memory in aten::fill.Scalar: tried to allocate 1048576.00 MiB;
// 12.00 MiB allocated (peak 20.00 MiB)", as torch.cuda words it.
std::string out_of_memory_message(const std::string& op) {
  c10::DeviceIndex d = current_device();
  std::string msg = "tpu:" + std::to_string(d) + " out of memory in " + op;
  if (int64_t asked = Engine::last_request_bytes()) msg += ": tried to allocate " + mib(asked);
  if (Engine::started()) {
    Engine& e = Engine::get();
    msg += "; " + mib(e.allocated_bytes(d)) + " allocated (peak " + mib(e.peak_allocated_bytes(d)) + ")";
  }
  return msg;
}

}  // namespace

void rethrow_as_torch(const std::string& op) {
  std::string where;
  if (Engine::available() && Engine::get().mode() == engine::Mode::Debug && python_location) {  // the failing op's line
    std::string loc = python_location();
    if (!loc.empty()) where = " (at " + loc + ")";
  }
  try {
    throw;
  } catch (const python_error&) {
    throw;
  } catch (const engine::CheckError& e) {
    // A fused region's check names its own line already.
    const bool located = std::string(e.what()).find(" (at ") != std::string::npos;
    raise_kind(e.kind, located ? std::string(e.what()) : e.what() + where);
  } catch (const std::out_of_range& e) {
    TORCH_CHECK_INDEX(false, e.what(), where);
  } catch (const runtime::Error& e) {
    if (e.out_of_memory()) TORCH_CHECK_WITH(OutOfMemoryError, false, out_of_memory_message(op), ": ", e.what(), where);
    TORCH_CHECK(false, e.what(), where);
  } catch (const lowering::LoweringError& e) {
    raise_kind(e.kind, e.what() + where);
  } catch (const std::bad_alloc& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, out_of_memory_message(op), where);
  } catch (const hlo::BuildError& e) {
    TORCH_CHECK(false, op, ": ", e.what(), where);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, op, ": ", e.what(), where);
  }
}

// ---------------------------------------------------------------- devices

namespace {
thread_local c10::DeviceIndex t_device = 0;

c10::DeviceIndex device_count_or_zero() {
  return Engine::available() ? static_cast<c10::DeviceIndex>(Engine::get().device_count()) : 0;
}

void check_device(c10::DeviceIndex d) {
  if (!Engine::available()) TORCH_CHECK(false, "tpu device unavailable: ", Engine::load_error());
  TORCH_CHECK(d >= 0 && d < Engine::get().device_count(), "Invalid device tpu:", static_cast<int>(d),
              ", the tpu platform has ", Engine::get().device_count(), " devices");
}
}  // namespace

c10::DeviceIndex current_device() { return t_device; }

void set_current_device(c10::DeviceIndex d) {
  check_device(d);
  t_device = d;
}

// ---------------------------------------------------------------- allocator

namespace {

// Storages get unique, never-dereferenced addresses so that torch's aliasing
// checks on data pointers stay meaningful. The memory itself is the slot's
// PJRT buffer.
std::atomic<uintptr_t> g_next_address{uintptr_t{1} << 44};

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex d = current_device();
    check_device(d);
    auto* slot = new Slot(d, static_cast<int64_t>(n));
    uintptr_t size = (std::max<size_t>(n, 1) + 255) & ~uintptr_t{255};
    void* address = reinterpret_cast<void*>(g_next_address.fetch_add(size));
    return {address, slot, &Engine::release_slot, c10::Device(c10::DeviceType::PrivateUse1, d)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied by address; use Tensor.copy_");
  }
  bool initialized() override { return Engine::available(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    c10::CachingDeviceAllocator::DeviceStats s;
    auto& e = Engine::get();
    for (auto* stat : {&s.allocated_bytes[0], &s.active_bytes[0], &s.reserved_bytes[0], &s.requested_bytes[0]}) {
      stat->current = e.allocated_bytes(d);
      stat->peak = e.peak_allocated_bytes(d);
    }
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex d) override { Engine::get().reset_peak(d); }
};

TpuAllocator g_allocator;

// Pinned host memory (engine/host_memory.h): CPU tensors whose blocks
// non-blocking copies may read or write after the copy call returned. The
// DataPtr's context holds the block; a copy in flight holds it too.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    engine::HostBlockPtr block;
    try {
      block = engine::HostMemory::allocate(n);
    } catch (const std::bad_alloc&) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "cannot allocate ", n, " bytes of pinned host memory");
    }
    void* data = block->data;
    return {data, new engine::HostBlockPtr(std::move(block)), &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }

 private:
  static void release(void* ctx) { delete static_cast<engine::HostBlockPtr*>(ctx); }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &g_allocator; }

void follow_matmul_precision() {
  static std::atomic<int> last{static_cast<int>(at::Float32MatmulPrecision::HIGHEST)};
  const auto p = at::globalContext().float32MatmulPrecision();
  if (static_cast<int>(p) == last.load(std::memory_order_relaxed)) return;
  last.store(static_cast<int>(p), std::memory_order_relaxed);
  Engine::get().set_matmul_precision(p == at::Float32MatmulPrecision::HIGHEST ? hlo::Precision::Highest
                                     : p == at::Float32MatmulPrecision::HIGH  ? hlo::Precision::High
                                                                              : hlo::Precision::Default);
}

at::Tensor new_tensor(at::IntArrayRef sizes, at::ScalarType dtype, c10::DeviceIndex device, runtime::BufferPtr buffer,
                      int64_t capacity) {
  c10::DeviceIndex saved = t_device;
  t_device = device;
  at::Tensor t = at::detail::empty_generic(capacity ? at::IntArrayRef{capacity} : sizes, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype, std::nullopt);
  t_device = saved;
  // A bucketed result: a contiguous tensor at the start of a larger storage.
  if (capacity) t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  if (buffer) Engine::get().adopt(*slot_of(t), std::move(buffer), to_hlo(dtype));
  return t;
}

// ---------------------------------------------------------------- guard

namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(kType, t_device);
    if (d.index() >= 0) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, t_device); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_device = d.index();
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
    int i = d.index() < 0 ? t_device : d.index();
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

// ---------------------------------------------------------------- generator

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

// ---------------------------------------------------------------- hooks

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count_or_zero() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count_or_zero(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? current_device() : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage(storage, static_cast<int64_t>(newsize), hlo::DType::U8);
  }
  bool isPinnedPtr(const void* p) const override { return engine::HostMemory::is_pinned(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  bool hasCompatibleShallowCopyType(c10::DispatchKeySet, c10::DispatchKeySet) const { return true; }
};

// Engine spans (engine/trace.h) become torch.profiler ranges.
bool trace_active() { return at::hasCallbacks(); }
void* trace_begin(const std::string& name) {
  auto* range = new at::RecordFunction(at::RecordScope::USER_SCOPE);
  if (!range->isActive()) {
    delete range;
    return nullptr;
  }
  range->before(name);
  return range;
}
void trace_end(void* range) { delete static_cast<at::RecordFunction*>(range); }
const engine::TraceSink g_trace_sink{&trace_active, &trace_begin, &trace_end};

struct Registration {
  Registration() {
    engine::set_trace_sink(&g_trace_sink);
    c10::SetAllocator(c10::DeviceType::PrivateUse1, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  }
} g_registration;

}  // namespace

}  // namespace torch_pjrt::glue
