#include "engine/executor.h"

namespace torch_pjrt::engine {

void raise_if_failed(const PendingCheck& c, const std::string& op) {
  bool bad = false;
  c.failed->to_host(&bad, 1);
  if (bad) throw CheckError(op.empty() ? c.message : op + ": " + c.message, c.kind);
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
      if (runtime::BufferPtr b = in_flight_.front().first.lock()) alive.emplace_back(std::move(b), in_flight_.front().second);
      in_flight_.pop_front();
    }
  }
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

void Executor::sync() {
  await(0);
  std::vector<PendingCheck> checks;
  {
    std::lock_guard<std::mutex> g(mu_);
    checks.swap(checks_);
  }
  for (const PendingCheck& c : checks) raise_if_failed(c);
}

}  // namespace torch_pjrt::engine
