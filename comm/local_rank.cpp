#include "comm/local_rank.h"

#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

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

const char* const* local_size_variables() {
  static const char* const names[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                      "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE",
                                      nullptr};
  return names;
}

namespace {

// A count >= 1 from the start of `text`; *end is left after its digits.
std::optional<long> leading_count(const char* text, char** end) {
  if (*text < '0' || *text > '9') return std::nullopt;
  errno = 0;
  const long value = std::strtol(text, end, 10);
  if (errno != 0 || value < 1 || value > std::numeric_limits<int>::max()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<NodeRanks> node_ranks_from_environment() {
  for (const char* const* name = local_size_variables(); *name != nullptr; ++name) {
    const char* text = std::getenv(*name);
    if (text == nullptr) continue;
    const bool slurm = std::strcmp(*name, "SLURM_STEP_TASKS_PER_NODE") == 0;
    char* end = nullptr;
    const std::optional<long> value = leading_count(text, &end);
    if (!value)
      fail("environment variable ", *name, " = '", text, "' is not a count of ranks on a node ",
           slurm ? "(valid: N or N(xK) with integers N >= 1, or a list of them)"
                 : "(valid: an integer >= 1)");
    if (slurm) {
      // "4(x2)": 4 tasks on each of 2 nodes. A list ("4(x2),3") says the
      // nodes differ, and which entry is this node's is not read here.
      if (*end == '(') {
        char* after = nullptr;
        if (end[1] != 'x' || !leading_count(end + 2, &after) || *after != ')')
          fail("environment variable ", *name, " = '", text, "' is not a count of ranks on a "
               "node (valid: N or N(xK) with integers N >= 1, or a list of them)");
        end = after + 1;
      }
      if (*end == ',') continue;
    }
    if (*end != '\0')
      fail("environment variable ", *name, " = '", text, "' is not a count of ranks on a node ",
           slurm ? "(valid: N or N(xK) with integers N >= 1, or a list of them)"
                 : "(valid: an integer >= 1)");
    const int count = static_cast<int>(*value);
    return NodeRanks{count, count, *name};
  }
  return std::nullopt;
}

NodeRanks node_ranks() {
#if SDP_HAVE_MPI
  if (MpiRuntime::initialized()) {
    MPI_Comm node = MPI_COMM_NULL;
    int world_rank = 0, on_node = 0, local = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &on_node));
    MPI_CHECK(MPI_Comm_rank(node, &local));
    // Each rank's affinity mask (a full one where it cannot be read): the
    // ranks whose masks overlap this one's compete for its cores; ranks
    // bound to other cores do not.
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) std::memset(&mine, 0xff, sizeof mine);
    std::vector<cpu_set_t> all(static_cast<size_t>(on_node));
    MPI_CHECK(MPI_Allgather(&mine, static_cast<int>(sizeof mine), MPI_BYTE, all.data(),
                            static_cast<int>(sizeof mine), MPI_BYTE, node));
    MPI_CHECK(MPI_Comm_free(&node));
    int sharing = 0;
    for (int r = 0; r < on_node; ++r) {
      cpu_set_t both;
      CPU_AND(&both, &mine, &all[static_cast<size_t>(r)]);
      if (r == local || CPU_COUNT(&both) > 0) ++sharing;
    }
    return {on_node, sharing, "MPI_COMM_TYPE_SHARED"};
  }
#endif
  if (auto from_env = node_ranks_from_environment()) return *from_env;
  return {1, 1, "default"};
}

int gpu_for_local_rank(int local_rank, int gpus) {
  if (gpus < 1) fail("gpu_for_local_rank: gpus = ", gpus, " is invalid (valid: >= 1)");
  if (local_rank < 0)
    fail("gpu_for_local_rank: local_rank = ", local_rank, " is invalid (valid: >= 0)");
  return local_rank % gpus;
}

}  // namespace sdp::comm
