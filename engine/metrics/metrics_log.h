#pragma once
// JSON-lines metrics: one object per line, flushed as written so a crashed
// run keeps every finished step. Also the live progress line for terminals.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdp {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Appends when `append` (a resumed run continues its log), else truncates.
  explicit MetricsLog(const std::filesystem::path& path, bool append = false);
  // Closes without reporting: an error path is already under way. A run that
  // ends normally calls close(), which reports.
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // A failed write or flush (disk full, quota, I/O error) throws sdp::Error
  // naming the file and the system's error text: metrics are never lost
  // silently.
  void write(const nlohmann::json& record);
  // Flushes and closes; a failure (also one that only fclose sees, as on
  // network filesystems) throws like write(). Idempotent.
  void close();
  bool is_open() const { return file_ != nullptr; }

 private:
  [[noreturn]] void fail_write(const char* what, int err);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// What keep_records_through_step did to a metrics file.
struct MetricsTrim {
  int64_t kept = 0;                    // records kept
  int64_t dropped = 0;                 // complete records of later steps, removed
  bool dropped_cut_line = false;       // an unterminated, unparsable last line, removed
  std::optional<int64_t> last_step;    // the last kept step record's step
  // "loss" of the last kept step records (at most the count asked for),
  // oldest first: a resumed run's "last N steps" figures span the restart.
  std::vector<double> recent_losses;
  // The same steps' whole records (other figures of the last steps, such as
  // a classifier's accuracies, continue the same way).
  std::vector<nlohmann::json> recent_records;
};

// Before a run resumed at step `step` appends to its metrics file: rewrites
// the file atomically keeping only the records of steps <= `step` (a step
// line's "step", a summary line's "steps"; records without either are kept),
// so that the steps the failed attempt wrote after its last checkpoint are
// not duplicated. A last line without its newline (the writer died in the
// middle of it) is kept when it parses as a record to keep, else dropped.
// Any other line that is not a JSON object is an error naming the file and
// the line. Nothing to do when the file does not exist, or is not a regular
// file (a pipe, /dev/stdout); a symbolic link is followed, and its target
// rewritten.
MetricsTrim keep_records_through_step(const std::filesystem::path& path, int64_t step,
                                      size_t recent_losses = 0);

// Rewrites one status line on stdout when it is a terminal; silent otherwise
// (so logs redirected to a file stay clean).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  void update(const std::string& text);
  void finish();

 private:
  bool enabled_;
  bool dirty_ = false;
};

}  // namespace sdp
