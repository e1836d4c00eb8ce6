// Python bindings of the extension module torch_pjrt._C.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include "engine/cache_files.h"
#include "engine/entry_signing.h"
#include "torch/common.h"

namespace torch_pjrt::glue {

std::vector<std::string> register_lowered_ops();
namespace distributed {
void bind(pybind11::module& m);  // distributed/bindings.cc
}

namespace {

namespace py = pybind11;

// "file.py:LINE" of the innermost Python frame outside torch and torch_pjrt
// (the user's line), or of the innermost frame when all are inside.
std::string user_python_line() {
  py::gil_scoped_acquire gil;
  PyFrameObject* frame = PyEval_GetFrame();
  if (!frame) return "";
  Py_INCREF(frame);
  std::string first;
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    std::string file = py::cast<std::string>(py::handle(code->co_filename));
    Py_DECREF(code);
    std::string here = file + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    if (first.empty()) first = here;
    const bool inside = file.find("/torch/") != std::string::npos || file.find("/torch_pjrt/") != std::string::npos;
    if (!inside) {
      Py_DECREF(frame);
      return here;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  return first;
}

engine::Mode parse_mode(const std::string& m) {
  if (m == "debug") return engine::Mode::Debug;
  if (m == "strict") return engine::Mode::Strict;
  if (m == "fused") return engine::Mode::Fused;
  throw py::value_error("eager mode must be 'strict', 'debug' or 'fused', got '" + m + "'");
}

const char* mode_name(engine::Mode m) {
  switch (m) {
    case engine::Mode::Debug:
      return "debug";
    case engine::Mode::Strict:
      return "strict";
    case engine::Mode::Fused:
      return "fused";
  }
  return "strict";
}

Engine& engine_or_raise() {
  return translate_errors("torch_pjrt", []() -> Engine& { return Engine::get(); });
}

// What a captured graph's program depends on, as bytes (dynamo.py's replay
// key): per tensor argument, which earlier argument's storage it shares (or
// a new number), its device, dtype, sizes, strides, storage offset and
// storage bytes; per Python int, float or bool (a graph's symbolic size or
// unspecialised number), its value, which the capture freezes. None when an
// argument is anything else or not a tpu tensor.
py::object layout_key(const py::list& args) {
  std::string key;
  key.reserve(args.size() * 96);
  std::vector<const void*> storages;
  auto word = [&](int64_t w) { key.append(reinterpret_cast<const char*>(&w), sizeof w); };
  for (py::handle h : args) {
    if (PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr())) {
      word(PyBool_Check(h.ptr()) ? -3 : PyLong_Check(h.ptr()) ? -4 : -5);
      if (PyFloat_Check(h.ptr())) {
        double v = PyFloat_AsDouble(h.ptr());
        int64_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        word(bits);
      } else {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
        if (overflow) return py::none();
        word(v);
      }
      continue;
    }
    if (!THPVariable_Check(h.ptr())) return py::none();
    const at::Tensor& t = THPVariable_Unpack(h.ptr());
    if (!t.is_privateuseone()) return py::none();
    const void* id = slot_of(t);
    auto at = std::find(storages.begin(), storages.end(), id);
    word(at - storages.begin());
    if (at == storages.end()) storages.push_back(id);
    word(t.get_device());
    word(static_cast<int64_t>(t.scalar_type()));
    word(t.dim());
    for (int64_t d : t.sizes()) word(d);
    for (int64_t d : t.strides()) word(d);
    word(t.storage_offset());
    word(static_cast<int64_t>(t.storage().nbytes()));
  }
  return py::bytes(key);
}

// A captured graph run on new storages (dynamo.py's _Replay): per capture
// slot, the argument whose storage it binds (-1: a new storage of the
// slot's bytes), and each result as a view (dtype, sizes, strides, storage
// offset) of a capture slot's storage.
struct GraphReplay {
  struct Result {
    int64_t slot;
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };
  std::shared_ptr<const engine::RegionCapture> capture;
  std::vector<int64_t> bound;
  std::vector<Result> results;

  std::vector<at::Tensor> run(const py::list& args) const {
    const engine::RegionCapture& c = *capture;
    std::vector<at::Tensor> storages(bound.size());
    std::vector<Slot*> slots(bound.size());
    for (size_t j = 0; j < bound.size(); ++j) {
      storages[j] = bound[j] >= 0 ? THPVariable_Unpack(args[bound[j]].ptr())
                                  : new_tensor({c.slot_nbytes[j]}, at::kByte, static_cast<c10::DeviceIndex>(c.device));
      slots[j] = slot_of(storages[j]);
    }
    Engine& e = engine_or_raise();
    {
      py::gil_scoped_release no_gil;
      translate_errors(c.name, [&] { e.replay(c, slots); });
    }
    std::vector<at::Tensor> made;
    made.reserve(results.size());
    for (const Result& r : results) {
      const at::Tensor& base = storages.at(r.slot);
      made.push_back(at::empty({0}, base.options().dtype(r.dtype)).set_(base.storage(), r.offset, r.sizes, r.strides));
    }
    return made;
  }
};

// The header of the compile cache entry file at `path`, read by
// engine::read_entry_info, as compile_cache.read_header's dict; None when
// the file's structure does not hold or its fingerprint is not UTF-8.
py::object cache_entry_header(const std::string& path) {
  std::optional<engine::DiskEntryInfo> info;
  {
    py::gil_scoped_release no_gil;
    info = engine::read_entry_info(path);
  }
  if (!info) return py::none();
  PyObject* fingerprint = PyUnicode_DecodeUTF8(info->fingerprint.data(), info->fingerprint.size(), nullptr);
  if (!fingerprint) {
    PyErr_Clear();
    return py::none();
  }
  py::dict d;
  d["fingerprint"] = py::reinterpret_steal<py::str>(fingerprint);
  d["key_words"] = info->key_words;
  d["summary"] =
      py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(info->summary.data(), info->summary.size(), "replace"));
  d["signature_bytes"] = info->signature_bytes;
  d["executable_bytes"] = info->executable_bytes;
  d["bytes"] = info->file_bytes;
  d["signed"] = info->signed_entry;
  return d;
}

// Whether the entry file at `path` would be trusted, by the engine's own
// rules (cache_files.h, entry_signing.h): "owner_problem" is why it is not
// trusted by its owner and mode ("" when it is); "signature" is "valid",
// "invalid" or "unsigned" under the environment's key, or "no key".
py::dict cache_entry_trust(const std::string& path) {
  std::string owner_problem, signature = "no key";
  {
    py::gil_scoped_release no_gil;
    engine::FileFacts facts;
    int error = 0;
    std::optional<std::string> bytes = engine::read_file_nofollow(path, /*touch=*/false, &facts, &error);
    const engine::SigningKey key = engine::SigningKey::from_environment();
    if (!bytes) {
      owner_problem = error == ELOOP ? "it is a symbolic link" : std::string("unreadable: ") + std::strerror(error);
      signature = "unreadable";
    } else {
      owner_problem = engine::untrusted_file_reason(facts);
      if (key.set()) signature = engine::signature_check_name(engine::verify_entry(*bytes, key.secret));
    }
  }
  py::dict d;
  d["owner_problem"] = owner_problem;
  d["signature"] = signature;
  return d;
}

// The environment's cache signing key, without the secret: whether one is
// set, where it comes from, and why it cannot be used ("" when it can).
py::dict cache_key_status() {
  const engine::SigningKey key = engine::SigningKey::from_environment();
  py::dict d;
  d["set"] = key.set();
  d["source"] = key.source;
  d["problem"] = key.problem;
  return d;
}

}  // namespace
}  // namespace torch_pjrt::glue

PYBIND11_MODULE(_C, m) {
  using namespace torch_pjrt::glue;
  namespace py = pybind11;
  python_location = &user_python_line;
  {
    py::tuple bases = py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_ZeroDivisionError));
    zero_division_error = PyErr_NewException("torch_pjrt.ZeroDivisionError", bases.ptr(), nullptr);
    m.attr("ZeroDivisionError") = py::handle(zero_division_error);
  }

  m.attr("TORCH_VERSION") = TORCH_PJRT_TORCH_VERSION;
  distributed::bind(m);
  m.def("_configure", [](const std::string& path) { Engine::configure(path); });
  m.def("_register_ops", [] { return register_lowered_ops(); });
  m.def("_is_available", [] { return Engine::available(); });
  m.def("_started", [] { return Engine::started(); });
  m.def("_load_error", [] { return Engine::load_error(); });
  m.def("_plugin_path", [] { return Engine::plugin_path(); });
  m.def("_device_count", [] { return Engine::available() ? Engine::get().device_count() : 0; });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int d) { translate_errors("set_device", [&] { set_current_device(d); }); });
  m.def("_synchronize", [] {
    py::gil_scoped_release no_gil;
    translate_errors("synchronize", [] { Engine::get().sync(); });
  });
  m.def("_set_mode", [](const std::string& mode) {
    Engine& e = engine_or_raise();
    e.set_location_hook(&user_python_line);
    torch_pjrt::engine::Mode mode_value = parse_mode(mode);
    py::gil_scoped_release no_gil;
    translate_errors("set_eager_mode", [&] { e.set_mode(mode_value); });
  });
  m.def("_stablehlo", [](const at::Tensor& t) {
    TORCH_CHECK(t.is_privateuseone(), "torch_pjrt.stablehlo expects a tpu tensor, got one on ", t.device());
    return translate_errors("stablehlo", [&] { return engine_or_raise().region_text(*slot_of(t)); });
  });
  m.def("_get_mode", [] { return std::string(mode_name(engine_or_raise().mode())); });
  // torch.compile's replay path (dynamo.py): capture a graph's one region,
  // then run its program on new storages.
  using torch_pjrt::engine::RegionCapture;
  py::class_<RegionCapture, std::shared_ptr<RegionCapture>>(m, "_RegionCapture")
      .def_readonly("slot_ids", &RegionCapture::slot_ids)
      .def_readonly("slot_nbytes", &RegionCapture::slot_nbytes)
      .def_property_readonly("dead",
                             [](const RegionCapture& c) { return std::vector<bool>(c.dead.begin(), c.dead.end()); })
      .def_readonly("device", &RegionCapture::device)
      .def_property_readonly("precision", [](const RegionCapture& c) { return static_cast<int>(c.precision); });
  m.def("_slot_id", [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(slot_of(t)); });
  m.def("_matmul_precision", [] {
    follow_matmul_precision();
    return static_cast<int>(engine_or_raise().matmul_precision());
  });
  m.def(
      "_begin_capture",
      [](bool dynamic, int64_t bucket_size) {
        Engine& e = engine_or_raise();
        py::gil_scoped_release no_gil;
        return translate_errors("torch.compile", [&] { return e.begin_capture(dynamic, bucket_size); });
      },
      py::arg("dynamic") = false, py::arg("bucket_size") = 0);
  // A graph input's symbolic dims: later uploads like it get storages of
  // their buckets' capacity (Engine::mark_dynamic_upload).
  m.def(
      "_mark_dynamic_upload",
      [](const at::Tensor& t, const std::vector<int64_t>& dims, int64_t bucket_size) {
        std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
        engine_or_raise().mark_dynamic_upload(to_hlo(t.scalar_type()), sizes, dims, bucket_size);
      },
      py::arg("t"), py::arg("dims"), py::arg("bucket_size") = 0);
  // (capture or None, whether its program was still compiling in the
  // background: the graph ran op by op, and a later call may capture it).
  m.def("_end_capture", []() -> py::tuple {
    Engine& e = engine_or_raise();
    std::shared_ptr<const RegionCapture> c;
    bool compiling = false;
    {
      py::gil_scoped_release no_gil;
      c = translate_errors("torch.compile", [&] { return e.end_capture(&compiling); });
    }
    py::object capture = c ? py::cast(std::const_pointer_cast<RegionCapture>(c)) : py::none();
    return py::make_tuple(capture, compiling);
  });
  m.def("_set_async_compile", [](bool on) { engine_or_raise().set_async_compile(on); });
  m.def("_async_compile", [] { return engine_or_raise().async_compile(); });
  m.def("_set_device_timing", [](bool on) { engine_or_raise().set_device_timing(on); });
  m.def("_wait_for_compiles", [] {
    Engine& e = engine_or_raise();
    py::gil_scoped_release no_gil;
    e.finish_background_work();
  });
  m.def("_layout_key", &layout_key);
  // bound: per capture slot, the index of the argument whose storage it
  // binds, or None for a new storage. outs: (slot, dtype, sizes, strides,
  // storage offset) of each result tensor, a view of a bound or new storage.
  py::class_<GraphReplay, std::shared_ptr<GraphReplay>>(m, "_GraphReplay")
      .def(py::init(
          [](std::shared_ptr<RegionCapture> c, const std::vector<std::optional<int64_t>>& bound,
             const std::vector<
                 std::tuple<int64_t, at::ScalarType, std::vector<int64_t>, std::vector<int64_t>, int64_t>>& outs) {
            TORCH_CHECK(bound.size() == c->slot_ids.size(), "torch.compile replay: ", bound.size(), " storages for ",
                        c->slot_ids.size(), " slots");
            auto r = std::make_shared<GraphReplay>();
            r->capture = std::move(c);
            for (const auto& b : bound) r->bound.push_back(b ? *b : -1);
            for (const auto& [j, dtype, sizes, strides, offset] : outs)
              r->results.push_back({j, dtype, sizes, strides, offset});
            return r;
          }))
      .def("run", &GraphReplay::run);
  m.def("_metrics", [] {
    auto mt = engine_or_raise().metrics();
    py::dict d;
    d["compiles"] = mt.compiles;
    d["cache_hits"] = mt.cache_hits;
    d["executions"] = mt.executions;
    d["syncs"] = mt.syncs;
    d["donations"] = mt.donations;
    d["compile_seconds"] = mt.compile_seconds;
    d["wait_seconds"] = mt.wait_seconds;
    d["device_seconds"] = mt.device_seconds;
    py::dict fb;
    for (const auto& [k, v] : mt.fallback_ops) fb[py::str(k)] = v;
    d["fallback_ops"] = fb;
    py::dict calls;
    for (const auto& [k, v] : mt.op_calls) calls[py::str(k)] = v;
    d["op_calls"] = calls;
    py::dict by_name;
    for (const auto& [k, v] : mt.compiles_by_name) by_name[py::str(k)] = v;
    d["compiles_by_name"] = by_name;
    d["cached_programs"] = engine_or_raise().cache_size();
    d["regions"] = mt.regions;
    py::dict per_region;
    per_region["mean"] = mt.regions ? static_cast<double>(mt.region_calls) / mt.regions : 0.0;
    per_region["max"] = mt.region_calls_max;
    d["ops_per_region"] = per_region;
    py::dict reasons;
    for (const auto& [k, v] : mt.flush_reasons) reasons[py::str(k)] = v;
    d["flush_reasons"] = reasons;
    d["region_replays"] = mt.region_replays;
    d["graph_replays"] = mt.graph_replays;
    d["regions_run_while_compiling"] = mt.regions_run_while_compiling;
    d["regions_sealed"] = mt.regions_sealed;
    d["regions_compiling"] = mt.regions_compiling;
    d["bucket_hits"] = mt.bucket_hits;
    d["padded_elements"] = mt.padded_elements;
    d["bucket_refusals"] = mt.bucket_refusals;
    py::dict disk;
    disk["enabled"] = engine_or_raise().disk_cache().enabled();
    disk["host_hits"] = mt.disk.host_hits;
    disk["shared_hits"] = mt.disk.shared_hits;
    disk["misses"] = mt.disk.misses;
    disk["loads"] = mt.disk_loads;
    disk["load_seconds"] = mt.load_seconds;
    disk["read_seconds"] = mt.disk.read_seconds;
    disk["bytes_read"] = mt.disk.bytes_read;
    disk["bytes_written"] = mt.disk.bytes_written;
    disk["writes"] = mt.disk.writes;
    disk["write_failures"] = mt.disk.write_failures;
    disk["corrupt_dropped"] = mt.disk.corrupt_dropped;
    disk["evicted"] = mt.disk.evicted;
    disk["lock_waits"] = mt.disk.lock_waits;
    disk["refused_untrusted"] = mt.disk.refused_untrusted;
    disk["bad_signature"] = mt.disk.bad_signature;
    d["persistent_cache"] = disk;
    return d;
  });
  m.def("_flush_compile_cache", [] {
    py::gil_scoped_release no_gil;
    if (Engine::started()) engine_or_raise().flush_disk_cache();
  });
  m.def("_compile_cache_info", [] {
    Engine& e = engine_or_raise();
    py::dict d;
    d["host"] = e.disk_cache().host_path();
    d["shared"] = e.disk_cache().shared_path();
    d["fingerprint"] = e.fingerprint();
    d["host_refusal"] = e.disk_cache().host_refusal();
    d["shared_refusal"] = e.disk_cache().shared_refusal();
    d["signing"] = e.disk_cache().signing();
    return d;
  });
  m.def("_read_cache_entry", &cache_entry_header);
  m.def("_cache_entry_trust", &cache_entry_trust);
  m.def("_cache_dir_problem", &torch_pjrt::engine::untrusted_dir_reason);
  m.def("_cache_key", &cache_key_status);
  m.def("_program_keys", [] { return engine_or_raise().program_keys(); });
  m.def("_reset_metrics", [] { engine_or_raise().reset_metrics(); });
  m.def("_forget_shapes", [] { engine_or_raise().forget_shapes(); });
  m.def("_memory_allocated", [](int d) { return engine_or_raise().allocated_bytes(d); });
  m.def("_max_memory_allocated", [](int d) { return engine_or_raise().peak_allocated_bytes(d); });
  m.def("_reset_peak_memory_stats", [](int d) { engine_or_raise().reset_peak(d); });
  m.def("_manual_seed", [](uint64_t seed) { translate_errors("manual_seed", [&] { manual_seed_all(seed); }); });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(d)));
  });
  m.def("_platform_info", [] {
    Engine& e = engine_or_raise();
    py::dict d;
    d["plugin_path"] = Engine::plugin_path();
    d["api_version"] = e.client().plugin().api_version();
    d["platform_name"] = e.client().platform_name();
    d["platform_version"] = e.client().platform_version();
    py::list devices;
    for (int i = 0; i < e.device_count(); ++i) devices.append(e.client().device_string(i));
    d["devices"] = devices;
    return d;
  });
  m.def("_lowered_ops", [] { return torch_pjrt::lowering::lowered_ops(); });
}
