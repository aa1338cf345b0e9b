// Runner of the MPI test executable: MPI first, then the world communicator,
// then Catch2 on every rank. Rank 0 reports as usual; the other ranks write
// their report to a file and print it (each line prefixed with the rank)
// only when they failed. The failure counts are summed over the ranks, so
// a failure on any rank makes every rank exit non-zero.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "comm/mpi_runtime.h"
#include "test/mpi/mpi_test_support.h"

namespace {
std::unique_ptr<sdp::comm::Communicator> g_world;

// A deadlocked test ends the job well within ctest's limit, with a message
// naming the collective (instead of ctest killing a silent job).
constexpr double kTestTimeoutSeconds = 60;
}  // namespace

namespace sdp::testing::mpi {
comm::Communicator& world() { return *g_world; }
}  // namespace sdp::testing::mpi

int main(int argc, char** argv) {
  sdp::comm::MpiRuntime mpi(argc, argv);
  const int rank = sdp::comm::MpiRuntime::rank();
  g_world = sdp::comm::make_world("mpi", {kTestTimeoutSeconds});

  Catch::Session session;
  if (const int bad = session.applyCommandLine(argc, argv); bad != 0) return bad;
  std::filesystem::path log;
  if (rank != 0) {
    log = std::filesystem::temp_directory_path() /
          ("sdp_mpi_tests." + std::to_string(getpid()) + ".rank" + std::to_string(rank) + ".log");
    session.configData().outputFilename = log.string();
    session.configData().useColour = Catch::UseColour::No;  // a file, whatever stdout is
  }
  const int failed = session.run();

  if (rank != 0) {
    if (failed > 0) {
      std::ifstream in(log);
      std::string text, line;
      while (std::getline(in, line)) text += "[rank " + std::to_string(rank) + "] " + line + "\n";
      std::cerr << text << std::flush;
    }
    std::error_code ignored;
    std::filesystem::remove(log, ignored);
  }
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && total > failed)
    std::cerr << (total - failed) << " test case(s) failed on other ranks (their reports are "
              << "the lines prefixed with [rank R])\n";
  g_world.reset();  // before MPI_Finalize
  return total > 0 ? 1 : 0;
}
