// The plain progress lines of a run whose stdout is no terminal
// (engine/metrics/step_log.h): which steps, and what each says.
#include <catch2/catch.hpp>

#include "engine/metrics/step_log.h"

using namespace sdp;

TEST_CASE("logged_step: the first step of the run, every N-th and the last", "[step_log]") {
  std::vector<int64_t> logged;
  for (int64_t s = 1; s <= 25; ++s)
    if (logged_step(s, 0, 25, 10)) logged.push_back(s);
  CHECK(logged == std::vector<int64_t>{1, 10, 20, 25});
  // Resumed after step 12: its first step is 13.
  logged.clear();
  for (int64_t s = 13; s <= 30; ++s)
    if (logged_step(s, 12, 30, 10)) logged.push_back(s);
  CHECK(logged == std::vector<int64_t>{13, 20, 30});
  CHECK(logged_step(7, 0, 9, 1));
  CHECK_FALSE(logged_step(1, 0, 5, 0));  // 0: none
  CHECK_FALSE(logged_step(5, 0, 5, 0));
}

TEST_CASE("live_progress: only on a terminal, never as a launched rank", "[step_log]") {
  CHECK(live_progress(true, true, false));
  CHECK_FALSE(live_progress(false, true, false));
  CHECK_FALSE(live_progress(true, false, false));
  // mpirun gives its ranks a pseudo-terminal whatever its own output is.
  CHECK_FALSE(live_progress(true, true, true));
}

TEST_CASE("eta_text and step_line_text", "[step_log]") {
  CHECK(eta_text(0) == "0s");
  CHECK(eta_text(44.6) == "45s");
  CHECK(eta_text(125) == "2m05s");
  CHECK(eta_text(3720) == "1h02m");
  CHECK(eta_text(-1) == "0s");
  StepLine line;
  line.step = 10;
  line.steps = 200;
  line.loss = 4.12345;
  line.lr = 3e-3;
  line.rate = 51234.4;
  line.rate_unit = "tok/s";
  line.peak_bytes = 22.5 * 1024 * 1024;
  line.eta_seconds = 65;
  CHECK(step_line_text(line) ==
        "step 10/200  loss 4.1235  lr 3.00e-03  51234 tok/s  peak 22.50 MiB  eta 1m05s");
  line.peak_bytes.reset();
  line.eta_seconds.reset();
  line.rate_unit = "img/s";
  CHECK(step_line_text(line) == "step 10/200  loss 4.1235  lr 3.00e-03  51234 img/s");
}
