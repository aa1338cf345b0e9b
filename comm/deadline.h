#pragma once
// Waiting for a started collective without ever hanging: poll its
// completion until a deadline, politely (4 ranks may share 2 cores, and a
// busy-polling rank would steal the core its peer needs to make progress).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

namespace sdp::comm {

// Calls done() until it returns true (then returns true) or until
// timeout_seconds have passed (returns false; <= 0 waits forever). Between
// polls: yields for the first millisecond, then sleeps from 10 us, doubling
// up to 200 us.
template <typename Done>
bool poll_until(Done&& done, double timeout_seconds) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto limit = std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::microseconds(10);
  while (!done()) {
    const auto waited = clock::now() - start;
    if (timeout_seconds > 0 && waited > limit) return false;
    if (waited < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
  return true;
}

// Prints "[rank R] <op> on group <group> (<bytes> bytes) did not finish
// within T s: a peer died, hung or called a different collective; ending the
// job" to stderr and ends every rank (MpiRuntime::abort_job(1)).
[[noreturn]] void end_job_after_timeout(int world_rank, std::string_view op,
                                        const std::string& group, int64_t bytes,
                                        double timeout_seconds);

}  // namespace sdp::comm
