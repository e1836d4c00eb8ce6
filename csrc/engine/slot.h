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
// the region before anyone else reads or replaces the buffer. A region that
// runs with the scheduler's lock released (while its program compiles,
// fused.h) seals its slots: until it unseals them, every other thread that
// reads, writes or takes the buffer waits, and a deleter leaves the slot to
// the sealing thread; the sealing thread itself reads and writes them.
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
#include <thread>

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
  // Whether a sealed region (see above) holds this slot. Changed only under
  // the fused scheduler's region lock, so a reader holding it sees it stable.
  bool sealed() const { return sealed_.load(std::memory_order_acquire); }

 private:
  friend class Engine;
  friend class Region;
  friend class Launcher;
  friend class FusedScheduler;
  friend class Transfers;
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
  // Sealing (see above), by the thread that runs the sealed region, under the
  // region lock: seal() also takes the slot out of the open region's
  // numbering; unseal() returns whether the slot's storage was released
  // meanwhile (the caller then deletes the slot).
  void seal();
  bool unseal();
  // A deleter's question: true (and the slot is marked released, for
  // unseal()) when a sealed region holds it; false otherwise.
  bool defer_release();
  // Whether this thread must wait before it reads or writes: the buffer is
  // pending, or another thread sealed the slot. Under mu_.
  bool blocked() const;

  mutable std::mutex mu_;
  mutable std::condition_variable written_;
  State state_;
  std::exception_ptr failure_;
  bool pending_ = false;
  std::atomic<int32_t> region_index_{-1};
  std::atomic<bool> sealed_{false};
  std::thread::id sealer_;  // under mu_: the thread that sealed it
  bool released_ = false;   // under mu_: its storage was deleted while sealed
  std::atomic<bool> ever_written_{false};
};

}  // namespace torch_pjrt::engine
