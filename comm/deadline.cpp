#include "comm/deadline.h"

#include <cstdio>
#include <ctime>

#include "comm/mpi_runtime.h"
#include "engine/core/error.h"

namespace sdp::comm {

double ProcessClocks::wall_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ProcessClocks::cpu_seconds() const {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

bool process_was_not_running(double wall_seconds, double cpu_seconds, double timeout_seconds) {
  const double longest_running_gap = std::min(1.0, timeout_seconds / 2);
  return wall_seconds > longest_running_gap && cpu_seconds < wall_seconds / 10;
}

std::string timeout_message(int world_rank, std::string_view op, const std::string& group,
                            int64_t bytes, double timeout_seconds, const WaitOutcome& outcome) {
  const std::string head = format("[rank ", world_rank, "] ", op, " on group ", group, " (",
                                  bytes, " bytes) did not finish within ", timeout_seconds, " s");
  if (outcome.stopped_seconds > 0)
    return head + format(" because this rank itself was not running for the last ",
                         format_fixed(outcome.stopped_seconds, 1),
                         " s of the wait (stopped: SIGSTOP, a debugger or a suspended host), "
                         "not because of a peer; its peers may have ended the job waiting for "
                         "it; ending the job");
  return head + ": a peer died, hung or called a different collective; ending the job";
}

void end_job_after_timeout(int world_rank, std::string_view op, const std::string& group,
                           int64_t bytes, double timeout_seconds, const WaitOutcome& outcome) {
  // One write of one line, so lines of ranks timing out together do not interleave.
  const std::string line =
      timeout_message(world_rank, op, group, bytes, timeout_seconds, outcome) + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MpiRuntime::abort_job(1);
}

}  // namespace sdp::comm
