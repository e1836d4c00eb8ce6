#include "engine/compiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/executor.h"
#include "engine/trace.h"

namespace torch_pjrt::engine {

namespace {

// "name bytes=N hash=H" for a file: the whole file hashed, or (for a large
// plugin) its size and 16 samples of 64 KiB, which any rebuild changes.
std::string file_identity(const std::string& path, bool whole) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return name + " unreadable";
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  uint64_t h = fnv_bytes(&size, sizeof size);
  std::vector<char> buf(1 << 16);
  int samples = whole ? static_cast<int>(size / static_cast<long>(buf.size())) + 1 : 16;
  for (int i = 0; i < samples; ++i) {
    long at = whole ? i * static_cast<long>(buf.size()) : size / samples * i;
    std::fseek(f, at, SEEK_SET);
    size_t n = std::fread(buf.data(), 1, buf.size(), f);
    h = fnv_bytes(buf.data(), n, h);
  }
  std::fclose(f);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return name + " bytes=" + std::to_string(size) + " hash=" + hex;
}

// The shared object (or executable) this engine was linked into: its build
// decides what every lowering emits.
std::string own_binary() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&file_identity), &info) && info.dli_fname) return info.dli_fname;
  return "/proc/self/exe";
}

// TORCH_PJRT_DEBUG_COMPILES=1: one stderr line per compile, with the views
// of a one-call program (which size or stride made it new).
void log_compile(const Sequence& seq) {
  static const bool on = std::getenv("TORCH_PJRT_DEBUG_COMPILES") != nullptr;
  if (!on) return;
  const bool bucketed = std::any_of(seq.plans.begin(), seq.plans.end(), [](const BucketPlan* p) { return p; });
  std::string s = seq.summary() + (bucketed ? " (bucketed)" : "");
  if (seq.calls.size() == 1)
    for_each_ref(*seq.calls.front(), [&](const TensorRef& r, bool target) {
      s += target ? " ->" : " ";
      s += std::string(hlo::scalar_type_name(r.view.dtype)) + hlo::dims_str(r.view.sizes) + "/" +
           hlo::dims_str(r.view.strides) + "@" + std::to_string(r.view.offset) + "#" + std::to_string(storage_numel(r));
    });
  std::fprintf(stderr, "torch_pjrt: compile %s\n", s.c_str());
}

}  // namespace

// ---------------------------------------------------------------- Sequence

Program Sequence::lower() const {
  Span span("lower");
  ProgramBuilder builder(precision, zero_unwritten);
  for (size_t i = 0; i < calls.size(); ++i) builder.add(*calls[i], i < plans.size() ? plans[i] : nullptr);
  return builder.finish(dead);
}

const std::string& Sequence::name() const {
  static const std::string region = "fused_region";
  return calls.size() == 1 ? calls.front()->op->name : region;
}

std::string Sequence::summary() const {
  if (calls.size() == 1) return calls.front()->op->name;
  std::vector<std::pair<std::string, int>> counts;
  for (const OpCall* c : calls) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == c->op->name; });
    if (it == counts.end())
      counts.emplace_back(c->op->name, 1);
    else
      ++it->second;
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = std::to_string(calls.size()) + " calls:";
  for (size_t i = 0; i < counts.size() && i < 6; ++i)
    s += (i ? ", " : " ") + counts[i].first + " x" + std::to_string(counts[i].second);
  if (counts.size() > 6) s += ", ...";
  return s;
}

// ---------------------------------------------------------------- Compiler

Compiler::Compiler(runtime::Client& client, MetricsRecorder& metrics) : client_(client), metrics_(metrics) {
  fingerprint_ = "format=1\nplatform=" + client_.platform_name() + "\nplatform_version=" + client_.platform_version() +
                 "\npjrt_api=" + client_.plugin().api_version() +
                 "\nplugin=" + file_identity(client_.plugin().path(), /*whole=*/false) +
                 "\nbuild=" + file_identity(own_binary(), /*whole=*/true) + "\n";
  DiskCacheOptions options = DiskCacheOptions::from_environment();
  options.fingerprint = fingerprint_;
  options.platform = client_.platform_name();
  disk_ = std::make_unique<DiskCache>(std::move(options));
  free_slots_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::shared_ptr<const CachedProgram> Compiler::get(const ProgramKey& key, const Sequence& seq, bool* hit,
                                                   Program* lowered) {
  return memory_.get(
      key,
      [&] {
        log_compile(seq);
        auto lower = [&] { return lowered ? std::move(*lowered) : seq.lower(); };
        return from_tiers(key, lower, seq.device(), seq.name(), seq.summary());
      },
      hit);
}

std::shared_ptr<const CachedProgram> Compiler::from_tiers(const ProgramKey& key, const std::function<Program()>& lower,
                                                          int device, const std::string& name,
                                                          const std::string& summary) {
  if (!disk_->enabled()) return compile(lower(), device, name);
  std::string hex = key.hex();
  bool refused = false;
  if (auto p = loaded(disk_->load_host(key.words, hex, &refused), DiskCache::Tier::Host, hex, device)) return p;
  bool waited = false;
  DiskCache::KeyLock lock = disk_->lock(hex, &waited);
  // Another process may have written it between the lookup and the lock
  // (it held the lock, or released it just before). A file that was there
  // and refused is not read again: this process's write replaces it.
  if (lock.held() && !refused)
    if (auto p = loaded(disk_->load_host(key.words, hex), DiskCache::Tier::Host, hex, device)) return p;
  std::shared_ptr<const CachedProgram> entry;
  // The shared tier gets a head start; a read still running after it races
  // a local compile, and the first to finish wins.
  bool read_finished = true;
  std::shared_ptr<DiskCache::SharedRead> read = disk_->start_shared_read(hex);
  if (read) {
    std::optional<DiskEntry> e = disk_->wait_shared(*read, key.words, hex, disk_->shared_head_start(), &read_finished);
    if (auto p = loaded(std::move(e), DiskCache::Tier::Shared, hex, device)) return p;
  }
  Program program = lower();
  if (!read_finished) {
    bool from_shared = false;
    entry = race(*read, key, hex, std::move(program), device, name, &from_shared);
    if (from_shared) return entry;
  } else {
    entry = compile(std::move(program), device, name);
  }
  disk_->count_miss();
  disk_->store(
      hex,
      [entry, words = key.words, summary]() -> std::optional<DiskEntry> {
        return DiskEntry{words, summary, entry->signature.serialize(), entry->exe->serialize()};
      },
      std::move(lock));
  return entry;
}

std::shared_ptr<const CachedProgram> Compiler::race(DiskCache::SharedRead& read, const ProgramKey& key,
                                                    const std::string& hex, Program program, int device,
                                                    const std::string& name, bool* from_shared) {
  struct Compiling {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::shared_ptr<const CachedProgram> entry;
    std::exception_ptr error;
  };
  auto c = std::make_shared<Compiling>();
  background_.fetch_add(1);
  // The compiler lives for the process; at exit it waits for this thread.
  std::thread([this, c, program = std::move(program), device, name]() mutable {
    std::shared_ptr<const CachedProgram> entry;
    std::exception_ptr error;
    try {
      entry = compile(std::move(program), device, name);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> g(c->mu);
      c->entry = std::move(entry);
      c->error = error;
      c->done = true;
    }
    c->cv.notify_all();
    background_.fetch_sub(1);
  }).detach();
  bool read_finished = false;
  for (;;) {
    if (!read_finished) {
      std::optional<DiskEntry> e = disk_->wait_shared(read, key.words, hex, 0.001, &read_finished);
      if (auto p = loaded(std::move(e), DiskCache::Tier::Shared, hex, device)) {
        *from_shared = true;  // the compile goes on unused
        return p;
      }
    }
    std::unique_lock<std::mutex> g(c->mu);
    if (c->cv.wait_for(g, std::chrono::milliseconds(read_finished ? 1000 : 1), [&] { return c->done; })) {
      if (c->error) std::rethrow_exception(c->error);
      return c->entry;
    }
  }
}

std::shared_ptr<const CachedProgram> Compiler::loaded(std::optional<DiskEntry> e, DiskCache::Tier tier,
                                                      const std::string& hex, int device) {
  if (!e) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  auto entry = std::make_shared<CachedProgram>();
  try {
    entry->signature = Signature::deserialize(e->signature);
    entry->exe = client_.deserialize(e->executable, device);
  } catch (const std::exception& ex) {
    disk_->drop(tier, hex, ex.what());
    return nullptr;
  }
  metrics_.loaded(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return entry;
}

std::shared_ptr<const CachedProgram> Compiler::compile(Program program, int device, const std::string& name) {
  auto entry = std::make_shared<CachedProgram>();
  entry->signature = std::move(program.signature);
  {
    std::unique_lock<std::mutex> g(slots_mu_);
    slot_free_.wait(g, [&] { return free_slots_ > 0; });
    --free_slots_;
  }
  struct FreeSlot {
    Compiler* c;
    ~FreeSlot() {
      {
        std::lock_guard<std::mutex> g(c->slots_mu_);
        ++c->free_slots_;
      }
      c->slot_free_.notify_one();
    }
  } free_slot{this};
  auto t0 = std::chrono::steady_clock::now();
  Span span("compile", &name);
  try {
    entry->exe = client_.compile(program.module_text, device);
  } catch (const runtime::Error& e) {
    throw named(e, name);
  }
  metrics_.compiled(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), name);
  return entry;
}

bool Compiler::compile_in_background(const ProgramKey& key, const Sequence& seq) {
  {
    std::lock_guard<std::mutex> g(async_mu_);
    if (async_failed_.count(key)) {
      async_failed_.erase(key);
      return false;
    }
    if (!async_compiling_.insert(key).second) return true;
  }
  log_compile(seq);
  auto program = std::make_shared<Program>();
  try {
    *program = seq.lower();
  } catch (...) {
    std::lock_guard<std::mutex> g(async_mu_);
    async_compiling_.erase(key);
    return false;  // its lowering error surfaces in the foreground
  }
  background_.fetch_add(1);
  // The compiler lives for the process; at exit it waits for this thread.
  std::thread([this, key, program, device = seq.device(), name = seq.name(), summary = seq.summary()] {
    bool failed = false;
    try {
      bool hit;
      memory_.get(
          key,
          [&] {
            return from_tiers(
                key, [&] { return std::move(*program); }, device, name, summary);
          },
          &hit);
    } catch (...) {
      failed = true;
    }
    {
      std::lock_guard<std::mutex> g(async_mu_);
      async_compiling_.erase(key);
      if (failed) async_failed_.insert(key);
    }
    background_.fetch_sub(1);
  }).detach();
  return true;
}

void Compiler::finish_background_work() {
  // Background compiles are local compiles, which finish; the bound only
  // keeps a compiler that hangs from hanging the process's exit forever.
  for (int i = 0; i < 600000 && background_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  disk_->flush();
}

}  // namespace torch_pjrt::engine
