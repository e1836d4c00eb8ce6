// Error translation: the one place a core exception (a PJRT error, a check,
// a lowering error, out of memory) becomes the matching torch error, and so
// Python exception: rethrow_as_torch.
#include <torch/csrc/Exceptions.h>

#include <cstdio>

#include "torch/common.h"

namespace torch_pjrt::glue {

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

}  // namespace torch_pjrt::glue
