#include "engine/launch.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/trace.h"

namespace torch_pjrt::engine {

namespace {

// The runtime's element type for a dtype (hlo/dtype.cc holds the PJRT codes).
runtime::ElementType element_type(DType t) { return static_cast<runtime::ElementType>(hlo::pjrt_code(t)); }

thread_local int64_t t_last_request_bytes = 0;
// The user's line of the region call this thread runs alone, for its
// runtime checks' messages; null otherwise.
thread_local const std::string* t_call_location = nullptr;

// The bytes a program's results need (fresh results and written storages).
int64_t result_bytes(const Signature& sig, const std::vector<Slot*>& slots) {
  int64_t bytes = 0;
  for (const auto& out : sig.outputs) {
    if (out.kind == Signature::Output::Fresh) {
      const hlo::TensorType& t = sig.fresh_types[out.index];
      bytes += t.numel() * hlo::byte_size(t.dtype);
    } else if (out.kind == Signature::Output::SlotWrite) {
      bytes += slots[out.index]->nbytes;
    }
  }
  return bytes;
}

}  // namespace

Launcher::Launcher(runtime::Client& client, MetricsRecorder& metrics, Executor& executor, ReadSlot read_slot)
    : client_(client), metrics_(metrics), executor_(executor), read_slot_(std::move(read_slot)) {
  for (int d = 0; d < client_.device_count(); ++d) bytes_limit_.push_back(client_.device_bytes_limit(d));
}

int64_t Launcher::last_request_bytes() { return t_last_request_bytes; }
void Launcher::set_last_request_bytes(int64_t bytes) { t_last_request_bytes = bytes; }
void Launcher::set_call_location(const std::string* location) { t_call_location = location; }

void Launcher::check_scalars(const Signature& sig, const OpCall& call, int32_t index) {
  for (const auto& c : sig.scalar_checks) {
    if (c.call != index) continue;
    const CallArg& a = call.args[c.arg];
    if (a.kind == CallArg::Kind::Scalar && !a.host_tensor &&
        lowering::scalar_overflows(a.scalar_bytes, a.scalar_dtype, c.fits))
      throw lowering::LoweringError(call.op->name + ": " + c.message);
  }
}

// ---------------------------------------------------------------- the constant pool

runtime::BufferPtr Launcher::scalar_buffer(const uint8_t* bytes, DType dtype, int device) {
  ScalarKey key{{0, 0}, static_cast<uint32_t>(dtype) << 16 | static_cast<uint32_t>(device)};
  std::memcpy(key.bits, bytes, std::min<size_t>(sizeof key.bits, hlo::byte_size(dtype)));
  {
    std::lock_guard<std::mutex> g(constants_mu_);
    auto it = scalars_.find(key);
    if (it != scalars_.end()) return it->second;
  }
  auto buf = client_.from_host(bytes, element_type(dtype), {}, device, /*counted=*/false);
  std::lock_guard<std::mutex> g(constants_mu_);
  // Small: a value that changes every step (AdamW's bias corrections) makes a
  // new entry each time, and each cached buffer keeps per-use records in
  // PJRT, so a large cache grows host memory by megabytes before it clears.
  if (scalars_.size() > 256) scalars_.clear();
  scalars_[key] = buf;
  return buf;
}

runtime::BufferPtr Launcher::shape_buffer(const std::vector<int64_t>& values, int device) {
  thread_local std::vector<int64_t> key;  // no allocation once warm
  key.assign(values.begin(), values.end());
  key.push_back(device);
  {
    std::lock_guard<std::mutex> g(constants_mu_);
    auto it = shapes_.find(key);
    if (it != shapes_.end()) return it->second;
  }
  auto buf = client_.from_host(values.data(), runtime::ElementType::S64, {static_cast<int64_t>(values.size())}, device,
                               /*counted=*/false);
  std::lock_guard<std::mutex> g(constants_mu_);
  if (shapes_.size() > 1024) shapes_.clear();
  shapes_[key] = buf;
  return buf;
}

runtime::BufferPtr Launcher::constant_param(const Signature::ParamSource& p, const OpCall* const* calls,
                                            const std::vector<const TensorRef*>& refs, int device,
                                            const std::vector<hlo::TensorType>* exact_fresh) {
  switch (p.kind) {
    case Signature::Param::Scalar: {
      const CallArg& a = calls[p.call]->args[p.index];
      return scalar_buffer(a.scalar_bytes, a.scalar_dtype, device);
    }
    case Signature::Param::Rng:
      return client_.from_host(calls[p.call]->args[p.index].rng, runtime::ElementType::U64, {2}, device, false);
    case Signature::Param::Offset: {
      int64_t offset = refs[p.index]->view.offset;
      return scalar_buffer(reinterpret_cast<const uint8_t*>(&offset), DType::I64, device);
    }
    case Signature::Param::ViewShape: {
      const ViewSpec& v = refs[p.index]->view;
      thread_local std::vector<int64_t> shape;
      shape.assign(v.sizes.begin(), v.sizes.end());
      shape.insert(shape.end(), v.strides.begin(), v.strides.end());
      return shape_buffer(shape, device);
    }
    case Signature::Param::ResultShape:
      return shape_buffer(exact_fresh->at(p.index).dims, device);
    case Signature::Param::Slot:
      break;
  }
  return nullptr;
}

// ---------------------------------------------------------------- binding and launching

int64_t Launcher::execute(const CachedProgram& program, const OpCall* const* calls, size_t n,
                          const std::vector<Slot*>& slots, Binding& b, const std::string& name) {
  Span span("execute", &name);
  const Signature& sig = program.signature;
  t_last_request_bytes = result_bytes(sig, slots);
  const int device = calls[0]->device;
  // Refused before it runs, where nothing is donated yet: a plugin may
  // otherwise fail it only once it runs, and lose what it overwrites.
  if (const int64_t limit = bytes_limit_.at(device); limit > 0 && t_last_request_bytes > limit)
    throw runtime::Error(8, name + ": out of memory: its results need " + std::to_string(t_last_request_bytes) +
                                " bytes, more than the device's " + std::to_string(limit));
  // Bind the parameters in the signature's terms: distinct slots (numbered
  // as the builder numbered them) and tensor references.
  b.refs.clear();
  for (size_t c = 0; c < n; ++c) for_each_ref(*calls[c], [&](const TensorRef& r, bool) { b.refs.push_back(&r); });
  b.keep.resize(sig.params.size());
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const auto& p = sig.params[i];
    b.keep[i] = p.kind == Signature::Param::Slot ? read_slot_(*slots[p.index], sig.slot_dtypes[p.index])
                                                 : constant_param(p, calls, b.refs, device, b.exact_fresh);
  }
  return launch(program, slots, b, name, calls[n - 1]->op->name.c_str());
}

int64_t Launcher::launch(const CachedProgram& program, const std::vector<Slot*>& slots, Binding& b,
                         const std::string& name, const char* last_op) {
  const Signature& sig = program.signature;
  b.raw.resize(b.keep.size());
  for (size_t i = 0; i < b.keep.size(); ++i) b.raw[i] = b.keep[i]->get();

  // Donate the old buffer of each storage the program overwrites when only
  // its slot and we hold it; the others stay (PJRT copies instead). Taken
  // last, after every read above, so this thread waits for no slot while
  // one of its own is pending.
  b.kept.clear();
  b.donated.clear();
  for (const auto& [param, out] : sig.donations) {
    Slot* slot = slots[sig.params[param].index];
    if (slot->take_if_unshared(b.keep[param])) {
      b.donated.push_back(b.keep[param].get());
      b.taken.emplace_back(slot, b.keep[param]);
    } else {
      b.kept.push_back(param);
    }
  }

  const bool timed = device_timing_.load(std::memory_order_relaxed);
  const auto enqueued = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  try {
    program.exe->execute(b.raw, b.kept, b.donated, b.outs);
  } catch (const runtime::Error& e) {
    for (auto& [slot, buffer] : b.taken) slot->restore(std::move(buffer));
    throw named(e, name);
  }
  b.keep.clear();
  metrics_.executed(static_cast<int64_t>(b.donated.size()));
  if (timed && !b.outs.empty())
    b.outs[0]->on_ready(
        [this, enqueued](const std::string&) { metrics_.device_ran(enqueued, std::chrono::steady_clock::now()); });
  if (!b.outs.empty()) {
    // Tracked by an output that stays alive when there is one: a written tensor.
    size_t tracked = 0;
    for (size_t i = 0; i < b.outs.size(); ++i)
      if (sig.outputs[i].kind == Signature::Output::SlotWrite) {
        tracked = i;
        break;
      }
    executor_.enqueued(b.outs[tracked], last_op);
    if (!b.taken.empty()) {
      // The slots take their new buffers from the outputs; the donated ones
      // are destroyed once the program ran.
      std::vector<runtime::BufferPtr> donated;
      for (auto& [slot, buffer] : b.taken) donated.push_back(std::move(buffer));
      executor_.retire(b.outs[tracked], std::move(donated));
    }
  }
  return static_cast<int64_t>(b.donated.size());
}

// ---------------------------------------------------------------- outputs

CallResult Launcher::store_outputs(const CachedProgram& program, const OpCall& call, Binding& b, bool wait,
                                   const Signature* exact) {
  const Signature& sig = program.signature;
  const std::vector<hlo::TensorType>* exact_fresh = exact ? &exact->fresh_types : nullptr;
  const std::vector<Signature::CheckInfo>& messages = exact ? exact->checks : sig.checks;
  const std::vector<Slot*>& slots = b.numbering.slots();
  CallResult result;
  int64_t padded = 0;
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < b.outs.size(); ++i) {
    const auto& sink = sig.outputs[i];
    if (sink.kind == Signature::Output::Fresh) {
      result.buffers.push_back(b.outs[i]);
      if (exact_fresh) {
        const hlo::TensorType& t = sig.fresh_types[sink.index];
        const int64_t capacity = t.dynamic ? t.numel() : 0;
        if (capacity) padded += capacity - (*exact_fresh)[sink.index].numel();
        result.capacities.push_back(capacity);
      }
    } else if (sink.kind == Signature::Output::SlotWrite) {
      slots[sink.index]->set({b.outs[i], sig.slot_dtypes[sink.index], call.op->name.c_str()});
    } else {
      checks = pending_checks(b.outs[i], messages, [&](size_t k) {
        const std::string* at = t_call_location;
        std::string message = check_message(call.op->name, messages[k].message);
        return at && !at->empty() ? message + " (at " + *at + ")" : message;
      });
    }
  }
  b.taken.clear();  // the donated buffers' last references
  if (exact_fresh) metrics_.bucketed(padded);

  if (wait) {
    WaitTimer timer(metrics_);
    for (const auto& out : b.outs) {
      try {
        out->wait_ready();
      } catch (const runtime::Error& e) {
        throw named(e, call.op->name);
      }
    }
    for (const PendingCheck& c : checks) raise_if_failed(c);
  } else if (call.defer_checks) {
    result.checks = std::move(checks);
  } else {
    executor_.add_checks(std::move(checks));
  }
  return result;
}

void Launcher::store_region_outputs(const Signature& sig, const std::vector<Slot*>& slots, Binding& b,
                                    const std::vector<const char*>& writers,
                                    const std::vector<std::string>& check_messages) {
  std::vector<PendingCheck> checks;
  for (size_t i = 0; i < b.outs.size(); ++i) {
    const auto& sink = sig.outputs[i];
    if (sink.kind == Signature::Output::SlotWrite) {
      slots[sink.index]->set({b.outs[i], sig.slot_dtypes[sink.index], writers[sink.index]});
    } else if (sink.kind == Signature::Output::Check) {
      checks = pending_checks(b.outs[i], sig.checks, [&](size_t k) { return check_messages[k]; });
    }
  }
  b.release();
  executor_.add_checks(std::move(checks));
}

}  // namespace torch_pjrt::engine
