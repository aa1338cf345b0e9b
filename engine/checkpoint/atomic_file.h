#pragma once
// Crash-safe file and directory replacement for checkpoints.
//
// write_file_atomically: the new contents go to a uniquely named temporary
// file next to the target ("<name>.tmp-<owner>", see stale_staging.h), which
// is flushed, fsync'ed and then renamed over the target; finally the
// directory is fsync'ed so the rename itself is durable. A reader (or a crash) therefore
// sees either the complete old file or the complete new one, never a mix.
//
// DirectoryTransaction: the same for a whole checkpoint directory; see the
// class comment for the exact guarantee.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <string>

namespace sdp::checkpoint {

// Writes `bytes` to `path` atomically. Throws sdp::Error naming the path and
// the system error text; the temporary file never outlives a failure.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);

// Streaming variant: `writer` receives a binary std::ostream backed directly
// by the temporary file (buffered, no in-memory copy of the whole contents).
// If `writer` throws, the temporary file is removed, the target is left
// untouched and the exception propagates unchanged. A write error (disk full,
// ...) is reported as sdp::Error with the errno text.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& writer);

// fsync()s a directory so that entries created or renamed in it are durable.
void fsync_directory(const std::filesystem::path& dir);

// Writes a checkpoint directory atomically.
//
//   DirectoryTransaction tx("ckpt/step_100");
//   write_file_atomically(tx.staging_dir() / "model.safetensors", ...);
//   write_json_atomically(tx.staging_dir() / "config.json", ...);
//   tx.commit();
//
// Files are written into a staging directory "<dir>.tmp-<unique>" next to
// the target. commit() fsyncs every file and directory under it, then makes
// it visible as "<dir>":
//   * <dir> does not exist: rename(staging, dir), fsync the parent.
//   * <dir> exists (exchange mode, Linux): renameat2(RENAME_EXCHANGE) swaps
//     the two names in one atomic step; the old tree, now under the staging
//     name, is deleted afterwards. <dir> always names a complete checkpoint.
//   * <dir> exists (rename-aside mode, or a filesystem without exchange):
//     rename(dir, "<dir>.old-<unique>"), rename(staging, dir), fsync the
//     parent, delete the old tree. If the second rename fails the old one is
//     moved back.
// Crash-consistency guarantee: at every instant a complete checkpoint (old
// or new) exists under a known name. Normally that name is <dir>; only in
// the rename-aside window between the two renames is <dir> absent, and then
// the old complete checkpoint is "<dir>.old-*" (and the new complete one is
// the staging directory, which was fully fsync'ed before the first rename).
// recover() restores that state after a crash.
//
// Destroying a transaction that was not committed removes the staging
// directory and everything in it; the target is never touched. Creating one
// first removes the leftovers of dead processes' saves in the same parent
// directory (stale_staging.h).
class DirectoryTransaction {
 public:
  enum class ReplaceMode {
    exchange_if_supported,  // atomic swap where the kernel/filesystem allow it
    rename_aside,           // always the two-rename scheme (portable)
  };

  explicit DirectoryTransaction(std::filesystem::path target,
                                ReplaceMode mode = ReplaceMode::exchange_if_supported);
  ~DirectoryTransaction();
  DirectoryTransaction(const DirectoryTransaction&) = delete;
  DirectoryTransaction& operator=(const DirectoryTransaction&) = delete;

  const std::filesystem::path& target() const { return target_; }
  // Where the checkpoint's files are to be written before commit().
  const std::filesystem::path& staging_dir() const { return staging_; }
  bool committed() const { return committed_; }

  // Makes the staging directory visible as target(); at most once.
  void commit();

  // After a crash: if `target` is missing but a "<target>.old-*" sibling
  // exists, renames the newest one back to `target`. Then removes leftover
  // "<target>.tmp-*" and "<target>.old-*" siblings. Returns true if it
  // restored an old checkpoint. Must not run concurrently with a transaction
  // on the same target.
  static bool recover(const std::filesystem::path& target);

 private:
  std::filesystem::path target_;
  std::filesystem::path staging_;
  ReplaceMode mode_;
  bool committed_ = false;
};

// Whether a failed file operation's errno is one that a restart cannot cure:
// no permission, a read-only filesystem, a full disk or quota, a path
// through a regular file, a name too long.
bool is_permanent_errno(int err);

namespace detail {
// "<base>.<tag>-<host>-<machine>-<pid>-<counter>-<random>": distinct across
// threads, processes and hosts (the fields: stale_staging.h).
std::filesystem::path unique_sibling(const std::filesystem::path& base, const char* tag);
// "<what> '<path>': <strerror(err)>": sdp::PermanentError for a permanent
// errno (is_permanent_errno), sdp::Error otherwise.
[[noreturn]] void fail_errno(const std::string& what, const std::filesystem::path& path, int err);
}  // namespace detail

}  // namespace sdp::checkpoint
