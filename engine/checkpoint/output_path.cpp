#include "engine/checkpoint/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace sdp::checkpoint {

namespace {

[[noreturn]] void refuse(const OutputPath& out, const std::string& why, int err = 0) {
  const std::string text =
      format(out.flag, ": cannot create ", out.what, " '", out.path.string(), "': ", why);
  if (err == 0 || is_permanent_errno(err)) throw PermanentError(text);
  throw Error(text);
}

// stat(2) without retrying; the errno, 0 on success.
int stat_of(const fs::path& p, struct stat& st) {
  return ::stat(p.c_str(), &st) == 0 ? 0 : errno;
}

// A directory's parent, "." for a relative path's first component; the
// path itself for a root.
fs::path parent_of(const fs::path& p) {
  const fs::path parent = p.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Creates, and removes at once, a file in `dir`: the proof that the run's
// writer can create its files there.
void probe_directory(const OutputPath& out, const fs::path& dir) {
  const fs::path probe = detail::unique_sibling(dir / ".sdp-write-probe", "probe");
  int fd;
  do {
    fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    refuse(out, format("no file can be created in '", dir.string(), "': ", std::strerror(err)),
           err);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void check_output_path(const OutputPath& out) {
  if (out.path.empty()) return;
  struct stat st {};
  const int err = stat_of(out.path, st);
  if (err == 0) {
    if (out.directory) {
      if (!S_ISDIR(st.st_mode)) refuse(out, "it exists and is not a directory");
      probe_directory(out, out.path);
      return;
    }
    if (S_ISDIR(st.st_mode)) refuse(out, "it is a directory (expected a file)");
    int fd;
    do {
      fd = ::open(out.path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int open_err = errno;
      refuse(out, std::strerror(open_err), open_err);
    }
    ::close(fd);
    // Writers that replace the file atomically create a sibling first.
    probe_directory(out, parent_of(out.path));
    return;
  }
  if (err != ENOENT && err != ENOTDIR) refuse(out, std::strerror(err), err);
  // The nearest directory on the way that exists: the writer creates the
  // rest from there.
  fs::path at = out.directory ? out.path : parent_of(out.path);
  for (;;) {
    const int at_err = stat_of(at, st);
    if (at_err == 0) break;
    if (at_err != ENOENT && at_err != ENOTDIR)
      refuse(out, format("'", at.string(), "': ", std::strerror(at_err)), at_err);
    const fs::path up = parent_of(at);
    if (up == at) refuse(out, format("'", at.string(), "' does not exist"));
    at = up;
  }
  if (!S_ISDIR(st.st_mode))
    refuse(out, format(std::strerror(ENOTDIR), " ('", at.string(), "' is a file)"), ENOTDIR);
  if (!out.directory && !out.creates_parents && at != parent_of(out.path))
    refuse(out, format("its directory '", parent_of(out.path).string(), "' does not exist"));
  probe_directory(out, at);
}

void check_output_paths(const std::vector<OutputPath>& outputs) {
  for (const OutputPath& out : outputs) check_output_path(out);
}

}  // namespace sdp::checkpoint
