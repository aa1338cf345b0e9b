// Entry point of the emulated-NCCL tests under mpiexec: MPI is initialized
// here, as the engine's MpiRuntime does (the emulated NCCL never initializes
// it), emulator faults throw so a test can show one is caught, and a test
// that fails on one rank ends the whole job: its peers would otherwise wait
// in the next collective until the timeout.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <iostream>

#include "cuda_emulator/runtime/stream_work.h"

namespace {

struct EndJobOnFailure : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    if (stats.totals.assertions.failed == 0) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::cout.flush();
    std::cerr << "[rank " << rank << "] test case '" << stats.testInfo.name
              << "' failed: ending the job" << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(EndJobOnFailure)

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  sdp::emu::set_faults_throw(true);
  const int rc = Catch::Session().run(argc, argv);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
