// Prints, for each rank of the job, its node-local rank as MPI finds it
// (the ranks sharing its node) and as the launcher's environment says it,
// and the GPU it would take among `gpus` (argv[1]): the lines the
// mpi.launch.local_ranks entry checks for several ranks on one host.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "comm/local_rank.h"
#include "comm/mpi_runtime.h"

using namespace sdp::comm;

int main(int argc, char** argv) {
  MpiRuntime mpi(argc, argv);
  try {
    const int gpus = argc > 1 ? std::atoi(argv[1]) : 1;
    const NodeLocalRank local = node_local_rank();
    const auto from_env = local_rank_from_environment();
    std::printf("rank %d of %d: local rank %d (%s), environment %s, gpu %d of %d\n",
                MpiRuntime::rank(), MpiRuntime::size(), local.rank, local.source.c_str(),
                from_env ? (std::to_string(from_env->rank) + " (" + from_env->source + ")").c_str()
                         : "none",
                gpu_for_local_rank(local.rank, gpus), gpus);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", MpiRuntime::rank(), e.what());
    MpiRuntime::abort_job(2);
  }
}
