#include "engine/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <random>
#include <system_error>
#include <vector>

#include "engine/checkpoint/stale_staging.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace sdp::checkpoint {

bool is_permanent_errno(int err) {
  switch (err) {
    case EACCES: case EPERM: case EROFS: case ENOSPC: case EDQUOT: case ENOTDIR:
    case ENAMETOOLONG:
      return true;
    default:
      return false;
  }
}

namespace detail {

[[noreturn]] void fail_errno(const std::string& what, const fs::path& path, int err) {
  const std::string message =
      format(what, " '", path.string(), "': ", std::system_category().message(err));
  if (is_permanent_errno(err)) throw PermanentError(message);
  throw Error(message);
}

fs::path unique_sibling(const fs::path& base, const char* tag) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // The owner fields let a later save tell a dead writer's leftovers from a
  // live one's (stale_staging.h).
  char suffix[160];
  std::snprintf(suffix, sizeof(suffix), ".%s-%s-%ld-%llu-%08llx", tag,
                staging_machine_tag().c_str(), static_cast<long>(::getpid()),
                static_cast<unsigned long long>(counter.fetch_add(1)),
                static_cast<unsigned long long>(rng() & 0xffffffffull));
  return base.parent_path() / (base.filename().string() + suffix);
}

}  // namespace detail

namespace {

using detail::fail_errno;

fs::path parent_dir(const fs::path& p) {
  fs::path parent = p.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A target given as "dir/" names "dir".
fs::path normalize_target(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (n.has_filename()) return n;
  return n.parent_path();
}

void close_checked(int fd, const fs::path& path) {
  if (::close(fd) != 0 && errno != EINTR) fail_errno("cannot close", path, errno);
}

void fsync_path(const fs::path& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail_errno("cannot open for fsync", path, errno);
  // Some filesystems refuse fsync on directories (EINVAL): nothing to do then.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int err = errno;
    ::close(fd);
    fail_errno("cannot fsync", path, err);
  }
  close_checked(fd, path);
}

// A std::streambuf writing straight to a file descriptor through a 64 KiB
// buffer; large writes bypass the buffer. Remembers the first errno.
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd), buffer_(1 << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (n >= static_cast<std::streamsize>(buffer_.size())) {
      if (!flush_buffer() || !write_all(s, static_cast<size_t>(n))) return 0;
      return n;
    }
    std::streamsize done = 0;
    while (done < n) {
      if (pptr() == epptr() && !flush_buffer()) return done;
      const std::streamsize chunk = std::min<std::streamsize>(n - done, epptr() - pptr());
      std::copy(s + done, s + done + chunk, pptr());
      pbump(static_cast<int>(chunk));
      done += chunk;
    }
    return n;
  }

  int sync() override { return flush_buffer() ? 0 : -1; }

 private:
  bool flush_buffer() {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    if (n > 0 && !write_all(pbase(), n)) return false;
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return true;
  }

  bool write_all(const char* p, size_t n) {
    if (error_) return false;
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
      if (w < 0) {
        if (errno == EINTR) continue;
        error_ = errno;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

}  // namespace

void fsync_directory(const fs::path& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

void write_file_atomically(const fs::path& path, const std::function<void(std::ostream&)>& writer) {
  SDP_CHECK(path.has_filename(), "write_file_atomically: '", path.string(), "' names no file");
  fs::path tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = detail::unique_sibling(path, "tmp");
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST && errno != EINTR)
      fail_errno("cannot create temporary file for", path, errno);
  }
  if (fd < 0) fail_errno("cannot create temporary file for", path, EEXIST);

  try {
    {
      FdStreamBuf buf(fd);
      std::ostream os(&buf);
      writer(os);
      os.flush();
      if (buf.error() != 0) fail_errno("cannot write", tmp, buf.error());
      if (!os) fail("cannot write '", tmp.string(), "': stream error");
    }
    if (::fsync(fd) != 0) fail_errno("cannot fsync", tmp, errno);
    const int to_close = fd;
    fd = -1;
    close_checked(to_close, tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail_errno(format("cannot rename '", tmp.string(), "' to"), path, errno);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_directory(parent_dir(path));
}

void write_file_atomically(const fs::path& path, std::span<const std::byte> bytes) {
  write_file_atomically(path, [&](std::ostream& os) {
    os.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  });
}

// ---------------------------------------------------------------------------
// DirectoryTransaction

DirectoryTransaction::DirectoryTransaction(fs::path target, ReplaceMode mode)
    : target_(normalize_target(target)), mode_(mode) {
  SDP_CHECK(target_.has_filename(), "DirectoryTransaction: '", target.string(),
            "' names no directory");
  std::error_code ec;
  fs::create_directories(parent_dir(target_), ec);
  if (ec) fail_errno("cannot create parent directory of", target_, ec.value());
  remove_stale_staging(parent_dir(target_));  // leftovers of saves that were killed
  for (int attempt = 0; attempt < 100; ++attempt) {
    staging_ = detail::unique_sibling(target_, "tmp");
    if (::mkdir(staging_.c_str(), 0755) == 0) return;
    if (errno != EEXIST) fail_errno("cannot create staging directory for", target_, errno);
  }
  fail_errno("cannot create staging directory for", target_, EEXIST);
}

DirectoryTransaction::~DirectoryTransaction() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);  // best effort; a destructor must not throw
}

void DirectoryTransaction::commit() {
  SDP_CHECK(!committed_, "DirectoryTransaction for '", target_.string(), "' committed twice");

  // Make the staging tree durable: files, then their directories, deepest first.
  std::vector<fs::path> dirs{staging_};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(staging_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) dirs.push_back(it->path());
    else if (it->is_regular_file()) fsync_path(it->path(), O_RDONLY);
  }
  if (ec) fail_errno("cannot list staging directory", staging_, ec.value());
  for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) fsync_directory(*d);

  const fs::path parent = parent_dir(target_);
  const fs::file_status st = fs::symlink_status(target_, ec);
  if (!fs::exists(st)) {
    if (::rename(staging_.c_str(), target_.c_str()) != 0)
      fail_errno(format("cannot rename '", staging_.string(), "' to"), target_, errno);
    committed_ = true;
    fsync_directory(parent);
    return;
  }
  if (!fs::is_directory(st))
    fail("cannot commit checkpoint directory: '", target_.string(),
         "' exists and is not a directory");

#if defined(__linux__) && defined(RENAME_EXCHANGE)
  if (mode_ == ReplaceMode::exchange_if_supported) {
    if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
      committed_ = true;
      fsync_directory(parent);
      fs::remove_all(staging_, ec);  // now holds the old checkpoint
      return;
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
      fail_errno(format("cannot exchange '", staging_.string(), "' with"), target_, errno);
  }
#endif

  const fs::path old = detail::unique_sibling(target_, "old");
  if (::rename(target_.c_str(), old.c_str()) != 0)
    fail_errno("cannot move aside existing checkpoint", target_, errno);
  if (::rename(staging_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::rename(old.c_str(), target_.c_str());  // put the old one back
    fail_errno(format("cannot rename '", staging_.string(), "' to"), target_, err);
  }
  committed_ = true;
  fsync_directory(parent);
  fs::remove_all(old, ec);
}

bool DirectoryTransaction::recover(const fs::path& target_in) {
  const fs::path target = normalize_target(target_in);
  const fs::path parent = parent_dir(target);
  const std::string name = target.filename().string();
  std::vector<fs::path> olds, tmps;
  std::error_code ec;
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.rfind(name + ".old-", 0) == 0) olds.push_back(it->path());
    else if (f.rfind(name + ".tmp-", 0) == 0) tmps.push_back(it->path());
  }
  if (ec) fail_errno("cannot list", parent, ec.value());

  bool restored = false;
  if (!fs::exists(fs::symlink_status(target, ec)) && !olds.empty()) {
    auto newest = std::max_element(olds.begin(), olds.end(), [](const fs::path& a, const fs::path& b) {
      std::error_code e;
      return fs::last_write_time(a, e) < fs::last_write_time(b, e);
    });
    if (::rename(newest->c_str(), target.c_str()) != 0)
      fail_errno(format("cannot restore '", newest->string(), "' to"), target, errno);
    olds.erase(newest);
    restored = true;
  }
  for (const auto& p : olds) fs::remove_all(p, ec);
  for (const auto& p : tmps) fs::remove_all(p, ec);
  fsync_directory(parent);
  return restored;
}

}  // namespace sdp::checkpoint
