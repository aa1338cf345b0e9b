#include "engine/metrics/step_log.h"

#include <cmath>
#include <cstdio>

#include "engine/metrics/memory_report.h"

namespace sdp {

bool logged_step(int64_t step, int64_t first_step, int64_t last_step, int64_t every) {
  if (every <= 0) return false;
  return step == first_step + 1 || step % every == 0 || step == last_step;
}

bool live_progress(bool wanted, bool stdout_terminal, bool launched_rank) {
  return wanted && stdout_terminal && !launched_rank;
}

std::string eta_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const long long s = std::llround(seconds);
  char text[48];
  if (s < 60)
    std::snprintf(text, sizeof text, "%llds", s);
  else if (s < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  return text;
}

std::string step_line_text(const StepLine& line) {
  char text[256];
  std::snprintf(text, sizeof text, "step %lld/%lld  loss %.4f  lr %.2e  %.0f %s",
                static_cast<long long>(line.step), static_cast<long long>(line.steps), line.loss,
                line.lr, line.rate, line.rate_unit.c_str());
  std::string out = text;
  if (line.peak_bytes) out += "  peak " + human_bytes(*line.peak_bytes);
  if (line.eta_seconds) out += "  eta " + eta_text(*line.eta_seconds);
  return out;
}

}  // namespace sdp
