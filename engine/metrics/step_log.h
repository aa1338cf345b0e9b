#pragma once
// What a run says about its steps on stdout. On a terminal, one live line
// rewritten in place (ProgressLine); anywhere else (a file, a pipe, nohup,
// Slurm, or the pseudo-terminal mpirun hands its ranks whatever mpirun's own
// output is) plain lines at an interval, each complete when printed, so a
// log can be read while the job runs and holds no carriage returns.
#include <cstdint>
#include <optional>
#include <string>

namespace sdp {

// The steps a run logs in plain lines: the first step it runs (first_step
// + 1, after a resume too), every `every`-th, and the last (`last_step`);
// none when every = 0.
bool logged_step(int64_t step, int64_t first_step, int64_t last_step, int64_t every);

// Whether the live line is drawn: asked for (--progress), stdout a terminal,
// and not a rank of a launched job (mpirun gives its ranks a pseudo-terminal
// even when its own output goes to a file, where the line's carriage
// returns and escape codes would pile up as one endless line).
bool live_progress(bool wanted, bool stdout_terminal, bool launched_rank);

// A time left: "45s", "2m05s", "1h02m".
std::string eta_text(double seconds);

struct StepLine {
  int64_t step = 0;
  int64_t steps = 0;          // the run's last step
  double loss = 0;
  double lr = 0;
  double rate = 0;            // tokens or images per second
  std::string rate_unit;      // "tok/s", "img/s"
  std::optional<double> peak_bytes;   // the step's peak memory (of the rank with the most)
  std::optional<double> eta_seconds;  // time left until the last step
};

// "step 10/200  loss 4.1234  lr 3.00e-03  51234 tok/s  peak 22.1 MiB  eta 1m05s"
std::string step_line_text(const StepLine& line);

}  // namespace sdp
