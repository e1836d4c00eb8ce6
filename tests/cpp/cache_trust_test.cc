// Who the persistent cache trusts: HMAC-SHA256 signing of entries
// (entry_signing.h), the owner and mode rules and the no-symlink reads and
// writes (cache_files.h), and how DiskCache applies them to its tiers.
// Tests that need another owner chown to an unused uid and run as root
// (as CI does); elsewhere they are skipped.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cache_files.h"
#include "engine/disk_cache.h"
#include "engine/entry_signing.h"

namespace torch_pjrt::engine {
namespace {

constexpr uid_t kOtherUid = 54321;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tpjrt_cache_trust_XXXXXX";
    const char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path = d ? d : "/tmp";
  }
  ~TempDir() {
    if (path != "/tmp") std::filesystem::remove_all(path);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string to_hex(const std::string& raw) {
  std::string out;
  char b[3];
  for (unsigned char c : raw) {
    std::snprintf(b, sizeof b, "%02x", c);
    out += b;
  }
  return out;
}

DiskEntry entry(int64_t tag) { return DiskEntry{{11, tag}, "aten::mm", "sig", std::string(300, 'x')}; }
const std::string kHex = "00000000000000aa";

DiskCacheOptions options(const std::string& host, const std::string& shared, const std::string& key = "") {
  DiskCacheOptions o;
  o.host_dir = host;
  o.shared_dir = shared;
  o.fingerprint = "format=1\nplatform=test\n";
  o.platform = "test";
  o.signing_key = key;
  return o;
}

void store(DiskCache& c, int64_t tag) {
  c.store(kHex, [tag] { return std::optional<DiskEntry>(entry(tag)); }, {});
  c.flush();
}

std::optional<DiskEntry> load(DiskCache& c, DiskCache::Tier* tier) { return c.load(entry(1).key, kHex, tier); }

// ---------------------------------------------------------------- signing

TEST(EntrySigning, HmacSha256MatchesRfc4231) {
  const std::string data = "what do ya want for nothing?";
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", data.data(), data.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(EntrySigning, OnlyTheSameBytesUnderTheSameKeyVerify) {
  const std::string bytes = encode_entry(entry(1), "fp");
  const std::string signed_bytes = sign_entry(bytes, "team key");
  EXPECT_EQ(signed_bytes.size(), bytes.size() + kSignatureTrailerBytes);
  EXPECT_TRUE(is_signed(signed_bytes));
  EXPECT_FALSE(is_signed(bytes));
  EXPECT_EQ(unsigned_size(signed_bytes), bytes.size());
  EXPECT_EQ(verify_entry(signed_bytes, "team key"), SignatureCheck::Valid);
  EXPECT_EQ(verify_entry(signed_bytes, "other key"), SignatureCheck::Invalid);
  EXPECT_EQ(verify_entry(bytes, "team key"), SignatureCheck::Unsigned);
  for (size_t i = 0; i < signed_bytes.size() - 8; i += 7) {  // every part, the MAC included
    std::string changed = signed_bytes;
    changed[i] ^= 1;
    EXPECT_EQ(verify_entry(changed, "team key"), SignatureCheck::Invalid) << i;
  }
  // The decoder reads a signed file as the entry it carries.
  std::string why;
  auto e = decode_entry(signed_bytes, "fp", &why);
  ASSERT_TRUE(e) << why;
  EXPECT_EQ(e->executable, entry(1).executable);
}

TEST(EntrySigning, KeyComesFromTheVariableOrTheFile) {
  TempDir dir;
  unsetenv("TORCH_PJRT_CACHE_KEY");
  unsetenv("TORCH_PJRT_CACHE_KEY_FILE");
  EXPECT_FALSE(SigningKey::from_environment().set());
  setenv("TORCH_PJRT_CACHE_KEY", "abc", 1);
  EXPECT_EQ(SigningKey::from_environment().secret, "abc");
  unsetenv("TORCH_PJRT_CACHE_KEY");
  spit(dir.path + "/key", "s3cret\n");
  setenv("TORCH_PJRT_CACHE_KEY_FILE", (dir.path + "/key").c_str(), 1);
  EXPECT_EQ(SigningKey::from_environment().secret, "s3cret");
  // A key that was asked for and cannot be read is a problem, never "no key".
  symlink((dir.path + "/key").c_str(), (dir.path + "/link").c_str());
  for (const char* bad : {"/link", "/missing"}) {
    setenv("TORCH_PJRT_CACHE_KEY_FILE", (dir.path + bad).c_str(), 1);
    SigningKey k = SigningKey::from_environment();
    EXPECT_FALSE(k.set()) << bad;
    EXPECT_NE(k.problem.find("cannot be used"), std::string::npos) << k.problem;
  }
  unsetenv("TORCH_PJRT_CACHE_KEY_FILE");
}

// ---------------------------------------------------------------- files

TEST(CacheFiles, DirectoriesAreTrustedAsSshTrustsKeyDirectories) {
  TempDir dir;
  const std::string d = dir.path + "/tier";
  ASSERT_TRUE(make_dirs(d, 0700));
  EXPECT_EQ(untrusted_dir_reason(d, true), "");
  chmod(d.c_str(), 0770);
  EXPECT_NE(untrusted_dir_reason(d, true).find("writable by group or others"), std::string::npos);
  EXPECT_EQ(untrusted_dir_reason(d, false), "");  // a shared tier trusts its entries' keys or owners
  chmod(d.c_str(), 0702);
  EXPECT_NE(untrusted_dir_reason(d, true), "");
  chmod(d.c_str(), 0700);
  symlink(d.c_str(), (dir.path + "/link").c_str());
  EXPECT_NE(untrusted_dir_reason(dir.path + "/link", true).find("symbolic link"), std::string::npos);
  EXPECT_NE(untrusted_dir_reason(dir.path + "/link", false).find("symbolic link"), std::string::npos);
  if (geteuid() == 0) {
    ASSERT_EQ(chown(d.c_str(), kOtherUid, kOtherUid), 0);
    EXPECT_NE(untrusted_dir_reason(d, true).find("owned by uid 54321"), std::string::npos);
  }
}

TEST(CacheFiles, ReadsRefuseLinksAndReportOwnerAndMode) {
  TempDir dir;
  const std::string f = dir.path + "/entry.tpc", link = dir.path + "/link.tpc";
  spit(f, "bytes");
  chmod(f.c_str(), 0600);
  symlink(f.c_str(), link.c_str());
  FileFacts facts;
  int error = 0;
  EXPECT_FALSE(read_file_nofollow(link, false, &facts, &error));
  EXPECT_EQ(error, ELOOP);
  auto bytes = read_file_nofollow(f, false, &facts, &error);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, "bytes");
  EXPECT_EQ(untrusted_file_reason(facts), "");
  chmod(f.c_str(), 0602);
  ASSERT_TRUE(read_file_nofollow(f, false, &facts, &error));
  EXPECT_NE(untrusted_file_reason(facts).find("writable"), std::string::npos);
  facts.mode = S_IFREG | 0600;
  facts.uid = geteuid() + 1;
  EXPECT_NE(untrusted_file_reason(facts).find("owned by uid"), std::string::npos);
}

TEST(CacheFiles, WritesNeverFollowALinkAtTheEntryOrTheTemporaryName) {
  TempDir dir;
  const std::string target = dir.path + "/precious";
  spit(target, "precious");
  const std::string tier = dir.path + "/tier";
  ASSERT_TRUE(make_dirs(tier, 0700));
  // A link at the final name is replaced, not written through.
  symlink(target.c_str(), (tier + "/e.tpc").c_str());
  ASSERT_EQ(write_file_atomically(tier, "e.tpc", "e", "new", 0600), 0);
  struct stat st;
  ASSERT_EQ(lstat((tier + "/e.tpc").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(slurp(tier + "/e.tpc"), "new");
  // Links at every temporary name this process could pick: none is opened.
  const std::string prefix = tier + "/.f.tmp." + std::to_string(getpid()) + ".";
  for (int n = 0; n < 4096; ++n) symlink(target.c_str(), (prefix + std::to_string(n)).c_str());
  EXPECT_EQ(write_file_atomically(tier, "f.tpc", "f", "new", 0600), EEXIST);
  EXPECT_EQ(slurp(target), "precious");
  EXPECT_NE(access((tier + "/f.tpc").c_str(), F_OK), 0);
}

// ---------------------------------------------------------------- tiers

TEST(DiskCacheTrust, HostTierIsMadePrivate) {
  TempDir dir;
  DiskCache c(options(dir.path + "/host", ""));
  store(c, 1);
  struct stat st;
  ASSERT_EQ(lstat((dir.path + "/host").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(lstat(c.host_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(lstat((c.host_path() + "/" + kHex + ".tpc").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(DiskCacheTrust, HostTierWritableByOthersIsRefusedOnce) {
  TempDir dir;
  const std::string host = dir.path + "/host";
  ASSERT_TRUE(make_dirs(host, 0700));
  chmod(host.c_str(), 0777);
  testing::internal::CaptureStderr();
  DiskCache c(options(host, ""));
  DiskCache::Tier tier;
  EXPECT_FALSE(load(c, &tier));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(c.enabled());
  EXPECT_NE(c.host_refusal().find("writable by group or others"), std::string::npos) << c.host_refusal();
  EXPECT_NE(err.find("refused the host compile cache directory " + host), std::string::npos) << err;
  EXPECT_EQ(c.stats().refused_untrusted, 1);
}

TEST(DiskCacheTrust, HostEntryOfAnotherOwnerOrWritableByOthersIsSkipped) {
  TempDir dir;
  DiskCache c(options(dir.path, ""));
  store(c, 1);
  const std::string path = c.host_path() + "/" + kHex + ".tpc";
  DiskCache::Tier tier;
  ASSERT_TRUE(load(c, &tier));
  chmod(path.c_str(), 0606);
  EXPECT_FALSE(load(c, &tier));
  EXPECT_EQ(c.stats().refused_untrusted, 1);
  EXPECT_EQ(access(path.c_str(), F_OK), 0);  // skipped, not removed
  if (geteuid() == 0) {
    chmod(path.c_str(), 0600);
    ASSERT_EQ(chown(path.c_str(), kOtherUid, kOtherUid), 0);
    EXPECT_FALSE(load(c, &tier));
    EXPECT_EQ(c.stats().refused_untrusted, 2);
  }
  store(c, 1);  // the compile's write replaces it
  EXPECT_TRUE(load(c, &tier));
}

TEST(DiskCacheTrust, LinkInPlaceOfAnEntryIsNotFollowed) {
  TempDir dir;
  DiskCache c(options(dir.path + "/host", ""));
  const std::string elsewhere = dir.path + "/valid.tpc";
  spit(elsewhere, encode_entry(entry(1), "format=1\nplatform=test\n"));
  const std::string path = c.host_path() + "/" + kHex + ".tpc";
  ASSERT_EQ(symlink(elsewhere.c_str(), path.c_str()), 0);
  DiskCache::Tier tier;
  EXPECT_FALSE(load(c, &tier));
  EXPECT_EQ(c.stats().refused_untrusted, 1);
  const std::string before = slurp(elsewhere);
  store(c, 1);
  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(slurp(elsewhere), before);
}

TEST(DiskCacheTrust, SharedTierWithAKeyLoadsOnlyWhatVerifies) {
  TempDir dir;
  const std::string shared = dir.path + "/shared";
  {
    DiskCache writer(options(dir.path + "/a", shared, "team key"));
    store(writer, 1);
  }
  DiskCache::Tier tier;
  {
    DiskCache reader(options(dir.path + "/b", shared, "team key"));
    ASSERT_TRUE(load(reader, &tier));
    EXPECT_EQ(tier, DiskCache::Tier::Shared);
    if (geteuid() == 0) {  // a teammate's entry: the key, not the owner, decides
      ASSERT_EQ(chown((reader.shared_path() + "/" + kHex + ".tpc").c_str(), kOtherUid, kOtherUid), 0);
      DiskCache teammate(options("", shared, "team key"));
      EXPECT_TRUE(load(teammate, &tier));
    }
  }
  DiskCache other_key(options("", shared, "another key"));
  EXPECT_FALSE(load(other_key, &tier));
  EXPECT_EQ(other_key.stats().bad_signature, 1);

  const std::string path = other_key.shared_path() + "/" + kHex + ".tpc";
  const std::string good = slurp(path);
  DiskCache keyed(options("", shared, "team key"));
  // Without its trailer: a valid unsigned entry, refused.
  spit(path, good.substr(0, unsigned_size(good)));
  EXPECT_FALSE(load(keyed, &tier));
  // One payload byte changed and the checksum recomputed: refused.
  std::string body = good.substr(0, unsigned_size(good) - 8);
  body[body.size() - 10] ^= 1;
  uint64_t sum = fnv_bytes(body.data(), body.size());
  std::string changed = body;
  for (int i = 0; i < 8; ++i) changed.push_back(static_cast<char>(sum >> (8 * i)));
  std::string why;
  ASSERT_TRUE(decode_entry(changed, "format=1\nplatform=test\n", &why)) << why;
  spit(path, changed + good.substr(unsigned_size(good)));
  EXPECT_FALSE(load(keyed, &tier));
  EXPECT_EQ(keyed.stats().bad_signature, 2);
  EXPECT_EQ(keyed.stats().corrupt_dropped, 0);
}

TEST(DiskCacheTrust, SharedTierWithoutAKeyTrustsOnlyThisUsersFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
  TempDir dir;
  const std::string shared = dir.path + "/shared";
  DiskCache c(options("", shared));
  store(c, 1);
  DiskCache::Tier tier;
  ASSERT_TRUE(load(c, &tier));
  ASSERT_EQ(chown((c.shared_path() + "/" + kHex + ".tpc").c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_FALSE(load(c, &tier));
  EXPECT_EQ(c.stats().refused_untrusted, 1);
}

TEST(DiskCacheTrust, UnreadableKeyRefusesTheSharedTier) {
  TempDir dir;
  DiskCacheOptions o = options(dir.path + "/host", dir.path + "/shared");
  o.key_problem = "the key file /nowhere (TORCH_PJRT_CACHE_KEY_FILE) cannot be used: No such file or directory";
  testing::internal::CaptureStderr();
  DiskCache c(o);
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(c.shared_path().empty());
  EXPECT_FALSE(c.host_path().empty());
  EXPECT_NE(c.shared_refusal().find("cannot be used"), std::string::npos);
}

}  // namespace
}  // namespace torch_pjrt::engine
