#include "comm/deadline.h"

#include <cstdio>

#include "comm/mpi_runtime.h"
#include "engine/core/error.h"

namespace sdp::comm {

void end_job_after_timeout(int world_rank, std::string_view op, const std::string& group,
                           int64_t bytes, double timeout_seconds) {
  // One write of one line, so lines of ranks timing out together do not interleave.
  const std::string line =
      format("[rank ", world_rank, "] ", op, " on group ", group, " (", bytes,
             " bytes) did not finish within ", timeout_seconds,
             " s: a peer died, hung or called a different collective; ending the job\n");
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MpiRuntime::abort_job(1);
}

}  // namespace sdp::comm
