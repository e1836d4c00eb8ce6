#include "runtime/pjrt.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "pjrt_c_api.h"

namespace torch_pjrt::runtime {
namespace {

#define TORCH_PJRT_SAME_CODE(name)                                                                \
  static_assert(static_cast<int>(ElementType::name) == static_cast<int>(PJRT_Buffer_Type_##name), \
                "runtime::ElementType::" #name " must match pjrt_c_api.h");
TORCH_PJRT_SAME_CODE(PRED)
TORCH_PJRT_SAME_CODE(S8)
TORCH_PJRT_SAME_CODE(S16)
TORCH_PJRT_SAME_CODE(S32)
TORCH_PJRT_SAME_CODE(S64)
TORCH_PJRT_SAME_CODE(U8)
TORCH_PJRT_SAME_CODE(U16)
TORCH_PJRT_SAME_CODE(U32)
TORCH_PJRT_SAME_CODE(U64)
TORCH_PJRT_SAME_CODE(F16)
TORCH_PJRT_SAME_CODE(F32)
TORCH_PJRT_SAME_CODE(F64)
TORCH_PJRT_SAME_CODE(BF16)
TORCH_PJRT_SAME_CODE(C64)
TORCH_PJRT_SAME_CODE(C128)
#undef TORCH_PJRT_SAME_CODE

template <typename T>
T args_of() {
  T a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof(T);
  return a;
}

// The one place where a PJRT_Error becomes a C++ exception.
void check(const PJRT_Api* api, PJRT_Error* err, std::string_view what) {
  if (!err) return;
  auto msg = args_of<PJRT_Error_Message_Args>();
  msg.error = err;
  api->PJRT_Error_Message(&msg);
  auto code = args_of<PJRT_Error_GetCode_Args>();
  code.error = err;
  api->PJRT_Error_GetCode(&code);
  std::string text = std::string(what) + ": " + std::string(msg.message, msg.message_size);
  auto destroy = args_of<PJRT_Error_Destroy_Args>();
  destroy.error = err;
  api->PJRT_Error_Destroy(&destroy);
  throw Error(static_cast<int>(code.code), text);
}

// Minimal protobuf writer for the few fields of CompileOptionsProto we set.
void varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
void field_varint(std::string& s, int field, uint64_t v) {
  varint(s, static_cast<uint64_t>(field) << 3);
  varint(s, v);
}
void field_bytes(std::string& s, int field, const std::string& bytes) {
  varint(s, (static_cast<uint64_t>(field) << 3) | 2);
  varint(s, bytes.size());
  s += bytes;
}

}  // namespace

std::string compile_options_proto(int device_id) {
  std::string computation_device;  // DeviceAssignmentProto.ComputationDevice
  field_varint(computation_device, 1, device_id);
  std::string assignment;  // DeviceAssignmentProto
  field_varint(assignment, 1, 1);
  field_varint(assignment, 2, 1);
  field_bytes(assignment, 3, computation_device);
  std::string build;          // ExecutableBuildOptionsProto
  field_varint(build, 4, 1);  // num_replicas
  field_varint(build, 5, 1);  // num_partitions
  field_bytes(build, 9, assignment);
  std::string options;  // CompileOptionsProto
  field_bytes(options, 3, build);
  return options;
}

// ---------------------------------------------------------------- Plugin

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  // XLA's plugins log at INFO on stderr (the CPU plugin: each client option
  // it takes) and read their level once, as they load. Unless the user chose
  // a level, load them at WARNING.
  const bool quiet = !std::getenv("TF_CPP_MIN_LOG_LEVEL");
  if (quiet) setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (quiet) unsetenv("TF_CPP_MIN_LOG_LEVEL");
  if (!handle) throw Error(-1, "cannot load PJRT plugin '" + path + "': " + dlerror());
  using GetApi = const PJRT_Api* (*)();
  auto get = reinterpret_cast<GetApi>(dlsym(handle, "GetPjrtApi"));
  if (!get) {
    dlclose(handle);
    throw Error(-1, "'" + path + "' is not a PJRT plugin (no GetPjrtApi symbol)");
  }
  const PJRT_Api* api = get();
  if (!api || api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    dlclose(handle);
    throw Error(-1, "PJRT plugin '" + path + "' implements C API major version " +
                        std::to_string(api ? api->pjrt_api_version.major_version : -1) + ", expected " +
                        std::to_string(PJRT_API_MAJOR));
  }
  auto init = args_of<PJRT_Plugin_Initialize_Args>();
  check(api, api->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
  std::shared_ptr<Plugin> p(new Plugin());
  p->handle_ = handle;
  p->api_ = api;
  p->path_ = path;
  return p;
}

// The plugin stays loaded for the life of the process: XLA's libraries
// register global state that must not be unmapped.
Plugin::~Plugin() = default;

std::string Plugin::api_version() const {
  return std::to_string(api_->pjrt_api_version.major_version) + "." +
         std::to_string(api_->pjrt_api_version.minor_version);
}

// ---------------------------------------------------------------- Event

Event::~Event() {
  if (!event_) return;
  auto a = args_of<PJRT_Event_Destroy_Args>();
  a.event = event_;
  plugin_->api()->PJRT_Event_Destroy(&a);
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    std::swap(plugin_, o.plugin_);
    std::swap(event_, o.event_);
  }
  return *this;  // o destroys what this held
}

const PJRT_Api* Event::plugin_api() const { return plugin_ ? plugin_->api() : nullptr; }

bool Event::is_ready() const {
  if (!event_) return true;
  auto a = args_of<PJRT_Event_IsReady_Args>();
  a.event = event_;
  check(plugin_->api(), plugin_->api()->PJRT_Event_IsReady(&a), "PJRT_Event_IsReady");
  return a.is_ready;
}

namespace {
struct ReadyCallback {
  Event event;  // destroyed after the callback ran
  std::function<void(const std::string&)> done;
};
void call_ready(PJRT_Error* error, void* arg) {
  auto* cb = static_cast<ReadyCallback*>(arg);
  const PJRT_Api* api = cb->event.plugin_api();
  std::string message;
  if (error) {
    auto msg = args_of<PJRT_Error_Message_Args>();
    msg.error = error;
    api->PJRT_Error_Message(&msg);
    message.assign(msg.message, msg.message_size);
    if (message.empty()) message = "device work failed";
    auto destroy = args_of<PJRT_Error_Destroy_Args>();
    destroy.error = error;
    api->PJRT_Error_Destroy(&destroy);
  }
  cb->done(message);
  delete cb;
}
}  // namespace

void Event::when_ready(Event event, std::function<void(const std::string& error)> done) {
  if (!event.event_) {
    done("");
    return;
  }
  const PJRT_Api* api = event.plugin_->api();
  PJRT_Event* raw = event.event_;
  auto* cb = new ReadyCallback{std::move(event), std::move(done)};
  auto a = args_of<PJRT_Event_OnReady_Args>();
  a.event = raw;
  a.callback = &call_ready;
  a.user_arg = cb;
  PJRT_Error* err = api->PJRT_Event_OnReady(&a);
  if (err) {
    delete cb;
    check(api, err, "PJRT_Event_OnReady");
  }
}

void Event::wait() {
  if (!event_) return;
  auto a = args_of<PJRT_Event_Await_Args>();
  a.event = event_;
  check(plugin_->api(), plugin_->api()->PJRT_Event_Await(&a), "PJRT_Event_Await");
  auto e = args_of<PJRT_Event_Error_Args>();
  e.event = event_;
  check(plugin_->api(), plugin_->api()->PJRT_Event_Error(&e), "device computation failed");
}

// ---------------------------------------------------------------- Buffer

DeviceMemory& DeviceMemory::get() {
  static DeviceMemory* memory = new DeviceMemory();  // never destroyed: buffers may outlive static destructors
  return *memory;
}

void DeviceMemory::add(int device, int64_t delta) {
  if (device < 0 || device >= kMaxDevices || delta == 0) return;
  int64_t now = current_[device].fetch_add(delta) + delta;
  int64_t peak = peak_[device].load();
  while (now > peak && !peak_[device].compare_exchange_weak(peak, now)) {
  }
}

int64_t DeviceMemory::current(int device) const {
  return device < 0 || device >= kMaxDevices ? 0 : current_[device].load();
}
int64_t DeviceMemory::peak(int device) const { return device < 0 || device >= kMaxDevices ? 0 : peak_[device].load(); }
void DeviceMemory::reset_peak(int device) {
  if (device >= 0 && device < kMaxDevices) peak_[device].store(current_[device].load());
}

namespace {
int64_t element_bytes(ElementType t) {
  switch (t) {
    case ElementType::PRED:
    case ElementType::S8:
    case ElementType::U8:
      return 1;
    case ElementType::S16:
    case ElementType::U16:
    case ElementType::F16:
    case ElementType::BF16:
      return 2;
    case ElementType::S32:
    case ElementType::U32:
    case ElementType::F32:
      return 4;
    case ElementType::S64:
    case ElementType::U64:
    case ElementType::F64:
    case ElementType::C64:
      return 8;
    case ElementType::C128:
      return 16;
  }
  return 0;
}
}  // namespace

Buffer::Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer, int device, int64_t bytes)
    : plugin_(std::move(plugin)), buffer_(buffer), device_(device), counted_(bytes) {
  if (counted_ < 0) {
    try {
      counted_ = on_device_bytes();
    } catch (const Error&) {
      counted_ = 0;  // a plugin that cannot tell: the buffer is not counted
    }
  }
  DeviceMemory::get().add(device_, counted_);
}

Buffer::~Buffer() {
  DeviceMemory::get().add(device_, -counted_);
  if (!buffer_) return;
  auto a = args_of<PJRT_Buffer_Destroy_Args>();
  a.buffer = buffer_;
  plugin_->api()->PJRT_Buffer_Destroy(&a);
}

void Buffer::to_host(void* dst, size_t nbytes) const {
  if (nbytes == 0) return;  // nothing to copy; a null dst would ask PJRT for the size instead
  auto a = args_of<PJRT_Buffer_ToHostBuffer_Args>();
  a.src = buffer_;
  a.dst = dst;
  a.dst_size = nbytes;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  Event(plugin_, a.event).wait();
}

Event Buffer::to_host_async(void* dst, size_t nbytes) const {
  if (nbytes == 0) return Event();
  auto a = args_of<PJRT_Buffer_ToHostBuffer_Args>();
  a.src = buffer_;
  a.dst = dst;
  a.dst_size = nbytes;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  return Event(plugin_, a.event);
}

void Buffer::wait_ready() const { ready_event().wait(); }

Event Buffer::ready_event() const {
  auto a = args_of<PJRT_Buffer_ReadyEvent_Args>();
  a.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ReadyEvent(&a), "PJRT_Buffer_ReadyEvent");
  return Event(plugin_, a.event);
}

void Buffer::on_ready(std::function<void(const std::string& error)> done) const {
  Event::when_ready(ready_event(), std::move(done));
}

int64_t Buffer::on_device_bytes() const {
  auto a = args_of<PJRT_Buffer_OnDeviceSizeInBytes_Args>();
  a.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_OnDeviceSizeInBytes(&a), "PJRT_Buffer_OnDeviceSizeInBytes");
  return static_cast<int64_t>(a.on_device_size_in_bytes);
}

void* Buffer::host_pointer() const {
  auto a = args_of<PJRT_Buffer_UnsafePointer_Args>();
  a.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_UnsafePointer(&a), "PJRT_Buffer_UnsafePointer");
  return reinterpret_cast<void*>(a.buffer_pointer);
}

// ---------------------------------------------------------------- Executable

Executable::~Executable() {
  auto a = args_of<PJRT_LoadedExecutable_Destroy_Args>();
  a.executable = exe_;
  plugin_->api()->PJRT_LoadedExecutable_Destroy(&a);
}

Executable::Unloaded::~Unloaded() {
  auto destroy = args_of<PJRT_Executable_Destroy_Args>();
  destroy.executable = exe;
  api->PJRT_Executable_Destroy(&destroy);
}

Executable::Unloaded Executable::unloaded() const {
  const PJRT_Api* api = plugin_->api();
  auto get = args_of<PJRT_LoadedExecutable_GetExecutable_Args>();
  get.loaded_executable = exe_;
  check(api, api->PJRT_LoadedExecutable_GetExecutable(&get), "PJRT_LoadedExecutable_GetExecutable");
  return Unloaded(api, get.executable);
}

std::string Executable::serialize() const {
  const PJRT_Api* api = plugin_->api();
  Unloaded view = unloaded();
  auto a = args_of<PJRT_Executable_Serialize_Args>();
  a.executable = view.exe;
  check(api, api->PJRT_Executable_Serialize(&a), "PJRT_Executable_Serialize");
  std::string bytes(a.serialized_bytes, a.serialized_bytes_size);
  if (a.serialized_executable_deleter) a.serialized_executable_deleter(a.serialized_executable);
  return bytes;
}

std::vector<BufferPtr> Executable::execute(const std::vector<PJRT_Buffer*>& args, const std::vector<int64_t>& keep,
                                           const std::vector<Buffer*>& donated) const {
  std::vector<BufferPtr> outs;
  execute(args, keep, donated, outs);
  return outs;
}

void Executable::execute(const std::vector<PJRT_Buffer*>& args, const std::vector<int64_t>& keep,
                         const std::vector<Buffer*>& donated, std::vector<BufferPtr>& result) const {
  auto options = args_of<PJRT_ExecuteOptions>();
  options.non_donatable_input_indices = keep.data();
  options.num_non_donatable_input_indices = keep.size();
  constexpr int kInline = 8;
  PJRT_Buffer* inline_outputs[kInline] = {};
  std::vector<PJRT_Buffer*> many;
  if (num_outputs_ > kInline) many.assign(num_outputs_, nullptr);
  PJRT_Buffer** out_list = num_outputs_ > kInline ? many.data() : inline_outputs;
  PJRT_Buffer* const* arg_list = args.data();
  auto a = args_of<PJRT_LoadedExecutable_Execute_Args>();
  a.executable = exe_;
  a.options = &options;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = args.size();
  a.output_lists = &out_list;
  for (Buffer* d : donated) d->donated_ = true;
  try {
    check(plugin_->api(), plugin_->api()->PJRT_LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");
  } catch (const Error&) {
    for (Buffer* d : donated) d->donated_ = false;
    throw;
  }
  for (Buffer* d : donated) {
    DeviceMemory::get().add(d->device_, -d->counted_);
    d->counted_ = 0;
  }
  result.clear();
  result.reserve(num_outputs_);
  std::call_once(sized_, [&] {
    for (int i = 0; i < num_outputs_; ++i) {
      Buffer probe(plugin_, out_list[i], device_, 0);
      int64_t n = 0;
      try {
        n = probe.on_device_bytes();
      } catch (const Error&) {
      }
      probe.buffer_ = nullptr;  // not owned by the probe
      output_bytes_.push_back(n);
    }
  });
  for (int i = 0; i < num_outputs_; ++i)
    result.push_back(std::make_shared<Buffer>(plugin_, out_list[i], device_, output_bytes_[i]));
}

// ---------------------------------------------------------------- Client

Client::Client(std::shared_ptr<Plugin> plugin, int cpu_devices) : plugin_(std::move(plugin)) {
  create(0);
  if (cpu_devices > 0 && platform_name_ == "cpu" && device_count() != cpu_devices) {
    auto destroy = args_of<PJRT_Client_Destroy_Args>();
    destroy.client = client_;
    plugin_->api()->PJRT_Client_Destroy(&destroy);
    client_ = nullptr;
    create(cpu_devices);
  }
}

void Client::create(int cpu_devices) {
  const PJRT_Api* api = plugin_->api();
  auto create = args_of<PJRT_Client_Create_Args>();
  static const char kDeviceCount[] = "cpu_device_count";
  PJRT_NamedValue device_count{};
  if (cpu_devices > 0) {
    device_count.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    device_count.name = kDeviceCount;
    device_count.name_size = sizeof(kDeviceCount) - 1;
    device_count.type = PJRT_NamedValue_kInt64;
    device_count.int64_value = cpu_devices;
    device_count.value_size = 1;
    create.create_options = &device_count;
    create.num_options = 1;
  }
  check(api, api->PJRT_Client_Create(&create), "PJRT_Client_Create");
  client_ = create.client;

  auto devices = args_of<PJRT_Client_AddressableDevices_Args>();
  devices.client = client_;
  check(api, api->PJRT_Client_AddressableDevices(&devices), "PJRT_Client_AddressableDevices");
  devices_.assign(devices.addressable_devices, devices.addressable_devices + devices.num_addressable_devices);

  auto name = args_of<PJRT_Client_PlatformName_Args>();
  name.client = client_;
  check(api, api->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
  platform_name_.assign(name.platform_name, name.platform_name_size);
  auto version = args_of<PJRT_Client_PlatformVersion_Args>();
  version.client = client_;
  check(api, api->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
  platform_version_.assign(version.platform_version, version.platform_version_size);
}

Client::~Client() {
  auto a = args_of<PJRT_Client_Destroy_Args>();
  a.client = client_;
  plugin_->api()->PJRT_Client_Destroy(&a);
}

namespace {
PJRT_DeviceDescription* description(const PJRT_Api* api, PJRT_Device* device) {
  auto a = args_of<PJRT_Device_GetDescription_Args>();
  a.device = device;
  check(api, api->PJRT_Device_GetDescription(&a), "PJRT_Device_GetDescription");
  return a.device_description;
}
}  // namespace

std::string Client::device_string(int device) const {
  const PJRT_Api* api = plugin_->api();
  auto a = args_of<PJRT_DeviceDescription_ToString_Args>();
  a.device_description = description(api, devices_.at(device));
  check(api, api->PJRT_DeviceDescription_ToString(&a), "PJRT_DeviceDescription_ToString");
  return std::string(a.to_string, a.to_string_size);
}

namespace {

// The device's memory statistics, or false when the plugin keeps none (many
// do, the CPU one included): not an error.
bool memory_stats(const PJRT_Api* api, PJRT_Device* device, PJRT_Device_MemoryStats_Args& a) {
  a = args_of<PJRT_Device_MemoryStats_Args>();
  a.device = device;
  PJRT_Error* err = api->PJRT_Device_MemoryStats(&a);
  if (!err) return true;
  auto d = args_of<PJRT_Error_Destroy_Args>();
  d.error = err;
  api->PJRT_Error_Destroy(&d);
  return false;
}

}  // namespace

int64_t Client::device_bytes_in_use(int device) const {
  PJRT_Device_MemoryStats_Args a;
  return memory_stats(plugin_->api(), devices_.at(device), a) ? a.bytes_in_use : -1;
}

int64_t Client::device_bytes_limit(int device) const {
  PJRT_Device_MemoryStats_Args a;
  if (memory_stats(plugin_->api(), devices_.at(device), a) && a.bytes_limit_is_set) return a.bytes_limit;
  if (platform_name_ != "cpu") return -1;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : -1;
}

Client::Upload Client::upload(const void* data, ElementType type, const std::vector<int64_t>& dims, int device,
                              int semantics, bool counted) const {
  const PJRT_Api* api = plugin_->api();
  auto a = args_of<PJRT_Client_BufferFromHostBuffer_Args>();
  a.client = client_;
  a.data = data;
  a.type = static_cast<PJRT_Buffer_Type>(type);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  a.device = devices_.at(device);
  check(api, api->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
  int64_t bytes = counted ? element_bytes(type) : 0;
  for (int64_t d : dims) bytes *= d;
  return {std::make_shared<Buffer>(plugin_, a.buffer, device, bytes), Event(plugin_, a.done_with_host_buffer)};
}

BufferPtr Client::from_host(const void* data, ElementType type, const std::vector<int64_t>& dims, int device,
                            bool counted) const {
  Upload up = upload(data, type, dims, device, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, counted);
  up.read.wait();
  return std::move(up.buffer);
}

Client::Upload Client::from_host_async(const void* data, ElementType type, const std::vector<int64_t>& dims,
                                       int device) const {
  return upload(data, type, dims, device, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, true);
}

BufferPtr Client::lend_host(void* data, ElementType type, const std::vector<int64_t>& dims, int device,
                            std::function<void()> released) const {
  Upload up = upload(data, type, dims, device, PJRT_HostBufferSemantics_kMutableZeroCopy, true);
  Event::when_ready(std::move(up.read), [released = std::move(released)](const std::string&) { released(); });
  return std::move(up.buffer);
}

std::string Client::options_for(int device) const {
  const PJRT_Api* api = plugin_->api();
  auto id = args_of<PJRT_DeviceDescription_Id_Args>();
  id.device_description = description(api, devices_.at(device));
  check(api, api->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
  return compile_options_proto(id.id);
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir, int device) const {
  const PJRT_Api* api = plugin_->api();
  std::string options = options_for(device);
  auto program = args_of<PJRT_Program>();
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  static const char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  auto a = args_of<PJRT_Client_Compile_Args>();
  a.client = client_;
  a.program = &program;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  check(api, api->PJRT_Client_Compile(&a), "compiling StableHLO");
  return wrap(a.executable, device);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes, int device) const {
  const PJRT_Api* api = plugin_->api();
  std::string options = options_for(device);
  auto a = args_of<PJRT_Executable_DeserializeAndLoad_Args>();
  a.client = client_;
  a.serialized_executable = bytes.data();
  a.serialized_executable_size = bytes.size();
  a.overridden_serialized_compile_options = options.data();
  a.overridden_serialized_compile_options_size = options.size();
  check(api, api->PJRT_Executable_DeserializeAndLoad(&a), "PJRT_Executable_DeserializeAndLoad");
  return wrap(a.loaded_executable, device);
}

std::unique_ptr<Executable> Client::wrap(PJRT_LoadedExecutable* loaded, int device) const {
  // From here on `exe` owns the handle, also if the output count fails.
  auto exe = std::make_unique<Executable>(plugin_, loaded, 0, device);
  Executable::Unloaded view = exe->unloaded();
  auto n = args_of<PJRT_Executable_NumOutputs_Args>();
  n.executable = view.exe;
  check(plugin_->api(), plugin_->api()->PJRT_Executable_NumOutputs(&n), "PJRT_Executable_NumOutputs");
  exe->num_outputs_ = static_cast<int>(n.num_outputs);
  return exe;
}

}  // namespace torch_pjrt::runtime
