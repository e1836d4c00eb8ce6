// A storage's device state.
//
// Every tpu storage owns one Slot (through its DataPtr: created by the
// allocator, deleted with the storage). The slot holds the storage's current
// device buffer: one flat 1-D array of nbytes / byte_size(dtype) elements,
// or nothing until the storage is first written (it then reads as zeros).
//
// Only the engine changes a slot (Engine::run, upload, adopt; see
// engine.h). The torch glue asks the engine and never writes a buffer.
//
// A slot is materialised (it holds its buffer, or none yet) or pending. It
// is pending while its buffer was donated to a program that is being
// enqueued and will be replaced by that program's output (readers wait, only
// for the enqueue, not for the program to run), and while fused mode's open
// region reads or writes it (`region_index` >= 0): the engine then flushes
// the region before anyone else reads or replaces the buffer.
//
// Thread-safety: `device` and `nbytes` never change. The buffer, its dtype and
// its producer are read and replaced together under the slot's own mutex, so
// a thread that reads a storage while another writes it sees either the old
// or the new buffer, never a torn one. The mutex is never held while another
// lock is taken or while the host waits for a device program.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>

#include "hlo/dtype.h"
#include "runtime/pjrt.h"

namespace torch_pjrt::engine {

class Slot {
 public:
  Slot(int device, int64_t nbytes);
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  struct State {
    runtime::BufferPtr buffer;          // null until written
    hlo::DType dtype = hlo::DType::U8;  // element type of `buffer`
    const char* producer = nullptr;     // ATen name of the op that wrote `buffer` last (for async errors)
  };
  // A consistent copy of the current state (the buffer is shared, not copied).
  State state() const;
  bool has_buffer() const;
  // True until the slot is first written (a program's result, an upload or
  // an adoption), then false for good. Never waits; read without the lock.
  // A program that reads a never-written storage reads zeros of its own
  // (ProgramBuilder) instead of a zero buffer uploaded from the host.
  bool never_written() const { return !ever_written_.load(std::memory_order_acquire); }
  // Set when the op that should have written this slot failed before its
  // program ran (a fused region's call replayed alone, see
  // Engine::run_calls_alone): the slot then holds no buffer, and whoever
  // reads it rethrows this. Null otherwise; the next set() clears it.
  std::exception_ptr failure() const;

  const int device;
  const int64_t nbytes;

  // This slot's number in the open fused region, or -1 when no region
  // references it. Set and cleared by the engine under its region lock;
  // read without the lock (a reader that sees -1 needs no flush).
  int32_t region_index() const { return region_index_.load(std::memory_order_acquire); }

 private:
  friend class Engine;
  friend class Region;
  void set(State s);
  // Drops the buffer and keeps `failure` for the readers (see failure()).
  void fail(std::exception_ptr failure);
  // Donation: when the slot's buffer is `ours` and nobody but this slot and
  // the caller holds it, drops the slot's reference (the caller's is then
  // the only one), makes the slot pending and returns true; else changes
  // nothing. Never waits. The caller ends the pending state with set() (the
  // program's output) or restore() (the enqueue failed).
  bool take_if_unshared(const runtime::BufferPtr& ours);
  void restore(runtime::BufferPtr buffer);
  // A non-blocking upload: waits until the slot is not pending, then makes
  // it pending and returns its current buffer (for restore() if the upload
  // fails). The uploader ends the pending state with set().
  runtime::BufferPtr begin_write();

  mutable std::mutex mu_;
  mutable std::condition_variable written_;
  State state_;
  std::exception_ptr failure_;
  bool pending_ = false;
  std::atomic<int32_t> region_index_{-1};
  std::atomic<bool> ever_written_{false};
};

}  // namespace torch_pjrt::engine
