#pragma once
// Waiting for a started collective without ever hanging: poll its
// completion until a deadline, politely (4 ranks may share 2 cores, and a
// busy-polling rank would steal the core its peer needs to make progress).
//
// A deadline that passes names who is to blame. Usually that is a peer (it
// died, hung or called something else). But a rank can also be the one
// that stopped: SIGSTOP (Ctrl-Z, a debugger, a job scheduler suspending it)
// or a suspended host. Its peers then time out waiting for it and end the
// job, and mpirun resumes it (SIGCONT) to shut it down; on waking, its own
// wait finds the deadline long past and, without the check below, would
// print a timeout blaming a peer that was alive all along.
//
// How a wait knows it was stopped: the deadline is measured on the steady
// (monotonic) clock, which keeps running while the process is stopped, and
// the wait looks at it between polls that are at most ~200 us apart (plus
// the few microseconds a completion test takes). The deadline is noticed
// at the first look after it passed, so it passed inside the interval since
// the previous look. If that interval is far longer than a poll (see
// process_was_not_running) and the process used almost no CPU time in it
// (CLOCK_PROCESS_CPUTIME_ID counts every thread's time: a stopped process
// uses none; a completion test that itself worked for a long time, e.g. a
// large shared-memory copy inside MPI_Test, uses about as much as the
// interval), then the process was not running when its deadline passed: the
// time was lost to the stop, not to a peer, and the message says so. Only
// the interval in which the deadline passed counts: a rank stopped for a
// while earlier, whose deadline then passed while it ran, is waiting for a
// peer like any other.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

namespace sdp::comm {

// What a wait ended with. Converts to true when the call finished.
struct WaitOutcome {
  bool finished = true;
  // Timed out only: the length of the interval in which the deadline
  // passed when this process was not running during it (stopped), else 0.
  double stopped_seconds = 0;
  explicit operator bool() const { return finished; }
};

// The clocks a wait reads, in seconds: wall time on the steady clock and
// the CPU time of the whole process. Tests pass clocks of their own.
struct ProcessClocks {
  double wall_seconds() const;
  double cpu_seconds() const;
};

// True when an interval of `wall_seconds` between two looks at the clock,
// in which the process used `cpu_seconds` of CPU time, is one in which the
// process did not run: longer than min(1 s, timeout / 2) (a poll interval
// is under a millisecond; a busy machine deschedules a process for tens of
// milliseconds, not for a second) and with under a tenth of it spent on a
// CPU.
bool process_was_not_running(double wall_seconds, double cpu_seconds, double timeout_seconds);

// Calls done() until it returns true (then returns finished) or until
// timeout_seconds have passed on the steady clock and one more call still
// says not done (returns not finished,
// with stopped_seconds set when the deadline passed while the process was
// stopped; <= 0 waits forever). Between polls: yields for the first
// millisecond, then sleeps from 10 us, doubling up to 200 us.
template <typename Done, typename Clocks = ProcessClocks>
WaitOutcome poll_until(Done&& done, double timeout_seconds, const Clocks& clocks = {}) {
  const double start = clocks.wall_seconds();
  double last_wall = start;
  double last_cpu = clocks.cpu_seconds();
  auto pause = std::chrono::microseconds(10);
  while (!done()) {
    const double now = clocks.wall_seconds();
    const double cpu = clocks.cpu_seconds();
    const double waited = now - start;
    if (timeout_seconds > 0 && waited > timeout_seconds) {
      // One more look first: after a long gap (the process was stopped, or
      // not scheduled) the call may have finished in the meantime.
      if (done()) return {};
      WaitOutcome timed_out{false, 0};
      if (process_was_not_running(now - last_wall, cpu - last_cpu, timeout_seconds))
        timed_out.stopped_seconds = now - last_wall;
      return timed_out;
    }
    last_wall = now;
    last_cpu = cpu;
    if (waited < 1e-3) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
  return {};
}

// The line a wait that missed its deadline prints (without the newline):
//   "[rank R] <op> on group <group> (<bytes> bytes) did not finish within
//    T s: a peer died, hung or called a different collective; ending the job"
// or, when the deadline passed while this rank was stopped,
//   "[rank R] <op> on group <group> (<bytes> bytes) did not finish within
//    T s because this rank itself was not running for the last S s of the
//    wait (stopped: SIGSTOP, a debugger or a suspended host), not because of
//    a peer; its peers may have ended the job waiting for it; ending the job"
// R is this process's world rank; `op` names a peer by its world rank
// (Communicator::peer_op).
std::string timeout_message(int world_rank, std::string_view op, const std::string& group,
                            int64_t bytes, double timeout_seconds, const WaitOutcome& outcome);

// Prints timeout_message to stderr and ends every rank
// (MpiRuntime::abort_job(1)).
[[noreturn]] void end_job_after_timeout(int world_rank, std::string_view op,
                                        const std::string& group, int64_t bytes,
                                        double timeout_seconds, const WaitOutcome& outcome);

}  // namespace sdp::comm
