#include "comm/local_rank.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "comm/mpi_runtime.h"
#include "engine/core/error.h"
#if SDP_HAVE_MPI
#include <mpi.h>

#include "comm/mpi_check.h"
#endif

namespace sdp::comm {

const char* const* local_rank_variables() {
  static const char* const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                      "MPI_LOCALRANKID", "PALS_LOCAL_RANKID",
                                      "MV2_COMM_WORLD_LOCAL_RANK", nullptr};
  return names;
}

std::optional<NodeLocalRank> local_rank_from_environment() {
  for (const char* const* name = local_rank_variables(); *name != nullptr; ++name) {
    const char* text = std::getenv(*name);
    if (text == nullptr) continue;
    errno = 0;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || errno != 0 || value < 0 ||
        value > std::numeric_limits<int>::max())
      fail("environment variable ", *name, " = '", text,
           "' is not a node-local rank (valid: an integer >= 0)");
    return NodeLocalRank{static_cast<int>(value), *name};
  }
  return std::nullopt;
}

NodeLocalRank node_local_rank() {
#if SDP_HAVE_MPI
  if (MpiRuntime::initialized()) {
    MPI_Comm node = MPI_COMM_NULL;
    int world_rank = 0, local = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local));
    MPI_CHECK(MPI_Comm_free(&node));
    return {local, "MPI_COMM_TYPE_SHARED"};
  }
#endif
  if (auto from_env = local_rank_from_environment()) return *from_env;
  return {0, "default"};
}

int gpu_for_local_rank(int local_rank, int gpus) {
  if (gpus < 1) fail("gpu_for_local_rank: gpus = ", gpus, " is invalid (valid: >= 1)");
  if (local_rank < 0)
    fail("gpu_for_local_rank: local_rank = ", local_rank, " is invalid (valid: >= 0)");
  return local_rank % gpus;
}

}  // namespace sdp::comm
