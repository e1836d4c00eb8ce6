#include "engine/cache.h"

#include <cstdlib>

namespace torch_pjrt::engine {

ProgramCache::ProgramCache() {
  const char* env = std::getenv("TORCH_PJRT_MAX_PROGRAMS");
  if (env && std::atoi(env) > 0) capacity_ = static_cast<size_t>(std::atoi(env));
}

std::shared_ptr<const CachedProgram> ProgramCache::find(const ProgramKey& key) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.program;
}

std::shared_ptr<const CachedProgram> ProgramCache::get(const ProgramKey& key, const Compile& compile, bool* hit) {
  std::unique_lock<std::mutex> g(mu_);
  *hit = true;
  for (;;) {
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.program;
    }
    if (!compiling_.count(key)) break;
    compiled_.wait(g);
  }
  *hit = false;
  compiling_.insert(key);
  g.unlock();
  std::shared_ptr<const CachedProgram> program;
  try {
    program = compile();
  } catch (...) {
    g.lock();
    compiling_.erase(key);
    compiled_.notify_all();
    throw;
  }
  g.lock();
  compiling_.erase(key);
  lru_.push_front(key);
  entries_[key] = Entry{program, lru_.begin()};
  while (entries_.size() > capacity_) {  // a running program keeps its own reference
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  compiled_.notify_all();
  return program;
}

size_t ProgramCache::size() {
  std::lock_guard<std::mutex> g(mu_);
  return entries_.size();
}

std::vector<std::string> ProgramCache::key_hashes() {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) out.push_back(k.hex());
  return out;
}

}  // namespace torch_pjrt::engine
