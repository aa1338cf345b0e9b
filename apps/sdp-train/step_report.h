#pragma once
// sdp-train's report of its steps on stdout (rank 0 only): the live line on
// a terminal, plain flushed lines every --log-every steps anywhere else
// (engine/metrics/step_log.h says which and why).
#include <chrono>
#include <cstdint>
#include <string>

#include "apps/sdp-train/rank_report.h"
#include "engine/metrics/metrics_log.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer.h"

namespace sdp::app {

class StepReport {
 public:
  // `root`: this process reports; `first_step`: the step the run starts
  // after (0, or the resumed one); `rate_unit`: "tok/s" or "img/s".
  StepReport(const TrainConfig& config, bool root, int64_t first_step, std::string rate_unit);
  // After each step, with every rank's figures of it.
  void step(const StepResult& r, const RankFigures& figures);
  // Clears the live line before other output.
  void finish() { live_.finish(); }

 private:
  bool root_;
  int64_t first_step_, last_step_, every_;
  std::string rate_unit_;
  ProgressLine live_;
  bool plain_;
  std::chrono::steady_clock::time_point start_;
  // Since the last plain line: the rate is over these steps.
  double seconds_ = 0;
  double examples_ = 0;
};

}  // namespace sdp::app
