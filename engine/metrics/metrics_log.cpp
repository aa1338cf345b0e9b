#include "engine/metrics/metrics_log.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace sdp {

MetricsLog::MetricsLog(const std::filesystem::path& path, bool append) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) fail("metrics: cannot open ", path, " for writing: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
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
