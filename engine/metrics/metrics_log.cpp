#include "engine/metrics/metrics_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp {

namespace fs = std::filesystem;

MetricsLog::MetricsLog(const fs::path& path, bool append) : path_(path) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) fail("metrics: cannot open ", path, " for writing: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::fail_write(const char* what, int err) {
  // The stream is unusable after a failed write: close it now, so that the
  // destructor does not try to flush the rest into the same error.
  std::fclose(file_);
  file_ = nullptr;
  fail("metrics: cannot ", what, " ", path_, ": ", std::strerror(err),
       " (the metrics file is incomplete)");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size())
    fail_write("write to", errno ? errno : EIO);
  if (std::fflush(file_) != 0) fail_write("write to", errno ? errno : EIO);
}

void MetricsLog::close() {
  if (!file_) return;
  std::FILE* f = file_;
  file_ = nullptr;
  errno = 0;
  const bool flushed = std::fflush(f) == 0 && !std::ferror(f);
  const int flush_err = errno;
  if (std::fclose(f) != 0 || !flushed)
    fail("metrics: cannot close ", path_, ": ", std::strerror(flushed ? errno : flush_err),
         " (the metrics file may be incomplete)");
}

namespace {

// A summary line carries "summary": true and the step the run ended at in "steps".
bool is_summary(const nlohmann::json& record) {
  const auto it = record.find("summary");
  return it != record.end() && *it == true;
}

// The step a metrics record belongs to, if it names one. A step beyond the
// steps a run can have (2^64 - 1 read as -1 would be kept) fails naming the
// file and line.
std::optional<int64_t> record_step(const nlohmann::json& record, const fs::path& file,
                                   int64_t line) {
  const char* key = is_summary(record) ? "steps" : "step";
  const auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer()) return std::nullopt;
  return json_integer<int64_t>(*it, format("metrics: ", file, " line ", line, ": ", key), 0,
                               config_limits::kSteps);
}

}  // namespace

MetricsTrim keep_records_through_step(const fs::path& path, int64_t step,
                                      size_t recent_losses) {
  MetricsTrim trim;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return trim;  // absent, a pipe, a device
  // Rename over the link's target, not the link: the link stays a link.
  const fs::path target = fs::is_symlink(path, ec) ? fs::canonical(path) : path;
  std::ifstream in(target, std::ios::binary);
  if (!in) fail("metrics: cannot read ", target, " to continue it: ", std::strerror(errno));
  checkpoint::write_file_atomically(target, [&](std::ostream& out) {
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      const bool terminated = !in.eof();
      nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!record.is_object()) {
        if (!terminated) {  // the last line, cut off by a crash mid-write
          trim.dropped_cut_line = true;
          break;
        }
        fail("metrics: ", target, " line ", number, " is not a JSON object (",
             line.size() > 60 ? line.substr(0, 60) + "..." : line,
             "); a metrics file holds one object per line. Move it away to start a new one");
      }
      const std::optional<int64_t> at = record_step(record, target, number);
      if (at && *at > step) {
        ++trim.dropped;
        continue;
      }
      out << line << '\n';
      ++trim.kept;
      if (!at || is_summary(record)) continue;
      trim.last_step = at;
      if (recent_losses == 0) continue;
      const auto loss = record.find("loss");
      trim.recent_losses.push_back(loss != record.end() && loss->is_number()
                                       ? loss->get<double>()
                                       : std::numeric_limits<double>::quiet_NaN());
      trim.recent_records.push_back(std::move(record));
      if (trim.recent_losses.size() > recent_losses) {
        trim.recent_losses.erase(trim.recent_losses.begin());
        trim.recent_records.erase(trim.recent_records.begin());
      }
    }
    if (in.bad()) fail("metrics: cannot read ", target, ": ", std::strerror(errno));
  });
  return trim;
}

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled && isatty(STDOUT_FILENO)) {}

void ProgressLine::update(const std::string& text) {
  if (!enabled_) return;
  std::printf("\r\033[K%s", text.c_str());
  std::fflush(stdout);
  dirty_ = true;
}

void ProgressLine::finish() {
  if (enabled_ && dirty_) {
    std::printf("\r\033[K");
    std::fflush(stdout);
  }
  dirty_ = false;
}

}  // namespace sdp
