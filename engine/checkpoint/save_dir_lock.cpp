#include "engine/checkpoint/save_dir_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace sdp::checkpoint {

namespace {

using detail::fail_errno;

void create_directory_for_saves(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_errno("cannot create save directory", dir, ec.value());
  if (!fs::is_directory(dir, ec))
    throw PermanentError(format("save directory '", dir.string(),
                                "' exists and is not a directory"));
}

int open_retrying(const fs::path& path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// A write lock on the whole file, not waiting. Returns 0 or the errno.
int try_lock(int fd) {
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
#ifdef F_OFD_SETLK
  if (::fcntl(fd, F_OFD_SETLK, &lock) == 0) return 0;
  if (errno != EINVAL) return errno;  // EINVAL: a kernel without OFD locks
#endif
  return ::fcntl(fd, F_SETLK, &lock) == 0 ? 0 : errno;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// "host H, pid P, started T" from the lock file, as its holder wrote it.
std::string describe_holder(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
  if (!holder.is_object() || !holder.contains("host") || !holder.contains("pid"))
    return "a process that has not yet recorded itself in the file";
  auto field = [&](const char* key) {
    const auto it = holder.find(key);
    if (it == holder.end()) return std::string("?");
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  return format("host ", field("host"), ", pid ", field("pid"), ", started ", field("started"));
}

}  // namespace

void check_directory_writable(const fs::path& dir) {
  create_directory_for_saves(dir);
  // A staging-style name: a probe left by a process killed right here is
  // removed by the next checkpoint save in this directory (stale_staging.h).
  const fs::path probe = detail::unique_sibling(dir / "write-probe", "tmp");
  const int fd = open_retrying(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) fail_errno("save directory is not writable: cannot create a file in", dir, errno);
  int err = write_all(fd, "probe\n") ? 0 : errno;
  if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  ::unlink(probe.c_str());
  if (err != 0) fail_errno("save directory is not writable: cannot write a file in", dir, err);
}

SaveDirLock::SaveDirLock(const fs::path& save_dir) : file_(save_dir / kFileName) {
  check_directory_writable(save_dir);
  const int fd = open_retrying(file_, O_RDWR | O_CREAT, 0644);
  if (fd < 0) fail_errno("cannot open the save directory's lock file", file_, errno);
  const int err = try_lock(fd);
  if (err == EAGAIN || err == EACCES) {
    const std::string holder = describe_holder(fd);
    ::close(fd);
    throw PermanentError(format(
        "save directory '", save_dir.string(), "' is in use by another job: ", holder,
        " holds the lock on ", file_.string(), ". Two jobs saving into one directory would "
        "interleave their checkpoints and 'latest'; give this job another save directory, or "
        "let that job end first (the lock ends with its process: the file of a job that has "
        "ended, even by kill -9, does not block)"));
  }
  if (err == ENOLCK) {
    ::close(fd);
    std::fprintf(stderr,
                 "sdp-train: warning: the filesystem of %s has no file locks (%s): another job "
                 "using the same save directory would not be refused\n",
                 save_dir.c_str(), std::system_category().message(err).c_str());
    return;
  }
  if (err != 0) {
    ::close(fd);
    fail_errno("cannot lock", file_, err);
  }
  fd_ = fd;
  // Ours now: name the holder for a job that is refused.
  const nlohmann::json holder = {
      {"host", host_name()}, {"pid", static_cast<long>(::getpid())}, {"started", utc_now()}};
  if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0 ||
      !write_all(fd_, holder.dump() + "\n")) {
    const int write_err = errno;
    ::close(fd_);
    fd_ = -1;
    fail_errno("cannot write", file_, write_err);
  }
}

SaveDirLock::~SaveDirLock() {
  if (fd_ >= 0) ::close(fd_);  // the lock ends with the descriptor
}

}  // namespace sdp::checkpoint
