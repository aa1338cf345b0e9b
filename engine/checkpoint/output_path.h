#pragma once
// The start-up check of a run's outputs: every file or directory a run will
// write (checkpoints, metrics, timelines, reports, configs and plans) is
// checked before any work, so that a path that cannot be written fails at
// once, naming its flag, rather than after the training it was to record.
// Nothing is created: a missing directory is judged by the nearest one on
// its way that exists, and the probe file that proves a directory writable
// is removed again.
#include <filesystem>
#include <string>
#include <vector>

namespace sdp::checkpoint {

struct OutputPath {
  std::string flag;             // the flag that names it, for messages: "--metrics"
  std::string what;             // what it is, for messages: "metrics file"
  std::filesystem::path path;   // empty: not written, nothing to check
  bool directory = false;       // a directory the run writes files into
  // Whether the writer makes the missing directories on the way (false: the
  // directory that holds the file must exist).
  bool creates_parents = true;
};

// Throws sdp::PermanentError "<flag>: cannot create <what> '<path>': <why>"
// when `out` cannot be written: a directory expected where a file is (or a
// file where a directory is), a directory on the way that is a regular file,
// a missing directory the writer does not make, an existing file that
// cannot be opened for writing, or a directory in which no file can be
// created (no permission, read-only, full). sdp::Error instead of
// PermanentError for a system error that a retry may cure.
void check_output_path(const OutputPath& out);

// check_output_path on each, in order.
void check_output_paths(const std::vector<OutputPath>& outputs);

}  // namespace sdp::checkpoint
