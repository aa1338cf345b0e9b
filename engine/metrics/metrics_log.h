#pragma once
// JSON-lines metrics: one object per line, flushed as written so a crashed
// run keeps every finished step. Also the live progress line for terminals.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace sdp {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Appends when `append` (a resumed run continues its log), else truncates.
  explicit MetricsLog(const std::filesystem::path& path, bool append = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& record);
  bool is_open() const { return file_ != nullptr; }

 private:
  std::FILE* file_ = nullptr;
};

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
