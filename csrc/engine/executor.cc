#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace torch_pjrt::engine {

void Completion::arrive(const std::string& error) {
  std::vector<std::function<void()>> then;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (remaining_ <= 0) return;
    if (error_.empty()) error_ = error;
    if (--remaining_ > 0) return;
    at_ = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    then.swap(then_);
  }
  cv_.notify_all();
  for (auto& fn : then) fn();
}

bool Completion::done() const {
  std::lock_guard<std::mutex> g(mu_);
  return remaining_ <= 0;
}

void Completion::wait() const {
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return remaining_ <= 0; });
}

double Completion::completed_at() const {
  wait();
  std::lock_guard<std::mutex> g(mu_);
  return at_;
}

std::string Completion::error() const {
  wait();
  std::lock_guard<std::mutex> g(mu_);
  return error_;
}

void Completion::then(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (remaining_ > 0) {
      then_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

bool CheckFlags::failed(size_t i) {
  std::lock_guard<std::mutex> g(mu_);
  if (buffer_) {  // a failed read (the program failed) throws again for the next check that asks
    std::vector<uint8_t> host(n_, 0);
    buffer_->to_host(host.data(), n_);
    host_ = std::move(host);
    buffer_.reset();
  }
  return i < host_.size() && host_[i] != 0;
}

std::string check_message(const std::string& op, const std::string& message) {
  const bool named = message.size() > op.size() && message.compare(0, op.size(), op) == 0 && message[op.size()] == ':';
  return named ? message : op + ": " + message;
}

runtime::Error named(const runtime::Error& e, const std::string& op) {
  return runtime::Error(e.code(), op + ": " + e.what());
}

void raise_if_failed(const PendingCheck& c) {
  if (c.flags->failed(c.index)) throw CheckError(c.message, c.kind);
}

void Executor::enqueued(const runtime::BufferPtr& output, const char* op) {
  bool full;
  {
    std::lock_guard<std::mutex> g(mu_);
    in_flight_.emplace_back(output, op);
    full = in_flight_.size() > kMaxInFlight;
  }
  if (full) await(kMaxInFlight / 2);
}

void Executor::retire(const runtime::BufferPtr& output, std::vector<runtime::BufferPtr> donated) {
  if (donated.empty()) return;
  runtime::Event done;
  try {
    done = output->ready_event();
  } catch (const runtime::Error&) {
    return;  // no event to wait for: the buffers are destroyed here, waiting for their program
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    retired_.emplace_back(std::move(done), std::move(donated));
  }
  reap(false);
}

void Executor::reap(bool all) {
  std::vector<std::pair<runtime::Event, std::vector<runtime::BufferPtr>>> ran;
  bool blocks = false;  // some program has not run yet
  {
    std::lock_guard<std::mutex> g(mu_);
    while (!retired_.empty()) {
      const bool ready = retired_.front().first.is_ready();
      if (!ready && !all && retired_.size() <= kMaxRetired) break;
      blocks |= !ready;
      ran.push_back(std::move(retired_.front()));
      retired_.pop_front();
    }
  }
  std::optional<WaitTimer> timer;
  if (blocks) timer.emplace(metrics_);
  for (auto& [done, buffers] : ran) {
    try {
      done.wait();
    } catch (const runtime::Error&) {
      // The program failed: its error is reported where its output is read.
    }
    buffers.clear();
  }
}

void Executor::add_checks(std::vector<PendingCheck> checks) {
  if (checks.empty()) return;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& c : checks) checks_.push_back(std::move(c));
}

void Executor::await(size_t keep) {
  std::vector<std::pair<runtime::BufferPtr, const char*>> alive;
  {
    std::lock_guard<std::mutex> g(mu_);
    while (in_flight_.size() > keep) {
      if (runtime::BufferPtr b = in_flight_.front().first.lock())
        alive.emplace_back(std::move(b), in_flight_.front().second);
      in_flight_.pop_front();
    }
  }
  if (alive.empty()) return;
  WaitTimer timer(metrics_);
  for (auto& [buffer, op] : alive) {
    if (buffer->donated()) continue;  // a later program consumed it: this one ran before
    try {
      buffer->wait_ready();
    } catch (const runtime::Error& e) {
      // Donated by another thread's program meanwhile (flagged before that
      // program was enqueued, so this check sees it).
      if (buffer->donated()) continue;
      throw runtime::Error(e.code(), std::string(op) + " failed (reported at this sync point): " + e.what());
    }
  }
}

void Executor::add_transfer(CompletionPtr done, std::string what) {
  std::lock_guard<std::mutex> g(mu_);
  transfers_.erase(std::remove_if(transfers_.begin(), transfers_.end(),
                                  [](const auto& t) { return t.first->done() && t.first->error().empty(); }),
                   transfers_.end());
  transfers_.emplace_back(std::move(done), std::move(what));
}

CompletionPtr Executor::marker() {
  std::vector<runtime::BufferPtr> alive;
  std::vector<CompletionPtr> copies;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& [weak, op] : in_flight_)
      if (runtime::BufferPtr b = weak.lock()) alive.push_back(std::move(b));
    for (auto& t : transfers_) copies.push_back(t.first);
  }
  // One extra part, arrived last, so the marker cannot complete while it is
  // being built.
  auto m = std::make_shared<Completion>(static_cast<int>(alive.size() + copies.size()) + 1);
  for (auto& b : alive) {
    try {
      b->on_ready([m](const std::string&) { m->arrive(); });
    } catch (const runtime::Error&) {
      m->arrive();  // donated meanwhile: a later program consumed it
    }
  }
  for (auto& c : copies) c->then([m] { m->arrive(); });
  m->arrive();
  return m;
}

void Executor::await_transfers() {
  std::vector<std::pair<CompletionPtr, std::string>> transfers;
  {
    std::lock_guard<std::mutex> g(mu_);
    transfers.swap(transfers_);
  }
  if (transfers.empty()) return;
  WaitTimer timer(metrics_);
  for (auto& [done, what] : transfers) {
    std::string error = done->error();
    if (!error.empty()) throw runtime::Error(-1, what + " failed (reported at this sync point): " + error);
  }
}

void Executor::sync() {
  await(0);
  reap(true);
  await_transfers();
  std::vector<PendingCheck> checks;
  {
    std::lock_guard<std::mutex> g(mu_);
    checks.swap(checks_);
  }
  for (const PendingCheck& c : checks) raise_if_failed(c);
}

}  // namespace torch_pjrt::engine
