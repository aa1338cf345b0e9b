#pragma once
// A test hook for restarts: the environment variable
//   SDP_TEST_KILL=rank=R,step=S[,once=FILE]
// makes rank R kill itself with SIGKILL right after step S (after that
// step's metrics line and checkpoint), as a crashed node would: no clean-up,
// no message. With once=FILE it fires only while FILE does not exist, and
// creates it first, so the restarted job runs through. Read by sdp-train
// only, for the tests of scripts/sdp-run; unset, it does nothing.
#include <cstdint>
#include <optional>
#include <string>

namespace sdp::app {

class FaultHook {
 public:
  // Parses SDP_TEST_KILL; a malformed value is an error naming the variable
  // and the valid form.
  static FaultHook from_environment();
  // Kills this process when the hook is armed for (step, rank).
  void after_step(int64_t step, int rank) const;

 private:
  int rank_ = -1;
  int64_t step_ = -1;
  std::string once_file_;  // empty: every run
};

}  // namespace sdp::app
