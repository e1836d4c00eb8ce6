// The file-system rules of the persistent compile cache (disk_cache.h): who
// may have written a directory or an entry for it to be trusted, and how
// files are read and written so that no symbolic link is followed and no
// reader sees half a file.
//
// Trust, as ssh has it for its keys:
// - a private directory (the host tier, its fingerprint subdirectory) is a
//   real directory (lstat: not a symbolic link), owned by the effective
//   user and writable by no group and no others;
// - a shared directory need only be a real directory: its entries are
//   trusted by their signature (entry_signing.h) or by their owner;
// - an entry file is trusted by ownership when it is a regular file owned by
//   the effective user and writable by no group and no others.
//
// Reads open with O_NOFOLLOW and check what fstat says of that descriptor,
// so the file checked is the file read. Writes go to a new temporary file
// in the entry's own directory (O_CREAT | O_EXCL | O_NOFOLLOW), are fsynced
// and renamed within that directory; rename replaces a link at the final
// name rather than writing through it.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace torch_pjrt::engine {

// What fstat said of a file that was read.
struct FileFacts {
  uid_t uid = 0;
  mode_t mode = 0;
};

// Why a file with `facts` is not trusted by ownership ("" when it is).
std::string untrusted_file_reason(const FileFacts& facts);

// Why the directory `path` may not be used as a tier directory ("" when it
// may); `private_dir` asks for the host tier's rules.
std::string untrusted_dir_reason(const std::string& path, bool private_dir);

// Makes `path` and its missing parents; the parents with mode 0755, `path`
// itself with `mode` (both less the umask). True when it exists afterwards
// (whatever its mode: untrusted_dir_reason says whether it may be used).
bool make_dirs(const std::string& path, mode_t mode);

// Reads the regular file at `path` whole through one descriptor opened with
// O_NOFOLLOW, and fills `*facts` from fstat. `touch` sets its access time
// (the eviction order) through that descriptor. nullopt when it cannot be
// read; `*error` is then errno (ELOOP for a symbolic link, EINVAL for a
// file that is not regular), and 0 otherwise.
std::optional<std::string> read_file_nofollow(const std::string& path, bool touch, FileFacts* facts, int* error);

// Writes `bytes` to `dir`/`name` with `mode` by way of a new temporary file
// `dir`/.`stem`.tmp.<pid>.<n> (a name in use, a planted link included, is
// skipped for the next n). Returns 0, or the errno of what failed (the
// temporary file is then removed).
int write_file_atomically(const std::string& dir, const std::string& name, const std::string& stem,
                          const std::string& bytes, mode_t mode);

}  // namespace torch_pjrt::engine
