#include "engine/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/cache_files.h"
#include "engine/entry_signing.h"

namespace torch_pjrt::engine {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'J', 'R', 'T', 'P', 'C', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kSuffix = ".tpc";

void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
void put_text(std::string& s, const std::string& t) {
  put_u64(s, t.size());
  s += t;
}

// Reads the format's fields from a byte string; every read checks bounds.
// `size`: where the entry ends (before a signature trailer, entry_signing.h).
struct Reader {
  const std::string& s;
  size_t pos = 0;
  bool ok = true;
  size_t size = s.size();
  uint64_t u(int n) {
    if (!ok || size - pos < static_cast<size_t>(n)) return ok = false, 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
    pos += n;
    return v;
  }
  std::string text(uint64_t n) {
    if (!ok || size - pos < n) return ok = false, std::string();
    std::string t = s.substr(pos, n);
    pos += n;
    return t;
  }
  // Steps over n bytes; returns n (0 when they are not there).
  uint64_t skip(uint64_t n) {
    if (!ok || size - pos < n) return ok = false, 0;
    pos += n;
    return n;
  }
};

std::string join(const std::string& a, const std::string& b) { return a + "/" + b; }

bool off(const char* v) {
  std::string s = v;
  return s.empty() || s == "0" || s == "off" || s == "OFF" || s == "false" || s == "False";
}

int64_t parse_bytes(const char* v, int64_t fallback) {
  char* end = nullptr;
  double n = std::strtod(v, &end);
  if (end == v || n < 0) return fallback;
  switch (*end) {
    case 'k':
    case 'K':
      n *= 1024;
      break;
    case 'm':
    case 'M':
      n *= 1024.0 * 1024;
      break;
    case 'g':
    case 'G':
      n *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<int64_t>(n);
}

}  // namespace

uint64_t fnv_bytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// ---------------------------------------------------------------- the format

std::string encode_entry(const DiskEntry& e, const std::string& fingerprint) {
  std::string s(kMagic, sizeof kMagic);
  put_u32(s, kFormatVersion);
  put_u32(s, static_cast<uint32_t>(fingerprint.size()));
  s += fingerprint;
  put_u64(s, e.key.size());
  for (int64_t w : e.key) put_u64(s, static_cast<uint64_t>(w));
  put_text(s, e.summary);
  put_text(s, e.signature);
  put_text(s, e.executable);
  put_u64(s, fnv_bytes(s.data(), s.size()));
  return s;
}

std::optional<DiskEntry> decode_entry(const std::string& bytes, const std::string& fingerprint, std::string* why) {
  const size_t size = unsigned_size(bytes);  // the signature is checked apart (DiskCache::trusted)
  if (size < sizeof kMagic + 16 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "not a torch_pjrt cache entry (bad magic or truncated)";
    return std::nullopt;
  }
  Reader r{bytes, sizeof kMagic, true, size};
  uint32_t version = static_cast<uint32_t>(r.u(4));
  if (version != kFormatVersion) {
    *why = "entry format " + std::to_string(version) + ", expected " + std::to_string(kFormatVersion);
    return std::nullopt;
  }
  std::string fp = r.text(r.u(4));
  if (r.ok && fp != fingerprint) {
    *why = "written by another plugin or build";
    return std::nullopt;
  }
  DiskEntry e;
  uint64_t words = r.u(8);
  if (r.ok && words > (size - r.pos) / 8) r.ok = false;
  for (uint64_t i = 0; r.ok && i < words; ++i) e.key.push_back(static_cast<int64_t>(r.u(8)));
  e.summary = r.text(r.u(8));
  e.signature = r.text(r.u(8));
  e.executable = r.text(r.u(8));
  size_t body = r.pos;
  uint64_t sum = r.u(8);
  if (!r.ok || r.pos != size) {
    *why = "truncated or overlong";
    return std::nullopt;
  }
  if (sum != fnv_bytes(bytes.data(), body)) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return e;
}

std::optional<DiskEntryInfo> read_entry_info(const std::string& path) {
  FileFacts facts;
  int error = 0;
  std::optional<std::string> bytes = read_file_nofollow(path, /*touch=*/false, &facts, &error);
  if (!bytes) return std::nullopt;
  const size_t size = unsigned_size(*bytes);
  if (size < sizeof kMagic || std::memcmp(bytes->data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader r{*bytes, sizeof kMagic, true, size};
  DiskEntryInfo info;
  const uint32_t version = static_cast<uint32_t>(r.u(4));
  info.fingerprint = r.text(r.u(4));
  info.key_words = r.u(8);
  if (r.ok && info.key_words > (size - r.pos) / 8) r.ok = false;
  r.skip(8 * info.key_words);
  info.summary = r.text(r.u(8));
  info.signature_bytes = r.skip(r.u(8));
  info.executable_bytes = r.skip(r.u(8));
  r.u(8);  // the checksum
  if (!r.ok || r.pos != size || version != kFormatVersion) return std::nullopt;
  info.file_bytes = bytes->size();
  info.signed_entry = is_signed(*bytes);
  return info;
}

// ---------------------------------------------------------------- options

DiskCacheOptions DiskCacheOptions::from_environment() {
  DiskCacheOptions o;
  if (const char* v = std::getenv("TORCH_PJRT_CACHE_DIR")) {
    if (!off(v)) o.host_dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    o.host_dir = join(x, "torch_pjrt");
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    o.host_dir = join(join(h, ".cache"), "torch_pjrt");
  }
  if (const char* v = std::getenv("TORCH_PJRT_SHARED_CACHE_DIR"); v && !off(v)) o.shared_dir = v;
  if (const char* v = std::getenv("TORCH_PJRT_CACHE_MAX_BYTES")) o.max_bytes = parse_bytes(v, o.max_bytes);
  if (const char* v = std::getenv("TORCH_PJRT_SHARED_CACHE_WAIT")) o.shared_wait_seconds = std::atof(v);
  SigningKey key = SigningKey::from_environment();
  o.signing_key = std::move(key.secret);
  o.key_problem = std::move(key.problem);
  return o;
}

// ---------------------------------------------------------------- locks

DiskCache::KeyLock& DiskCache::KeyLock::operator=(KeyLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

DiskCache::KeyLock::~KeyLock() { release(); }

void DiskCache::KeyLock::release() {
  if (fd_ < 0) return;
  // Unlinked while held: a process already waiting on this file re-checks
  // and finds the entry; one that comes later locks a new file and finds it.
  unlink(path_.c_str());
  flock(fd_, LOCK_UN);
  close(fd_);
  fd_ = -1;
}

DiskCache::KeyLock DiskCache::lock(const std::string& hex, bool* waited) {
  *waited = false;
  if (host_.empty() || !host_writable_) return KeyLock();
  std::string path = join(host_, hex + ".lock");
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return KeyLock();
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {  // the file system cannot lock: both compile
      close(fd);
      return KeyLock();
    }
    *waited = true;
    {
      std::lock_guard<std::mutex> g(stats_mu_);
      ++stats_.lock_waits;
    }
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        close(fd);
        return KeyLock();
      }
    }
  }
  return KeyLock(fd, path);
}

// ---------------------------------------------------------------- the cache

std::string DiskCache::prepare(const std::string& root, bool shared, std::string* refusal) {
  if (root.empty()) return "";
  const char* what = shared ? "shared" : "host";
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv_bytes(options_.fingerprint.data(), options_.fingerprint.size())));
  const std::string dir = join(root, options_.platform + "-" + hex);
  // The host tier is private; a shared one is made as the umask says (a
  // team's group may need to write it).
  const mode_t mode = shared ? 0777 : 0700;
  // The root is checked before anything is made in it.
  for (const std::string& d : {root, dir}) {
    if (!make_dirs(d, mode)) {
      report_once(std::string("unusable-") + what,
                  std::string("the ") + what + " compile cache directory " + dir +
                      " cannot be created; programs are compiled and not cached there");
      return "";
    }
    *refusal = shared && !options_.key_problem.empty() ? options_.key_problem : untrusted_dir_reason(d, !shared);
    if (!refusal->empty()) {
      if (refusal->find(d) == std::string::npos) *refusal = d + ": " + *refusal;
      break;
    }
  }
  if (!refusal->empty()) {
    {
      std::lock_guard<std::mutex> g(stats_mu_);
      ++stats_.refused_untrusted;
    }
    report_once(std::string("refused-") + what,
                std::string("refused the ") + what + " compile cache directory " + root + " (" + *refusal +
                    "): a program there could have been planted by someone else, so this process runs without it "
                    "and compiles instead");
    return "";
  }
  struct stat st;
  if (lstat(join(dir, "FINGERPRINT").c_str(), &st) != 0)
    write_file_atomically(dir, "FINGERPRINT", "FINGERPRINT", options_.fingerprint, shared ? 0644 : 0600);
  return dir;
}

DiskCache::DiskCache(DiskCacheOptions options) : options_(std::move(options)) {
  host_ = prepare(options_.host_dir, /*shared=*/false, &host_refusal_);
  shared_ = prepare(options_.shared_dir, /*shared=*/true, &shared_refusal_);
  if (enabled()) writer_ = std::thread([this] { writer_loop(); });
}

DiskCache::~DiskCache() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void DiskCache::report_once(const std::string& kind, const std::string& message) {
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    if (std::find(reported_.begin(), reported_.end(), kind) != reported_.end()) return;
    reported_.push_back(kind);
  }
  std::fprintf(stderr, "torch_pjrt: compile cache: %s\n", message.c_str());
}

bool DiskCache::trusted(Tier tier, const std::string& path, const std::optional<std::string>& bytes,
                        const FileFacts& facts, int error) {
  std::string why;
  bool signature = false;
  if (!bytes) {
    if (error != ELOOP && error != EINVAL) return false;  // missing or unreadable: a plain miss
    why = error == ELOOP ? "it is a symbolic link" : "it is not a regular file";
  } else {
    // The host tier trusts its owner; a shared tier with a key, its key.
    if (tier == Tier::Host || !signing()) why = untrusted_file_reason(facts);
    if (why.empty() && signing() && (tier == Tier::Shared || is_signed(*bytes))) {
      const SignatureCheck c = verify_entry(*bytes, options_.signing_key);
      signature = c != SignatureCheck::Valid;
      if (signature)
        why = c == SignatureCheck::Unsigned ? "it is not signed" : "its HMAC does not verify with this key";
    }
    if (why.empty()) return true;
  }
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    ++(signature ? stats_.bad_signature : stats_.refused_untrusted);
  }
  report_once(signature ? "bad-signature" : "untrusted-entry",
              "did not load " + path + " (" + why + "); it is compiled instead. Further such entries are skipped " +
                  "silently (metrics()[\"persistent_cache\"][\"" + (signature ? "bad_signature" : "refused_untrusted") +
                  "\"])");
  return false;
}

std::optional<DiskEntry> DiskCache::load_host_file(const std::vector<int64_t>& key, const std::string& hex,
                                                   bool* refused) {
  const std::string path = join(host_, hex + kSuffix);
  FileFacts facts;
  int error = 0;
  std::optional<std::string> bytes = read_file_nofollow(path, /*touch=*/true, &facts, &error);
  if (!trusted(Tier::Host, path, bytes, facts, error)) {
    *refused = bytes || error == ELOOP || error == EINVAL;
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    stats_.bytes_read += static_cast<int64_t>(bytes->size());
  }
  std::string why;
  std::optional<DiskEntry> e = decode_entry(*bytes, options_.fingerprint, &why);
  if (!e) {
    drop_corrupt(host_, hex, why);
    return std::nullopt;
  }
  if (e->key != key) return std::nullopt;  // another key with the same hash
  return e;
}

void DiskCache::drop_corrupt(const std::string& dir, const std::string& hex, const std::string& why) {
  unlink(join(dir, hex + kSuffix).c_str());
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    ++stats_.corrupt_dropped;
  }
  report_once("corrupt", "dropped the damaged entry " + join(dir, hex + kSuffix) + " (" + why +
                             "); it is recompiled. Further damaged entries are dropped silently (see metrics)");
}

void DiskCache::drop(Tier tier, const std::string& hex, const std::string& why) {
  const std::string& dir = tier == Tier::Shared ? shared_ : host_;
  if (tier != Tier::None && !dir.empty()) drop_corrupt(dir, hex, why);
}

std::optional<DiskEntry> DiskCache::load_host(const std::vector<int64_t>& key, const std::string& hex, bool* refused) {
  bool ignored = false;
  if (!refused) refused = &ignored;
  *refused = false;
  if (host_.empty()) return std::nullopt;
  auto t0 = std::chrono::steady_clock::now();
  std::optional<DiskEntry> e = load_host_file(key, hex, refused);
  std::lock_guard<std::mutex> g(stats_mu_);
  stats_.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (e) ++stats_.host_hits;
  return e;
}

void DiskCache::count_miss() {
  std::lock_guard<std::mutex> g(stats_mu_);
  ++stats_.misses;
}

std::shared_ptr<DiskCache::SharedRead> DiskCache::start_shared_read(const std::string& hex) {
  if (shared_.empty()) return nullptr;
  auto read = std::make_shared<SharedRead>();
  std::thread([read, path = join(shared_, hex + kSuffix)] {
    FileFacts facts;
    int error = 0;
    std::optional<std::string> bytes = read_file_nofollow(path, /*touch=*/false, &facts, &error);
    std::lock_guard<std::mutex> g(read->mu);
    read->bytes = std::move(bytes);
    read->facts = facts;
    read->error = error;
    read->done = true;
    read->cv.notify_all();
  }).detach();
  return read;
}

std::optional<DiskEntry> DiskCache::wait_shared(SharedRead& read, const std::vector<int64_t>& key,
                                                const std::string& hex, double seconds, bool* finished) {
  std::optional<std::string> bytes;
  FileFacts facts;
  int error = 0;
  {
    std::unique_lock<std::mutex> g(read.mu);
    *finished = read.cv.wait_for(g, std::chrono::duration<double>(seconds), [&] { return read.done; });
    if (!*finished) return std::nullopt;
    bytes = std::move(read.bytes);
    read.bytes.reset();
    facts = read.facts;
    error = read.error;
  }
  if (!trusted(Tier::Shared, join(shared_, hex + kSuffix), bytes, facts, error)) return std::nullopt;
  std::string why;
  std::optional<DiskEntry> e = decode_entry(*bytes, options_.fingerprint, &why);
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    stats_.bytes_read += static_cast<int64_t>(bytes->size());
  }
  if (!e) {
    drop_corrupt(shared_, hex, why);
    return std::nullopt;
  }
  if (e->key != key) return std::nullopt;
  {
    std::lock_guard<std::mutex> g(stats_mu_);
    ++stats_.shared_hits;
  }
  if (!host_.empty()) {  // copy the hit to the host tier
    Job job;
    job.hex = hex;
    job.bytes = std::move(*bytes);
    job.shared = false;
    enqueue(std::move(job));
  }
  return e;
}

std::optional<DiskEntry> DiskCache::load(const std::vector<int64_t>& key, const std::string& hex, Tier* tier) {
  *tier = Tier::Host;
  if (auto e = load_host(key, hex)) return e;
  *tier = Tier::Shared;
  if (auto read = start_shared_read(hex)) {
    bool finished;
    if (auto e = wait_shared(*read, key, hex, options_.shared_wait_seconds, &finished)) return e;
  }
  *tier = Tier::None;
  count_miss();
  return std::nullopt;
}

void DiskCache::store(const std::string& hex, std::function<std::optional<DiskEntry>()> make, KeyLock lock) {
  if (!enabled()) return;
  Job job;
  job.hex = hex;
  job.make = std::move(make);
  job.lock = std::move(lock);
  enqueue(std::move(job));
}

void DiskCache::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> g(mu_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void DiskCache::flush() {
  std::unique_lock<std::mutex> g(mu_);
  idle_.wait(g, [&] { return jobs_.empty() && !busy_; });
}

void DiskCache::writer_loop() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    wake_.wait(g, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing is left to write
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    g.unlock();
    std::string bytes = std::move(job.bytes);
    if (bytes.empty() && job.make) {
      std::optional<DiskEntry> e;
      try {
        e = job.make();
      } catch (const std::exception& ex) {
        report_once("serialize",
                    std::string("a program could not be serialised (") + ex.what() + "); it stays in memory only");
      }
      if (e) bytes = encode_entry(*e, options_.fingerprint);
      if (e && signing()) bytes = sign_entry(bytes, options_.signing_key);
    }
    if (!bytes.empty()) {
      struct Target {
        const std::string& dir;
        std::atomic<bool>& writable;
        int index;
        bool wanted;
      } targets[] = {{host_, host_writable_, 0, true}, {shared_, shared_writable_, 1, job.shared}};
      for (Target& t : targets) {
        if (t.dir.empty() || !t.wanted || !t.writable) continue;
        bool disable = false;
        bool ok = write_file(t.dir, job.hex, bytes, &disable);
        if (t.index == 0) job.lock.release();
        std::lock_guard<std::mutex> s(stats_mu_);
        if (ok) {
          ++stats_.writes;
          stats_.bytes_written += static_cast<int64_t>(bytes.size());
        } else {
          ++stats_.write_failures;
        }
        if (disable) t.writable = false;
      }
      for (int i = 0; i < 2; ++i) {
        const std::string& dir = i == 0 ? host_ : shared_;
        if (dir.empty()) continue;
        written_since_evict_[i] += static_cast<int64_t>(bytes.size());
        if (!scanned_[i] || written_since_evict_[i] > options_.max_bytes / 16) {
          scanned_[i] = true;
          written_since_evict_[i] = 0;
          evict(dir);
        }
      }
    }
    job.lock.release();
    g.lock();
    busy_ = false;
    if (jobs_.empty()) idle_.notify_all();
  }
}

bool DiskCache::write_file(const std::string& dir, const std::string& hex, const std::string& bytes, bool* disable) {
  // Host entries are private; shared ones are for every reader of the tier.
  const int err = write_file_atomically(dir, hex + kSuffix, hex, bytes, dir == host_ ? 0600 : 0644);
  if (!err) return true;
  // Read-only, no permission, full, over a file size limit: this tier is not
  // written again by this process.
  *disable = true;
  report_once("write-" + dir, "cannot write to " + dir + " (" + std::strerror(err) +
                                  "); programs are compiled and not cached there from now on");
  return false;
}

void DiskCache::evict(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  struct File {
    std::string path;
    int64_t bytes;
    int64_t atime;
  };
  std::vector<File> files;
  int64_t total = 0;
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    std::string path = join(dir, name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    bool entry = name.size() > 4 && name.compare(name.size() - 4, 4, kSuffix) == 0;
    // A temporary file an hour old belongs to a writer that died.
    if (name.rfind(".", 0) == 0 && name.find(".tmp.") != std::string::npos) {
      if (now.count() - st.st_mtime > 3600) unlink(path.c_str());
      continue;
    }
    if (!entry) continue;
    files.push_back({path, static_cast<int64_t>(st.st_size),
                     static_cast<int64_t>(st.st_atim.tv_sec) * 1000000000 + st.st_atim.tv_nsec});
    total += st.st_size;
  }
  closedir(d);
  if (total <= options_.max_bytes) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.atime < b.atime; });
  int64_t goal = options_.max_bytes / 8 * 7;
  int64_t evicted = 0;
  for (const File& f : files) {
    if (total <= goal) break;
    if (unlink(f.path.c_str()) == 0) {
      total -= f.bytes;
      ++evicted;
    }
  }
  std::lock_guard<std::mutex> g(stats_mu_);
  stats_.evicted += evicted;
}

DiskCacheStats DiskCache::stats() {
  std::lock_guard<std::mutex> g(stats_mu_);
  return stats_;
}

void DiskCache::reset_stats() {
  std::lock_guard<std::mutex> g(stats_mu_);
  stats_ = DiskCacheStats();
}

}  // namespace torch_pjrt::engine
