#include "engine/cache_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace torch_pjrt::engine {

namespace {

std::string octal(mode_t mode) {
  char s[8];
  std::snprintf(s, sizeof s, "%04o", static_cast<unsigned>(mode & 07777));
  return s;
}

std::string owner_reason(uid_t uid) {
  return "it is owned by uid " + std::to_string(uid) + ", not by this user (uid " + std::to_string(geteuid()) + ")";
}

// Writes all of `bytes` to `fd`; 0 or errno.
int write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

std::string untrusted_file_reason(const FileFacts& facts) {
  if (!S_ISREG(facts.mode)) return "it is not a regular file";
  if (facts.uid != geteuid()) return owner_reason(facts.uid);
  if (facts.mode & (S_IWGRP | S_IWOTH)) return "it is writable by group or others (mode " + octal(facts.mode) + ")";
  return "";
}

std::string untrusted_dir_reason(const std::string& path, bool private_dir) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return std::string("it cannot be examined (") + std::strerror(errno) + ")";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link (name the directory it points to instead)";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (!private_dir) return "";
  if (st.st_uid != geteuid()) return owner_reason(st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "it is writable by group or others (mode " + octal(st.st_mode) + "; chmod go-w fixes it)";
  return "";
}

bool make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return false;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode);
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(path.substr(0, slash), 0755)) return false;
  return mkdir(path.c_str(), mode) == 0 || errno == EEXIST;
}

std::optional<std::string> read_file_nofollow(const std::string& path, bool touch, FileFacts* facts, int* error) {
  *error = 0;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *error = errno;
    return std::nullopt;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = EINVAL;
    close(fd);
    return std::nullopt;
  }
  facts->uid = st.st_uid;
  facts->mode = st.st_mode;
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = errno;
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (touch) {
    struct timespec times[2];
    times[0].tv_nsec = UTIME_NOW;  // access time: the eviction order
    times[1].tv_nsec = UTIME_OMIT;
    futimens(fd, times);
  }
  close(fd);
  return out;
}

int write_file_atomically(const std::string& dir, const std::string& name, const std::string& stem,
                          const std::string& bytes, mode_t mode) {
  static std::atomic<uint64_t> counter{0};
  const std::string prefix = dir + "/." + stem + ".tmp." + std::to_string(getpid()) + ".";
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = prefix + std::to_string(counter++);
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) return errno;
  }
  if (fd < 0) return EEXIST;
  int err = write_all(fd, bytes);
  if (!err && fchmod(fd, mode) != 0) err = errno;  // the mode asked for, whatever the umask
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (!err && std::rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) err = errno;
  if (err) unlink(tmp.c_str());
  return err;
}

}  // namespace torch_pjrt::engine
