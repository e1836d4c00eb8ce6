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
// Asynchronous copies (non-blocking host<->device transfers) are tracked
// beside the programs, by a Completion each; a sync point waits for them
// too. A marker (what a torch Event records) is a Completion of all the work
// enqueued before it: the live programs and the pending copies.
//
// Thread-safety: all methods may be called from any thread; no lock is held
// while the host waits for a device program.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/metrics.h"
#include "lowering/context.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

// Raised for a failed runtime check of a program; `kind` is the Python
// class it becomes.
struct CheckError : std::runtime_error {
  CheckError(const std::string& what, lowering::ErrorKind kind) : std::runtime_error(what), kind(kind) {}
  lowering::ErrorKind kind;
};

// The runtime checks of one program run: a pred[n] output, element i true
// when check i found a bad input. Read from the device once, by the first
// check that asks. Thread-safe.
class CheckFlags {
 public:
  CheckFlags(runtime::BufferPtr flags, size_t n) : buffer_(std::move(flags)), n_(n) {}
  // Whether check i failed; waits for the program the first time.
  bool failed(size_t i);

 private:
  std::mutex mu_;
  runtime::BufferPtr buffer_;  // released once read successfully
  size_t n_;
  std::vector<uint8_t> host_;
};

// A runtime check whose result has not been read yet.
struct PendingCheck {
  std::shared_ptr<CheckFlags> flags;
  size_t index = 0;  // its element of flags
  std::string message;
  lowering::ErrorKind kind;
};
// One PendingCheck per message, all reading the program output `flags`.
template <typename Checks, typename MessageOf>
std::vector<PendingCheck> pending_checks(runtime::BufferPtr flags, const Checks& checks, MessageOf&& message_of) {
  std::vector<PendingCheck> out;
  auto shared = std::make_shared<CheckFlags>(std::move(flags), checks.size());
  for (size_t i = 0; i < checks.size(); ++i) out.push_back({shared, i, message_of(i), checks[i].kind});
  return out;
}

// A runtime check's message that names its op: "aten::x: <message>", unless
// the lowering's message starts with that already.
std::string check_message(const std::string& op, const std::string& message);

// A runtime error of a program, prefixed with the op (or ops) it came from.
runtime::Error named(const runtime::Error& e, const std::string& op);

// Reads one check now (waiting for its program) and throws CheckError if it
// failed. Its message names its op already (check_message).
void raise_if_failed(const PendingCheck& check);

// The completion of some device work that finishes in `parts` pieces (a
// copy, or everything before an event). Shared by whoever waits for it.
// Thread-safe.
class Completion {
 public:
  explicit Completion(int parts = 1) : remaining_(parts) {}
  // One part finished, with `error` if it failed; the last one completes
  // this (and stamps the host's steady clock).
  void arrive(const std::string& error = "");
  bool done() const;
  void wait() const;
  // Seconds on the steady clock when it completed (waits first).
  double completed_at() const;
  // The first part's error, or "" (waits first).
  std::string error() const;
  // Calls `fn` once this is done: at once if it is (on this thread), else on
  // the thread of the last part. `fn` must not throw.
  void then(std::function<void()> fn);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  int remaining_;
  double at_ = 0;
  std::string error_;
  std::vector<std::function<void()>> then_;
};
using CompletionPtr = std::shared_ptr<Completion>;

class Executor {
 public:
  // `metrics` (which must outlive this) counts the time its waits block.
  explicit Executor(MetricsRecorder& metrics) : metrics_(metrics) {}
  // Records a program just enqueued for `op` (a name that lives for the
  // process) by its first output. Past kMaxInFlight programs the oldest half
  // is awaited.
  void enqueued(const runtime::BufferPtr& output, const char* op);
  void add_checks(std::vector<PendingCheck> checks);
  // The donated input buffers of a program just enqueued, whose output is
  // `output`. PJRT holds a donated buffer until its program has run, and
  // destroying it sooner blocks until then, so they are kept until that
  // output is ready (checked here, on later calls and at sync points) and
  // destroyed without waiting. Past kMaxRetired programs the oldest is
  // awaited.
  void retire(const runtime::BufferPtr& output, std::vector<runtime::BufferPtr> donated);
  // Waits for every program enqueued so far, then reads the pending checks;
  // raises the first failure of either (a program's error names its op).
  void sync();
  // Tracks an asynchronous copy until it completes; `what` names it in the
  // error a sync point raises if it failed.
  void add_transfer(CompletionPtr done, std::string what);
  // A Completion of everything enqueued so far (programs whose outputs are
  // alive, and copies).
  CompletionPtr marker();

 private:
  void await(size_t keep);
  void await_transfers();

  // Destroys the retired buffers whose program ran (all of them, waiting,
  // when `all`), outside the lock.
  void reap(bool all);

  MetricsRecorder& metrics_;
  static constexpr size_t kMaxInFlight = 4096;
  static constexpr size_t kMaxRetired = 256;
  std::mutex mu_;
  std::deque<std::pair<std::weak_ptr<runtime::Buffer>, const char*>> in_flight_;
  std::vector<PendingCheck> checks_;
  std::vector<std::pair<CompletionPtr, std::string>> transfers_;
  std::deque<std::pair<runtime::Event, std::vector<runtime::BufferPtr>>> retired_;
};

}  // namespace torch_pjrt::engine
