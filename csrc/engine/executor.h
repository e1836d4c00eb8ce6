// What runs and what is still to be checked: in-flight programs, pending
// runtime checks and sync points.
//
// Programs are enqueued asynchronously (PJRT returns their output buffers at
// once). The executor remembers each program since the last sync point by a
// weak reference to its first output, with its op's name, and the runtime
// checks (an i1 buffer each: an out-of-range index, an integer division by
// zero) that strict mode reads at the next sync point instead of at the op.
// A sync point waits for the programs whose output is still alive and
// raises the first error among them; a device runs its programs in order,
// so that covers the work before them too (an output donated to a later
// program counts as done). The error of a program whose
// results were all dropped unread, and that wrote no tensor, is not
// reported (nothing can observe it), as in JAX; that keeps the per-op cost
// to a weak reference instead of a PJRT event.
//
// Thread-safety: all methods may be called from any thread; no lock is held
// while the host waits for a device program.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/context.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// Raised for a failed runtime check of a program; `kind` is the Python
// class it becomes.
struct CheckError : std::runtime_error {
  CheckError(const std::string& what, lowering::ErrorKind kind) : std::runtime_error(what), kind(kind) {}
  lowering::ErrorKind kind;
};

// A runtime check whose result buffer has not been read yet.
struct PendingCheck {
  runtime::BufferPtr failed;  // rank-0 i1, true when the input was bad
  std::string message;
  lowering::ErrorKind kind;
};

// Reads one check now (waiting for its program) and throws CheckError naming
// `op` (when not empty) if it failed.
void raise_if_failed(const PendingCheck& check, const std::string& op = "");

class Executor {
 public:
  // Records a program just enqueued for `op` (a name that lives for the
  // process) by its first output. Past kMaxInFlight programs the oldest half
  // is awaited.
  void enqueued(const runtime::BufferPtr& output, const char* op);
  void add_checks(std::vector<PendingCheck> checks);
  // Waits for every program enqueued so far, then reads the pending checks;
  // raises the first failure of either (a program's error names its op).
  void sync();

 private:
  void await(size_t keep);

  static constexpr size_t kMaxInFlight = 4096;
  std::mutex mu_;
  std::deque<std::pair<std::weak_ptr<runtime::Buffer>, const char*>> in_flight_;
  std::vector<PendingCheck> checks_;
};

}  // namespace torch_pjrt::engine
