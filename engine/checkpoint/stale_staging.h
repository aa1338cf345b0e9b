#pragma once
// Leftovers of interrupted checkpoint saves. A save writes into uniquely
// named siblings of its target (atomic_file.h): "<name>.tmp-<owner>" while it
// runs, "<name>.old-<owner>" for a replaced checkpoint being deleted. A save
// killed midway leaves them behind; the next save in the same directory
// removes those whose writing process is gone.
//
// <owner> is "<host>-<machine>-<pid>-<counter>-<random>": <host> the host
// name (letters, digits, '_'), <machine> 8 hex digits identifying this boot
// and PID namespace of the host, so that a PID is only ever tested on the
// machine that wrote it. A leftover counts as stale only when <host> and
// <machine> are this process's and no process <pid> exists. Leftovers of
// other hosts, of an earlier boot of this one, or with names of the earlier
// format (no owner) are kept: whether their writer is alive cannot be told
// from here (remove them by hand, or with DirectoryTransaction::recover).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace sdp::checkpoint {

struct StagingOwner {
  std::string kind;     // "tmp" or "old"
  std::string machine;  // "<host>-<machine>"
  long pid = 0;
};

// "<host>-<machine>" of this process, as written into staging names.
const std::string& staging_machine_tag();

// The owner encoded in a staging name ("ckpt.tmp-<owner>"), or nothing when
// `file_name` is not a staging name of the current format.
std::optional<StagingOwner> parse_staging_name(std::string_view file_name);

// Removes, in directory `dir`, the staging entries (files or directories)
// of dead processes of this machine. A stale "<name>.old-*" is removed only
// while <name> exists: without it, the old copy may be the only complete
// checkpoint of a save that crashed between its two renames. Best effort:
// what cannot be removed stays. Returns how many entries were removed.
int remove_stale_staging(const std::filesystem::path& dir);

}  // namespace sdp::checkpoint
