// A tiny MPI program that fails on purpose, for the ctest entries that hold
// the job-ending behaviour (test/mpi/CMakeLists.txt): run under mpiexec -n 2.
//   timeout   rank 1 sleeps 10 s before an all_reduce that rank 0 has
//             entered with a 1 s deadline: the job must end, non-zero, with
//             the "did not finish within" line, long before rank 1 wakes.
//   mismatch  require_same_on_all_ranks of a rank-dependent value: every
//             rank throws the same error, prints it and ends the job.
//   send_timeout  rank 0 sends 8 MiB (past MPI's rendezvous limit, so it
//             cannot complete without a receive) with send_async and waits
//             with a 1 s deadline while rank 1 sleeps 10 s and never
//             receives: the job must end naming the send and its peer.
//   dies      rank 1 dies (abort, no MPI_Finalize) while rank 0 waits in an
//             all_reduce with a long deadline: the launcher must end the
//             job at once (rank 0 never reaches its timeout).
//   group_timeout  (3 ranks) in the group of world ranks 1 and 2, rank 1
//             (group rank 0) receives from group rank 1 (world rank 2),
//             which sleeps 10 s: the deadline line names the peer by its
//             world rank, with the group rank beside it.
//   stopped   rank 1 enters a recv from rank 0 (deadline 1 s) and is
//             stopped (SIGSTOP) for 3 s by a child process, then resumed
//             (SIGCONT), as mpirun resumes a stopped rank to end it; rank 0
//             is alive (sleeping 10 s before its send). Rank 1's deadline
//             passed while it was stopped: it must say so, not blame rank 0.
// Errors end the job the way an application's main should: print, with the
// rank, and MpiRuntime::abort_job.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_runtime.h"

using namespace sdp;
using namespace sdp::comm;

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  const int rank = MpiRuntime::rank();
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "timeout") {
      auto world = make_world("mpi", {1.0});
      if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(10));
      std::vector<float> values(1000, 1.f);  // [1000]
      Tensor buffer(values.data(), {1000}, DType::f32, Device::cpu);
      world->all_reduce(buffer, ReduceOp::sum);
      std::fprintf(stderr, "[rank %d] the all_reduce finished: no timeout happened\n", rank);
      return 0;
    }
    if (mode == "send_timeout") {
      auto world = make_world("mpi", {1.0});
      std::vector<float> values(2 * 1024 * 1024, 1.f);  // [2M]: 8 MiB
      Tensor buffer(values.data(), {static_cast<int64_t>(values.size())}, DType::f32,
                    Device::cpu);
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        return 0;
      }
      auto pending = world->send_async(buffer, 1);
      pending->wait();
      std::fprintf(stderr, "[rank %d] the send finished without a receiver\n", rank);
      return 0;
    }
    if (mode == "group_timeout") {
      auto world = make_world("mpi", {1.0});
      auto pair = world->subgroup({1, 2});
      float value = 0;
      Tensor buffer(&value, {1}, DType::f32, Device::cpu);
      // Ranks 0 and 2 sleep (neither reaches MPI_Finalize, which would race
      // with the abort inside mpirun), rank 1 waits for rank 2.
      if (rank != 1) std::this_thread::sleep_for(std::chrono::seconds(10));
      if (rank == 1) pair->recv(buffer, 1);
      if (rank == 1) std::fprintf(stderr, "[rank 1] the recv finished without its sender\n");
      return 0;
    }
    if (mode == "stopped") {
      auto world = make_world("mpi", {1.0});
      float value = 0;
      Tensor buffer(&value, {1}, DType::f32, Device::cpu);
      if (rank == 0) {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        world->send(buffer, 1);
        return 0;
      }
      const pid_t self = getpid();
      if (fork() == 0) {
        // The child: only async-signal-safe calls. Stops its parent a moment
        // into the recv below, resumes it 3 s later and leaves.
        const timespec moment{0, 200 * 1000 * 1000}, stop{3, 0};
        nanosleep(&moment, nullptr);
        kill(self, SIGSTOP);
        nanosleep(&stop, nullptr);
        kill(self, SIGCONT);
        _exit(0);
      }
      world->recv(buffer, 0);
      std::fprintf(stderr, "[rank 1] the recv finished\n");
      return 0;
    }
    if (mode == "dies") {
      auto world = make_world("mpi", {120.0});
      if (rank == 1) {
        std::fprintf(stderr, "[rank 1] dying on purpose\n");
        std::abort();
      }
      std::vector<float> values(1000, 1.f);  // [1000]
      Tensor buffer(values.data(), {1000}, DType::f32, Device::cpu);
      world->all_reduce(buffer, ReduceOp::sum);
      std::fprintf(stderr, "[rank %d] the all_reduce finished without its peer\n", rank);
      return 0;
    }
    if (mode == "mismatch") {
      auto world = make_world("mpi");
      require_same_on_all_ranks(*world, "the probe value", "value " + std::to_string(rank));
      std::fprintf(stderr, "[rank %d] the mismatch went unnoticed\n", rank);
      return 0;
    }
    std::fprintf(stderr, "usage: %s timeout|send_timeout|group_timeout|stopped|mismatch|dies\n", argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", rank, e.what());
    MpiRuntime::abort_job(1);
  }
}
