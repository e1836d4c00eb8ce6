// The persistent tiers of the program cache: a host directory and an
// optional shared one (NFS, a bucket mount), behind the in-memory
// ProgramCache.
//
// Layout. Each tier root holds one subdirectory per plugin fingerprint
// (`<platform>-<16 hex digits>`, with a FINGERPRINT file saying what it
// hashes: the entry format, plugin platform and version, C API version, the
// plugin file and this library's own build), so an entry from another plugin,
// version or build is never looked at, and an upgrade starts a fresh
// subdirectory. In it each program is one file `<key hash>.tpc`:
//
//   "TPJRTPC1"                         8-byte magic
//   u32 format version, u32 fingerprint length, fingerprint text
//   u64 key word count, the key words (i64 each)
//   u64 length + summary text          (the ops, for `cache ls`)
//   u64 length + signature text        (Signature::serialize)
//   u64 length + executable bytes      (Executable::serialize)
//   u64 FNV-1a 64 of every byte before it
//
// all little-endian. A file whose magic, version, fingerprint, lengths or
// checksum do not hold is reported once per process, removed, and treated
// as a miss: it is never loaded. A file whose key words differ from the
// wanted key (a 64-bit hash collision) is a plain miss.
//
// Trust (cache_files.h, entry_signing.h). An entry is a program this
// process will run, so a tier is only read where it cannot have been written
// by someone else:
// - the host tier is private: its root and fingerprint directory are made
//   0700 and entries 0600; one that is a symbolic link, owned by another
//   user or writable by group or others is refused at open (said once, on
//   stderr, naming it) and the process runs without it;
// - an entry of the host tier, or of the shared tier without a key, is
//   loaded only when it is a regular file of this user, writable by no
//   group and no others;
// - with TORCH_PJRT_CACHE_KEY (or _FILE) every entry written carries an
//   HMAC-SHA256 over the whole file, and a shared-tier entry is loaded only
//   when it verifies (whoever owns it); a host-tier entry that is signed
//   must verify too;
// - files are opened with O_NOFOLLOW and checked through their descriptor.
// A refused entry is a miss, counted (refused_untrusted, bad_signature) and
// reported once; it is not removed (it may be a teammate's), and the
// compile's write replaces it.
//
// Safety. Writes go to a temporary file in the same directory, are fsynced
// and renamed over the entry, so a reader sees a whole old file, a whole new
// one or none; a crash leaves at most a temporary file, which a later
// eviction removes. Any number of processes may read, write and evict one
// directory at once: a reader reads a whole file through one descriptor,
// which an eviction's unlink does not disturb. Two processes that miss the
// same key serialise on `<key hash>.lock` (flock) where the file system
// allows it and re-check after taking it; otherwise both compile and one
// rename wins. A tier that cannot be written (read-only, full) is reported
// once and no longer written; lookups go on.
//
// Eviction. After writes add more than 1/16 of the cap, the writer lists the
// tier and deletes the least recently used entries (by access time, which
// every hit sets) until it holds at most 7/8 of the cap.
//
// Thread-safety: all methods may be called from any thread. Writes are done
// by one background thread, so a slow mount never stalls the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/cache_files.h"

namespace torch_pjrt::engine {

// One cache entry as stored on disk.
struct DiskEntry {
  std::vector<int64_t> key;
  std::string summary;
  std::string signature;
  std::string executable;
};

// Encodes `e` into the file format above, with `fingerprint` in its header.
std::string encode_entry(const DiskEntry& e, const std::string& fingerprint);
// Decodes a file. Returns std::nullopt and says why in `*why` when it is not
// a whole, intact entry written for `fingerprint`.
std::optional<DiskEntry> decode_entry(const std::string& bytes, const std::string& fingerprint, std::string* why);

// An entry file's header and the sizes of its parts: what `python -m
// torch_pjrt cache ls` shows, and how it tells a well-formed file.
struct DiskEntryInfo {
  std::string fingerprint;  // the header's text, whichever plugin or build wrote it
  uint64_t key_words = 0;
  std::string summary;
  uint64_t signature_bytes = 0;
  uint64_t executable_bytes = 0;
  uint64_t file_bytes = 0;
  bool signed_entry = false;  // it ends with a signature trailer (entry_signing.h; not verified here)
};
// Reads the entry file at `path` without loading it (nor following a
// symbolic link). std::nullopt when it cannot be read or its magic, format
// version or lengths do not hold; the checksum and the signature are not
// checked (decode_entry and DiskCache do, and a load drops the file).
std::optional<DiskEntryInfo> read_entry_info(const std::string& path);

struct DiskCacheOptions {
  std::string host_dir;    // tier root; empty: no host tier
  std::string shared_dir;  // tier root; empty: no shared tier
  int64_t max_bytes = int64_t{4} << 30;
  // What the fingerprint directory hashes (see above); its text goes into
  // every file header.
  std::string fingerprint;
  std::string platform = "plugin";
  // How long a lookup waits for the shared tier before it compiles too (a
  // read still running then races the compile: the first to finish wins).
  double shared_wait_seconds = 0.1;
  // The HMAC key of signed entries (entry_signing.h): empty for none.
  // `key_problem`: a key was asked for and cannot be read; the shared tier
  // is then refused.
  std::string signing_key;
  std::string key_problem;

  // The options TORCH_PJRT_CACHE_DIR (default $XDG_CACHE_HOME/torch_pjrt or
  // ~/.cache/torch_pjrt; "0", "off", "false" or "" turns it off),
  // TORCH_PJRT_SHARED_CACHE_DIR, TORCH_PJRT_CACHE_MAX_BYTES (a byte count,
  // or with a K, M or G suffix) and TORCH_PJRT_CACHE_KEY(_FILE) ask for.
  static DiskCacheOptions from_environment();
};

struct DiskCacheStats {
  int64_t host_hits = 0, shared_hits = 0, misses = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t writes = 0, write_failures = 0;
  int64_t corrupt_dropped = 0, evicted = 0;
  int64_t lock_waits = 0;  // lookups that waited for another process's compile
  // Entry files not loaded for their owner, mode or type (a symbolic link),
  // and tiers refused at open for theirs.
  int64_t refused_untrusted = 0;
  // Entries not loaded because their HMAC is missing (shared tier, with a
  // key) or does not verify.
  int64_t bad_signature = 0;
  double read_seconds = 0;
};

class DiskCache {
 public:
  explicit DiskCache(DiskCacheOptions options);
  // Finishes the pending writes.
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;

  bool enabled() const { return !host_.empty() || !shared_.empty(); }
  // The fingerprint subdirectory of the host tier ("" without one).
  const std::string& host_path() const { return host_; }
  const std::string& shared_path() const { return shared_; }
  // Why a tier was refused at open ("" when it was not, or is not set).
  const std::string& host_refusal() const { return host_refusal_; }
  const std::string& shared_refusal() const { return shared_refusal_; }
  // Whether entries are signed, and shared ones loaded only if they verify.
  bool signing() const { return !options_.signing_key.empty(); }
  double shared_head_start() const { return options_.shared_wait_seconds; }

  // Where an entry was found.
  enum class Tier { None, Host, Shared };
  // The entry of `key` (whose hex hash is `hex`), from the host tier, else
  // from the shared one (waiting for it up to shared_wait_seconds, without
  // compiling meanwhile; copied to the host tier in the background). Counts
  // a hit or a miss.
  std::optional<DiskEntry> load(const std::vector<int64_t>& key, const std::string& hex, Tier* tier);

  // The parts of load(), for a caller that races the shared tier against
  // its own compile. load_host counts a hit, not a miss; count_miss() counts
  // the lookup that ended in a compile. `*refused` (when given) says whether
  // a file was there and refused (not trusted), so the caller need not look
  // again.
  std::optional<DiskEntry> load_host(const std::vector<int64_t>& key, const std::string& hex, bool* refused = nullptr);
  void count_miss();
  // A read of one shared-tier file on a thread of its own, which touches
  // nothing but this object (so it may outlive the lookup that started it).
  struct SharedRead {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<std::string> bytes;
    FileFacts facts;
    int error = 0;
  };
  // Starts reading `hex` from the shared tier; nullptr without one.
  std::shared_ptr<SharedRead> start_shared_read(const std::string& hex);
  // Waits up to `seconds` for the read. `*finished` says whether it ended;
  // then the intact entry of `key` is returned (counted as a shared hit and
  // copied to the host tier), or nullopt for a missing, damaged (dropped)
  // or colliding file.
  std::optional<DiskEntry> wait_shared(SharedRead& read, const std::vector<int64_t>& key, const std::string& hex,
                                       double seconds, bool* finished);

  // A held per-key lock of the host tier; released when destroyed (or, once
  // handed to store(), after the entry is written).
  class KeyLock {
   public:
    KeyLock() = default;
    explicit KeyLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    KeyLock(KeyLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
    KeyLock& operator=(KeyLock&& o) noexcept;
    ~KeyLock();
    bool held() const { return fd_ >= 0; }
    // Removes the lock file (while held: see disk_cache.cc) and releases it.
    void release();

   private:
    int fd_ = -1;
    std::string path_;
  };
  // Takes the lock of `hex`, blocking while another process holds it.
  // `*waited` says whether it had to wait (then re-check with load). An
  // unheld lock when the tier cannot lock.
  KeyLock lock(const std::string& hex, bool* waited);

  // Writes an entry to every tier in the background; `make` builds it there
  // (serialising an executable takes time too). Releases `lock` once the
  // host tier holds the entry.
  void store(const std::string& hex, std::function<std::optional<DiskEntry>()> make, KeyLock lock);
  // Blocks until every store so far is written (or failed).
  void flush();

  // Removes the damaged entry `hex` of `tier` (one that decoded but that
  // the plugin or the signature reader refused), counting and reporting it.
  void drop(Tier tier, const std::string& hex, const std::string& why);

  DiskCacheStats stats();
  void reset_stats();
  // Says `message` on stderr once per `kind` for this process.
  void report_once(const std::string& kind, const std::string& message);

 private:
  struct Job {
    std::string hex;
    std::function<std::optional<DiskEntry>()> make;
    std::string bytes;  // already encoded (a shared hit copied to the host tier)
    KeyLock lock;
    bool shared = true;
  };
  // The fingerprint subdirectory of tier root `root`, made and checked; ""
  // (and `*refusal` says why, when it is not just absent) when unusable.
  std::string prepare(const std::string& root, bool shared, std::string* refusal);
  // Whether `bytes`, read from `path` of `tier` (or not: `error`), may be
  // loaded; counts and reports a refusal.
  bool trusted(Tier tier, const std::string& path, const std::optional<std::string>& bytes, const FileFacts& facts,
               int error);
  std::optional<DiskEntry> load_host_file(const std::vector<int64_t>& key, const std::string& hex, bool* refused);
  void drop_corrupt(const std::string& dir, const std::string& hex, const std::string& why);
  bool write_file(const std::string& dir, const std::string& hex, const std::string& bytes, bool* disable);
  void evict(const std::string& dir);
  void writer_loop();
  void enqueue(Job job);

  DiskCacheOptions options_;
  std::string host_, shared_;  // fingerprint subdirectories
  std::string host_refusal_, shared_refusal_;
  std::atomic<bool> host_writable_{true}, shared_writable_{true};

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Job> jobs_;
  bool busy_ = false, stop_ = false;
  std::thread writer_;
  int64_t written_since_evict_[2] = {0, 0};
  bool scanned_[2] = {false, false};

  std::mutex stats_mu_;
  DiskCacheStats stats_;
  std::vector<std::string> reported_;
};

// FNV-1a 64 over bytes (the file checksum).
uint64_t fnv_bytes(const void* data, size_t n, uint64_t h = 1469598103934665603ull);

}  // namespace torch_pjrt::engine
