// Signed cache entries: HMAC-SHA256 (OpenSSL's libcrypto) over a whole
// entry file, with the key a team shares through TORCH_PJRT_CACHE_KEY.
//
// A signed file is the entry's bytes (the format of disk_cache.h, checksum
// included) followed by a 40-byte trailer:
//
//   32 bytes  HMAC-SHA256(key, every byte of the entry before the trailer)
//    8 bytes  "TPJRTSG1"
//
// An unsigned file has no trailer. The trailer is found from the end, so an
// entry's own lengths never have to be trusted to find it; a checksum that
// happened to spell the magic makes an unsigned file look signed, which
// fails verification: the rule fails closed.
//
// The key is TORCH_PJRT_CACHE_KEY's bytes or, when that is unset or empty,
// the contents of the file TORCH_PJRT_CACHE_KEY_FILE names (less trailing
// newlines). A key file that cannot be read is a problem, not "no key": the
// shared tier is then refused rather than trusted by ownership.
//
// Thread-safety: everything here is a pure function of its arguments (or of
// the environment, read once per call) and may be called from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace torch_pjrt::engine {

constexpr size_t kSignatureTrailerBytes = 40;

struct SigningKey {
  std::string secret;   // empty: no key
  std::string problem;  // non-empty: a key was asked for and could not be read (why)
  std::string source;   // "TORCH_PJRT_CACHE_KEY", "TORCH_PJRT_CACHE_KEY_FILE=<path>" or ""

  bool set() const { return !secret.empty(); }
  // The key the environment asks for (see above).
  static SigningKey from_environment();
};

// HMAC-SHA256 of `n` bytes at `data` (32 raw bytes).
std::string hmac_sha256(const std::string& key, const void* data, size_t n);

// Whether `bytes` ends with a signature trailer.
bool is_signed(const std::string& bytes);
// How many bytes of `bytes` are the entry: all of them, less a trailer.
size_t unsigned_size(const std::string& bytes);
// `entry` with its trailer for `key` appended (a signed file's bytes).
std::string sign_entry(const std::string& entry, const std::string& key);

enum class SignatureCheck {
  Valid,     // signed, and the HMAC is that of `key`
  Invalid,   // signed, with another key or over other bytes
  Unsigned,  // no trailer
};
// Verifies a file's trailer in constant time (CRYPTO_memcmp).
SignatureCheck verify_entry(const std::string& bytes, const std::string& key);
const char* signature_check_name(SignatureCheck c);

}  // namespace torch_pjrt::engine
