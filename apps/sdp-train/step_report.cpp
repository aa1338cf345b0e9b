#include "apps/sdp-train/step_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "comm/mpi_runtime.h"
#include "engine/metrics/step_log.h"

namespace sdp::app {

namespace {

bool is_live(const TrainConfig& config, bool root) {
  return root && live_progress(config.progress, isatty(STDOUT_FILENO) == 1,
                               comm::MpiRuntime::launched_by_mpi());
}

// The largest peak of any rank in the step (an emulated rank knows only its
// own: the others are not numbers); this rank's where none is known.
double peak_bytes(const StepResult& r, const RankFigures& figures) {
  std::optional<double> most;
  for (double b : figures.peak_bytes)
    if (std::isfinite(b)) most = most ? std::max(*most, b) : b;
  return most ? *most : static_cast<double>(r.memory.peak_total);
}

}  // namespace

StepReport::StepReport(const TrainConfig& config, bool root, int64_t first_step,
                       std::string rate_unit)
    : root_(root),
      first_step_(first_step),
      last_step_(config.steps),
      every_(config.log_every),
      rate_unit_(std::move(rate_unit)),
      live_(is_live(config, root)),
      plain_(root && !is_live(config, root)),
      start_(std::chrono::steady_clock::now()) {}

void StepReport::step(const StepResult& r, const RankFigures& figures) {
  if (!root_) return;
  seconds_ += r.seconds;
  examples_ += static_cast<double>(r.examples);
  const bool plain_now = plain_ && logged_step(r.step, first_step_, last_step_, every_);
  if (!plain_now && plain_) return;
  StepLine line;
  line.step = r.step;
  line.steps = last_step_;
  line.loss = r.loss;
  line.lr = r.lr;
  line.rate_unit = rate_unit_;
  line.peak_bytes = peak_bytes(r, figures);
  // The wall time per step so far (evaluations and checkpoints included)
  // times the steps left.
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t done = r.step - first_step_;
  if (done > 0)
    line.eta_seconds = elapsed / static_cast<double>(done) * static_cast<double>(last_step_ - r.step);
  if (plain_now) {
    // The mean rate over the steps since the previous line.
    line.rate = seconds_ > 0 ? examples_ / seconds_ : 0;
    seconds_ = 0;
    examples_ = 0;
    std::printf("%s\n", step_line_text(line).c_str());
    std::fflush(stdout);
    return;
  }
  line.rate = r.seconds > 0 ? static_cast<double>(r.examples) / r.seconds : 0;
  seconds_ = 0;
  examples_ = 0;
  live_.update(step_line_text(line));
}

}  // namespace sdp::app
