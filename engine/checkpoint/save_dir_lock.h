#pragma once
// One job per save directory: the advisory lock that a job's rank 0 holds on
// its save directory from start-up to exit, and the start-up check that the
// directory can be written at all.
//
// The lock is an fcntl() write lock on <save_dir>/sdp-train.lock, taken
// without waiting. Why fcntl and not flock(): fcntl locks go to the file
// server on NFS (NLM for NFSv3, part of the protocol in NFSv4), so a job on
// another host sees them; flock() is only forwarded where the client kernel
// emulates it with fcntl locks (Linux since 2.6.12) and is local to one host
// elsewhere. The open-file-description form (F_OFD_SETLK) is used where the
// kernel has it: it belongs to this descriptor rather than the process, so it
// also conflicts within one process and no other open/close of the file can
// drop it; older kernels get the per-process form (F_SETLK).
//
// Stale locks: the kernel releases the lock when the holding process ends in
// any way (exit, crash, kill -9), and the NFS server releases a crashed
// host's locks when that host reboots or its lease expires, never while it
// lives. So the file that a finished or killed job leaves behind is never a
// lock: a lock exists only while its holder runs, and no rule here ever
// breaks one. The file's contents (host, pid, start time of the holder) only
// serve to name the holder in the refusal.
#include <filesystem>
#include <string>

namespace sdp::checkpoint {

class SaveDirLock {
 public:
  static constexpr const char* kFileName = "sdp-train.lock";

  // Creates `save_dir` if it does not exist, checks that a file can be
  // created, written and removed in it, and takes the lock. Throws
  // sdp::PermanentError when the directory cannot be created or written
  // (naming it and the system's reason) or when another process holds the
  // lock (naming that holder). Where the filesystem has no locks at all
  // (ENOLCK: an NFS mount without a lock daemon) it warns on stderr and
  // runs unlocked.
  explicit SaveDirLock(const std::filesystem::path& save_dir);
  ~SaveDirLock();  // releases the lock (the file stays; see above)
  SaveDirLock(const SaveDirLock&) = delete;
  SaveDirLock& operator=(const SaveDirLock&) = delete;

  const std::filesystem::path& file() const { return file_; }
  bool locked() const { return fd_ >= 0; }

 private:
  std::filesystem::path file_;
  int fd_ = -1;
};

// The check that SaveDirLock makes before locking, alone: creates `dir` if
// needed, then creates, writes, fsyncs and removes a probe file in it.
// Throws sdp::PermanentError naming the directory and the system's reason
// for a permanent failure (no permission, read-only, full, a path through a
// regular file), sdp::Error for another.
void check_directory_writable(const std::filesystem::path& dir);

}  // namespace sdp::checkpoint
