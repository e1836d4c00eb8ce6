// The persistent cache tiers on temporary directories: the file format and
// its checks, hits across instances (as across processes), the shared tier,
// eviction by access time and the per-key lock.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/disk_cache.h"

namespace torch_pjrt::engine {
namespace {

// A fresh directory, removed with everything in it at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tpjrt_disk_cache_XXXXXX";
    const char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path = d ? d : "/tmp";
  }
  ~TempDir() {
    if (path != "/tmp") std::filesystem::remove_all(path);
  }
  operator const std::string&() const { return path; }
};

DiskEntry entry(int64_t tag, size_t payload = 100) {
  return DiskEntry{{7, tag, -3}, "aten::add.Tensor", "signature " + std::to_string(tag),
                   std::string(payload, static_cast<char>('a' + tag % 26))};
}

DiskCacheOptions options(const std::string& host, const std::string& shared = "") {
  DiskCacheOptions o;
  o.host_dir = host;
  o.shared_dir = shared;
  o.fingerprint = "format=1\nplatform=test\n";
  o.platform = "test";
  return o;
}

std::string hex(int64_t tag) { return "00000000000000" + std::to_string(10 + tag); }

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void store(DiskCache& c, int64_t tag, size_t payload = 100) {
  c.store(hex(tag), [tag, payload] { return std::optional<DiskEntry>(entry(tag, payload)); }, {});
  c.flush();
}

TEST(DiskCacheFormat, RoundTrips) {
  std::string bytes = encode_entry(entry(1), "fp");
  std::string why;
  auto e = decode_entry(bytes, "fp", &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->key, entry(1).key);
  EXPECT_EQ(e->summary, "aten::add.Tensor");
  EXPECT_EQ(e->signature, "signature 1");
  EXPECT_EQ(e->executable, entry(1).executable);
}

TEST(DiskCacheFormat, EveryTruncationAndEveryBitFlipIsRefused) {
  std::string bytes = encode_entry(entry(2, 40), "fp");
  std::string why;
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode_entry(bytes.substr(0, n), "fp", &why)) << n;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; bit += 3) {
      std::string flipped = bytes;
      flipped[i] ^= static_cast<char>(1 << bit);
      EXPECT_FALSE(decode_entry(flipped, "fp", &why)) << i << " " << bit;
    }
  EXPECT_FALSE(decode_entry(bytes + "x", "fp", &why));
}

TEST(DiskCacheFormat, AnotherFingerprintIsRefused) {
  std::string why;
  EXPECT_FALSE(decode_entry(encode_entry(entry(3), "plugin 1.0"), "plugin 1.1", &why));
  EXPECT_NE(why.find("another plugin"), std::string::npos) << why;
}

// read_entry_info (what `cache ls` shows): any fingerprint's header, the
// sizes of the parts; a file whose lengths or version do not hold is none.
TEST(DiskCacheFormat, EntryInfoReadsTheHeaderOfAWellFormedFile) {
  TempDir dir;
  const std::string path = dir.path + "/entry.tpc";
  auto write = [&](const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; };
  const std::string bytes = encode_entry(entry(4, 1000), "plugin 1.0");
  write(bytes);
  auto info = read_entry_info(path);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->fingerprint, "plugin 1.0");
  EXPECT_EQ(info->key_words, 3u);
  EXPECT_EQ(info->summary, "aten::add.Tensor");
  EXPECT_EQ(info->signature_bytes, std::string("signature 4").size());
  EXPECT_EQ(info->executable_bytes, 1000u);
  EXPECT_EQ(info->file_bytes, bytes.size());

  for (size_t n : {size_t{0}, size_t{7}, size_t{12}, bytes.size() / 2, bytes.size() - 1}) {
    write(bytes.substr(0, n));
    EXPECT_FALSE(read_entry_info(path)) << n;
  }
  write(bytes + "x");
  EXPECT_FALSE(read_entry_info(path));
  std::string version2 = bytes;
  version2[8] = 2;
  write(version2);
  EXPECT_FALSE(read_entry_info(path));
  std::string flipped = bytes;  // the checksum is the loader's to check
  flipped[bytes.size() - 20] ^= 1;
  write(flipped);
  EXPECT_TRUE(read_entry_info(path));
  EXPECT_FALSE(read_entry_info(dir.path + "/missing.tpc"));
  EXPECT_FALSE(read_entry_info(dir.path));  // a directory
}

TEST(DiskCache, AnotherInstanceFindsWhatOneWrote) {
  TempDir root;
  {
    DiskCache a(options(root));
    ASSERT_TRUE(a.enabled());
    store(a, 4);
    EXPECT_EQ(a.stats().writes, 1);
  }
  DiskCache b(options(root));
  DiskCache::Tier tier;
  auto e = b.load(entry(4).key, hex(4), &tier);
  ASSERT_TRUE(e);
  EXPECT_EQ(tier, DiskCache::Tier::Host);
  EXPECT_EQ(e->executable, entry(4).executable);
  EXPECT_FALSE(b.load(entry(5).key, hex(5), &tier));
  EXPECT_EQ(tier, DiskCache::Tier::None);
  // The same hash with other key words (a collision) is a miss, not damage.
  EXPECT_FALSE(b.load({1, 2, 3}, hex(4), &tier));
  EXPECT_EQ(b.stats().corrupt_dropped, 0);
  EXPECT_EQ(b.stats().host_hits, 1);
  EXPECT_EQ(b.stats().misses, 2);
}

TEST(DiskCache, DamagedFileIsRemovedCountedAndMissed) {
  TempDir root;
  DiskCache c(options(root));
  store(c, 6);
  std::string path = c.host_path() + "/" + hex(6) + ".tpc";
  ASSERT_TRUE(exists(path));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.put('\x7f');
  }
  DiskCache::Tier tier;
  EXPECT_FALSE(c.load(entry(6).key, hex(6), &tier));
  EXPECT_FALSE(exists(path));
  EXPECT_EQ(c.stats().corrupt_dropped, 1);
}

TEST(DiskCache, SharedHitIsCopiedToTheHostTier) {
  TempDir shared, host;
  {
    DiskCache writer(options(shared));
    store(writer, 7);
  }
  DiskCache c(options(host, shared));
  DiskCache::Tier tier;
  ASSERT_TRUE(c.load(entry(7).key, hex(7), &tier));
  EXPECT_EQ(tier, DiskCache::Tier::Shared);
  c.flush();
  ASSERT_TRUE(c.load(entry(7).key, hex(7), &tier));
  EXPECT_EQ(tier, DiskCache::Tier::Host);
}

TEST(DiskCache, StoreWritesBothTiers) {
  TempDir shared, host;
  DiskCache c(options(host, shared));
  store(c, 8);
  EXPECT_TRUE(exists(c.host_path() + "/" + hex(8) + ".tpc"));
  EXPECT_TRUE(exists(c.shared_path() + "/" + hex(8) + ".tpc"));
}

TEST(DiskCache, EvictsTheLeastRecentlyUsedBeyondTheCap) {
  TempDir root;
  DiskCacheOptions o = options(root);
  size_t one = encode_entry(entry(0, 1000), o.fingerprint).size();
  o.max_bytes = static_cast<int64_t>(one * 3 + one / 2);
  DiskCache c(o);
  DiskCache::Tier tier;
  for (int t = 0; t < 3; ++t) {
    store(c, t, 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(c.load(entry(0, 1000).key, hex(0), &tier));  // 0 is now used more recently than 1
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  store(c, 3, 1000);
  auto path = [&](int t) { return c.host_path() + "/" + hex(t) + ".tpc"; };
  EXPECT_TRUE(exists(path(0)));
  EXPECT_FALSE(exists(path(1)));
  EXPECT_TRUE(exists(path(2)));
  EXPECT_TRUE(exists(path(3)));
  EXPECT_EQ(c.stats().evicted, 1);
}

TEST(DiskCache, KeyLockMakesASecondHolderWait) {
  TempDir root;
  DiskCache a(options(root)), b(options(root));
  bool waited = false;
  DiskCache::KeyLock first = a.lock(hex(9), &waited);
  ASSERT_TRUE(first.held());
  EXPECT_FALSE(waited);
  std::atomic<bool> got{false};
  bool second_waited = false;
  std::thread t([&] {
    DiskCache::KeyLock second = b.lock(hex(9), &second_waited);
    got = second.held();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got);
  first.release();
  t.join();
  EXPECT_TRUE(got);
  EXPECT_TRUE(second_waited);
}

TEST(DiskCache, DirectoryThatCannotBeMadeDisablesTheTier) {
  TempDir root;
  std::string file = root.path + "/a_file";
  std::ofstream(file) << "x";
  DiskCache c(options(file + "/cache"));
  EXPECT_FALSE(c.enabled());
  DiskCache::Tier tier;
  EXPECT_FALSE(c.load(entry(1).key, hex(1), &tier));
}

}  // namespace
}  // namespace torch_pjrt::engine
