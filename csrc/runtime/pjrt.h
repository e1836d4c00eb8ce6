// PJRT runtime: one plugin, one client, its devices, buffers and executables.
//
// Every PJRT handle is owned by exactly one RAII object here. Errors coming
// back from the plugin are converted into runtime::Error in exactly one place
// (check() in pjrt.cc). Nothing in this layer knows about torch.
//
// This is the bottom layer: it includes nothing else of the core, and element
// types are PJRT's own codes (ElementType); the engine maps its dtypes to them.
//
// Thread-safety: a Client and everything made from it may be used from any
// thread; the PJRT C API guarantees that for clients, buffers and loaded
// executables. The objects here add no mutable shared state of their own
// except where a method says so.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_Buffer;
struct PJRT_Event;
struct PJRT_LoadedExecutable;
struct PJRT_Executable;

namespace torch_pjrt::runtime {

// The element type of a device array: PJRT_Buffer_Type's codes (pjrt.cc
// checks them against pjrt_c_api.h), for the types the core uses.
enum class ElementType : int32_t {
  PRED = 1,
  S8 = 2,
  S16 = 3,
  S32 = 4,
  S64 = 5,
  U8 = 6,
  U16 = 7,
  U32 = 8,
  U64 = 9,
  F16 = 10,
  F32 = 11,
  F64 = 12,
  BF16 = 13,
  C64 = 14,
  C128 = 15,
};

// A failure reported by the plugin or by loading it. `code` is the
// PJRT_Error_Code (or -1 for a failure before the plugin answered).
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }  // RESOURCE_EXHAUSTED

 private:
  int code_;
};

// A loaded plugin shared library. Owns the dlopen handle; never unloaded
// while any Client made from it is alive (Clients hold a shared_ptr).
class Plugin {
 public:
  // dlopen `path`, call GetPjrtApi, check the API major version and
  // initialise the plugin. Throws Error with a readable message on failure.
  static std::shared_ptr<Plugin> load(const std::string& path);
  ~Plugin();

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  // "0.81": the PJRT C API version the plugin implements.
  std::string api_version() const;

 private:
  Plugin() = default;
  void* handle_ = nullptr;
  const PJRT_Api* api_ = nullptr;
  std::string path_;
};

// Awaitable completion of an async plugin operation. Owns the PJRT_Event.
// An Event made with no PJRT_Event (default, or null) is complete.
class Event {
 public:
  Event() = default;
  Event(std::shared_ptr<Plugin> plugin, PJRT_Event* event) : plugin_(std::move(plugin)), event_(event) {}
  Event(Event&& o) noexcept : plugin_(std::move(o.plugin_)), event_(o.event_) { o.event_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  ~Event();
  // Blocks until done; throws Error if the operation failed.
  void wait();
  // Whether the operation has completed (successfully or not); never blocks.
  bool is_ready() const;
  const PJRT_Api* plugin_api() const;
  // Takes ownership of `event` and calls `done` once, when the operation
  // completes, with its error message ("" on success): on a plugin thread,
  // or on this one before returning if it already has. `done` must not
  // throw and must not wait for device work.
  static void when_ready(Event event, std::function<void(const std::string& error)> done);

 private:
  std::shared_ptr<Plugin> plugin_;
  PJRT_Event* event_ = nullptr;
};

// Bytes of the live device buffers of each device (every Buffer counts its
// on-device size while it lives and is not donated), and their peak since the
// last reset_peak(); engines add reservations of their own (storages not yet
// written). Process-wide; thread-safe (atomics).
class DeviceMemory {
 public:
  static DeviceMemory& get();
  void add(int device, int64_t delta);
  int64_t current(int device) const;
  int64_t peak(int device) const;
  void reset_peak(int device);
  static constexpr int kMaxDevices = 64;

 private:
  std::atomic<int64_t> current_[kMaxDevices] = {};
  std::atomic<int64_t> peak_[kMaxDevices] = {};
};

// A device array. Owns the PJRT_Buffer; the buffer may still be being
// computed when this object is made (PJRT is async) and is ready when
// ready() completes. Immutable from the host's point of view. Counts its
// bytes in DeviceMemory until it is destroyed or donated.
class Buffer {
 public:
  // `bytes`: its on-device size when the caller knows it, or -1 to ask PJRT.
  Buffer(std::shared_ptr<Plugin> plugin, PJRT_Buffer* buffer, int device, int64_t bytes = -1);
  Buffer(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* get() const { return buffer_; }
  // Copies the whole buffer into `dst` (dense, row-major), blocking until the
  // data has arrived. Throws if the computation that produced it failed.
  void to_host(void* dst, size_t nbytes) const;
  // Starts the same copy and returns at once: `dst` must stay valid, and
  // its bytes are undefined, until the returned Event completes (which
  // also reports a failed producer).
  Event to_host_async(void* dst, size_t nbytes) const;
  // Waits until the buffer's producer finished; throws its error if any.
  void wait_ready() const;
  // An event that completes when the buffer's producer finishes. It does not
  // keep the buffer alive.
  Event ready_event() const;
  // Calls `done` once the producer finishes (or failed), as Event::when_ready.
  void on_ready(std::function<void(const std::string& error)> done) const;
  int64_t on_device_bytes() const;
  // The address of the buffer's memory (PJRT_Buffer_UnsafePointer). Only
  // meaningful where device memory is host memory (the CPU plugin); the
  // caller must know the buffer is ready and that no program uses it.
  void* host_pointer() const;
  int device() const { return device_; }
  // True once the buffer was handed to a program as a donated argument (set
  // before that program is enqueued): PJRT deletes it, and a waiter that
  // still holds this object treats it as done (a later program consumed it).
  bool donated() const { return donated_.load(); }

 private:
  friend class Executable;
  std::shared_ptr<Plugin> plugin_;
  PJRT_Buffer* buffer_;
  int device_;
  int64_t counted_ = 0;  // bytes counted in DeviceMemory
  std::atomic<bool> donated_{false};
};
using BufferPtr = std::shared_ptr<Buffer>;

// A compiled program bound to one device. Owns the PJRT_LoadedExecutable.
class Executable {
 public:
  Executable(std::shared_ptr<Plugin> plugin, PJRT_LoadedExecutable* exe, int num_outputs, int device)
      : plugin_(std::move(plugin)), exe_(exe), num_outputs_(num_outputs), device_(device) {}
  Executable(const Executable&) = delete;
  ~Executable();

  // Enqueues one run. Returns the output buffers at once; they become ready
  // asynchronously. The arguments must stay alive until this returns (PJRT
  // keeps its own references after that).
  //
  // Donation: a parameter the program aliases to an output
  // (`tf.aliasing_output`) is donated unless its index is in `keep`: PJRT
  // then deletes that argument's buffer and the output takes its memory. The
  // caller names the donated arguments in `donated` (they stop counting in
  // DeviceMemory before the outputs start) and must hold the only reference
  // to each: no one may use a donated Buffer afterwards except to destroy it.
  std::vector<BufferPtr> execute(const std::vector<PJRT_Buffer*>& args, const std::vector<int64_t>& keep = {},
                                 const std::vector<Buffer*>& donated = {}) const;
  // The same, with the outputs replacing the contents of `outs` (whose
  // storage a caller on a hot path reuses).
  void execute(const std::vector<PJRT_Buffer*>& args, const std::vector<int64_t>& keep,
               const std::vector<Buffer*>& donated, std::vector<BufferPtr>& outs) const;
  int num_outputs() const { return num_outputs_; }
  // The plugin's serialised form of the compiled program, which
  // Client::deserialize loads back (in this or another process, with the
  // same plugin build only: PJRT promises no stability across versions).
  // Throws Error if the plugin cannot serialise.
  std::string serialize() const;

 private:
  friend class Client;
  // A PJRT_Executable view of exe_ (its outputs, its serialisation); owns
  // the view and destroys it.
  struct Unloaded {
    Unloaded(const PJRT_Api* a, PJRT_Executable* e) : api(a), exe(e) {}
    Unloaded(const Unloaded&) = delete;
    ~Unloaded();
    const PJRT_Api* api;
    PJRT_Executable* exe;
  };
  Unloaded unloaded() const;
  std::shared_ptr<Plugin> plugin_;
  PJRT_LoadedExecutable* exe_;
  int num_outputs_;
  int device_;
  // On-device bytes of each output (fixed per program), learnt on the first run.
  mutable std::once_flag sized_;
  mutable std::vector<int64_t> output_bytes_;
};

// One PJRT client and its addressable devices. Owns the PJRT_Client.
class Client {
 public:
  // `cpu_devices`: on a plugin whose platform is "cpu", the number of devices
  // to create (0 keeps the plugin's default, which is 4 for XLA's CPU
  // plugin). XLA's CPU client sizes its compute thread pool at
  // max(cores, devices), so more devices than cores oversubscribe the cores.
  // Ignored on other platforms.
  explicit Client(std::shared_ptr<Plugin> plugin, int cpu_devices = 0);
  ~Client();
  Client(const Client&) = delete;

  int device_count() const { return static_cast<int>(devices_.size()); }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const Plugin& plugin() const { return *plugin_; }
  // The device's description, e.g. "cpu:0 (TFRT_CPU_0)".
  std::string device_string(int device) const;
  // Bytes in use on the device as the plugin reports it, or -1 if unknown.
  int64_t device_bytes_in_use(int device) const;
  // The device's memory in bytes: the plugin's bytes_limit, or on the CPU
  // platform (whose plugin reports none) the host's physical memory; -1 if
  // unknown. A program whose results need more cannot run.
  int64_t device_bytes_limit(int device) const;

  // Uploads dense row-major host data of element type `type`. The host
  // memory may be reused as soon as this returns.
  // `counted`: whether the buffer counts in DeviceMemory (false for the
  // engine's own small buffers, such as cached runtime scalars, which are not
  // tensor memory).
  BufferPtr from_host(const void* data, ElementType type, const std::vector<int64_t>& dims, int device,
                      bool counted = true) const;
  // The same, returning before the plugin has read the host memory: the
  // caller must keep `data` alive and unchanged until `read` completes.
  // The buffer may be used at once (PJRT orders its readers after the copy).
  struct Upload {
    BufferPtr buffer;
    Event read;
  };
  Upload from_host_async(const void* data, ElementType type, const std::vector<int64_t>& dims, int device) const;
  // A buffer over host memory the caller lends to the plugin: on a CPU
  // platform the buffer aliases `data` (no copy; programs may write it
  // when the buffer is donated), elsewhere the plugin copies it. The caller
  // keeps `data` alive and does not touch it until `released` has been
  // called (on a plugin thread): when the buffer and whatever took its
  // memory are gone, or, where the plugin copied, when the copy is done.
  // `data` must be aligned to 64 bytes.
  BufferPtr lend_host(void* data, ElementType type, const std::vector<int64_t>& dims, int device,
                      std::function<void()> released) const;
  // Compiles StableHLO text for one device. Throws Error (with the plugin's
  // diagnostic) if the text does not parse, verify or compile.
  std::unique_ptr<Executable> compile(const std::string& mlir, int device) const;
  // Loads bytes that Executable::serialize wrote, for `device`. Throws Error
  // if the plugin rejects them (another plugin build, or damaged bytes that
  // passed the caller's checksum).
  std::unique_ptr<Executable> deserialize(const std::string& bytes, int device) const;

 private:
  // PJRT_Client_BufferFromHostBuffer with PJRT_HostBufferSemantics
  // `semantics`: the buffer and its done-with-host event.
  Upload upload(const void* data, ElementType type, const std::vector<int64_t>& dims, int device, int semantics,
                bool counted) const;
  // Takes ownership of a loaded executable for `device`.
  std::unique_ptr<Executable> wrap(PJRT_LoadedExecutable* loaded, int device) const;
  // The serialised compile options for one replica on `device`.
  std::string options_for(int device) const;
  // PJRT_Client_Create, with the CPU plugin's "cpu_device_count" option
  // when cpu_devices > 0; fills client_, devices_ and the platform names.
  void create(int cpu_devices);
  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::string platform_name_;
  std::string platform_version_;
};

// The serialized xla.CompileOptionsProto for one replica, one partition, on
// `device` (exposed for tests).
std::string compile_options_proto(int device);

}  // namespace torch_pjrt::runtime
