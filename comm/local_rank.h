#pragma once
// Which GPU a rank of a multi-GPU node takes: its rank among the processes
// of its node (the node-local rank) modulo the GPUs the node shows it. A
// launcher that starts several ranks per node (mpirun, srun, mpiexec.hydra)
// announces the node-local rank in the environment; with MPI up, the
// ranks that share a node's memory say it exactly (MPI_COMM_TYPE_SHARED).
#include <optional>
#include <string>

namespace sdp::comm {

struct NodeLocalRank {
  int rank = 0;
  // Where it came from: an environment variable's name, "MPI_COMM_TYPE_SHARED",
  // or "default" (a lone process).
  std::string source;
};

// The environment variables that carry the node-local rank, in the order
// they are read: Open MPI's mpirun, srun (also under --mpi=pmix), MPICH's
// and Intel MPI's Hydra, Cray PALS, MVAPICH.
const char* const* local_rank_variables();

// The node-local rank the launcher set in the environment (the first of
// local_rank_variables() that is set); nullopt when none is. Throws
// sdp::Error naming the variable when its value is not an integer >= 0.
std::optional<NodeLocalRank> local_rank_from_environment();

// With MPI initialized: this process's rank among the ranks of
// MPI_COMM_WORLD on its node (collective: every rank of the world must call
// it). Otherwise the environment's, else 0 ("default").
NodeLocalRank node_local_rank();

// How many ranks of the job run on this process's node, and how many of
// those may run on CPUs of this process's affinity mask (itself included):
// the ranks that share its cores, among which the OpenMP threads of a node
// are divided (engine/core/thread_choice.h).
struct NodeRanks {
  int on_node = 1;
  int sharing_cpus = 1;  // <= on_node
  // Where the count came from: "MPI_COMM_TYPE_SHARED" (the masks compared
  // too), an environment variable's name (every rank on the node counted as
  // sharing), or "default" (a lone process).
  std::string source;
};

// The environment variables that carry the number of ranks on a node, in
// the order they are read: Open MPI's mpirun, MPICH's and Intel MPI's
// Hydra, MVAPICH, srun (SLURM_STEP_TASKS_PER_NODE, used only when every
// node of the step runs the same number of tasks: "4" or "4(x2)").
const char* const* local_size_variables();

// The ranks on this node as the launcher set them in the environment (the
// first of local_size_variables() that is set and, for srun's, uniform);
// nullopt when none is. Throws sdp::Error naming the variable when its
// value is not a count >= 1.
std::optional<NodeRanks> node_ranks_from_environment();

// With MPI initialized: the ranks of MPI_COMM_WORLD on this node
// (MPI_COMM_TYPE_SHARED), and those whose affinity masks overlap this one's
// (collective: every rank of the world must call it). Otherwise the
// environment's, else 1 ("default").
NodeRanks node_ranks();

// The GPU of a node-local rank among `gpus` visible ones: local_rank % gpus.
// Throws when gpus < 1 or local_rank < 0.
int gpu_for_local_rank(int local_rank, int gpus);

}  // namespace sdp::comm
