#include "apps/sdp-train/thread_setup.h"

#include <omp.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "comm/local_rank.h"
#include "engine/core/error.h"

namespace sdp::app {

ThreadChoice set_run_threads(const TrainConfig& config, const comm::Communicator* world) {
  // Every rank takes part in the node's count before any can fail.
  const comm::NodeRanks node = comm::node_ranks();
  ThreadChoiceInputs in;
  in.requested = config.threads;
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) in.omp_num_threads = std::string(omp);
  in.affinity_cores = max_threads();
  in.ranks_on_node = node.on_node;
  in.ranks_sharing_cores = node.sharing_cpus;
  in.world = world ? world->size() : 1;
  ThreadChoice choice;
  try {
    choice = choose_threads(in);
  } catch (const Error& e) {
    throw PermanentError(e.what());
  }
  // OMP_NUM_THREADS is the runtime's own setting (with its nested levels):
  // left to it. The trainer sets a requested count too; set here, the
  // choice holds from the first parallel region on.
  if (choice.source != ThreadSource::omp_num_threads) omp_set_num_threads(choice.threads);
  return choice;
}

}  // namespace sdp::app
