#include "engine/entry_signing.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace torch_pjrt::engine {

namespace {

constexpr char kTrailerMagic[8] = {'T', 'P', 'J', 'R', 'T', 'S', 'G', '1'};
constexpr size_t kMacBytes = 32;
static_assert(kMacBytes + sizeof kTrailerMagic == kSignatureTrailerBytes);

// The whole file at `path` (at most 64 KiB: a key, not data), through a
// descriptor that does not follow a symbolic link in the last component.
bool read_key_file(const std::string& path, std::string* out, std::string* why) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || out->size() > (1u << 16)) {
      *why = n < 0 ? std::strerror(errno) : "longer than 64 KiB";
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  while (!out->empty() && (out->back() == '\n' || out->back() == '\r')) out->pop_back();
  if (out->empty()) *why = "empty";
  return !out->empty();
}

}  // namespace

SigningKey SigningKey::from_environment() {
  SigningKey k;
  if (const char* v = std::getenv("TORCH_PJRT_CACHE_KEY"); v && *v) {
    k.secret = v;
    k.source = "TORCH_PJRT_CACHE_KEY";
    return k;
  }
  const char* path = std::getenv("TORCH_PJRT_CACHE_KEY_FILE");
  if (!path || !*path) return k;
  k.source = std::string("TORCH_PJRT_CACHE_KEY_FILE=") + path;
  std::string why;
  if (!read_key_file(path, &k.secret, &why)) {
    k.secret.clear();
    k.problem = "the key file " + std::string(path) + " (TORCH_PJRT_CACHE_KEY_FILE) cannot be used: " + why;
  }
  return k;
}

std::string hmac_sha256(const std::string& key, const void* data, size_t n) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), static_cast<const unsigned char*>(data), n, mac,
            &len) ||
      len != kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool is_signed(const std::string& bytes) {
  return bytes.size() >= kSignatureTrailerBytes &&
         std::memcmp(bytes.data() + bytes.size() - sizeof kTrailerMagic, kTrailerMagic, sizeof kTrailerMagic) == 0;
}

size_t unsigned_size(const std::string& bytes) {
  return is_signed(bytes) ? bytes.size() - kSignatureTrailerBytes : bytes.size();
}

std::string sign_entry(const std::string& entry, const std::string& key) {
  std::string out = entry;
  out += hmac_sha256(key, entry.data(), entry.size());
  out.append(kTrailerMagic, sizeof kTrailerMagic);
  return out;
}

SignatureCheck verify_entry(const std::string& bytes, const std::string& key) {
  if (!is_signed(bytes)) return SignatureCheck::Unsigned;
  const size_t body = bytes.size() - kSignatureTrailerBytes;
  const std::string want = hmac_sha256(key, bytes.data(), body);
  return CRYPTO_memcmp(want.data(), bytes.data() + body, kMacBytes) == 0 ? SignatureCheck::Valid
                                                                         : SignatureCheck::Invalid;
}

const char* signature_check_name(SignatureCheck c) {
  switch (c) {
    case SignatureCheck::Valid:
      return "valid";
    case SignatureCheck::Invalid:
      return "invalid";
    case SignatureCheck::Unsigned:
      return "unsigned";
  }
  return "?";
}

}  // namespace torch_pjrt::engine
