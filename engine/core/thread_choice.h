#pragma once
// How many OpenMP threads a process of a run uses. Several ranks on one node
// that each start one thread per core only contend for the cores (4 ranks
// on 2 cores run ~18x slower than with one thread each), so by default a
// rank takes its share: the cores of its affinity mask divided by the ranks
// of its node that may run on them. An explicit count (--threads or the
// config's threads) wins, then OMP_NUM_THREADS. Pure: the caller reads the
// mask, the node's ranks and the environment (apps/sdp-train).
#include <optional>
#include <string>

namespace sdp {

struct ThreadChoiceInputs {
  int requested = 0;                           // --threads / config threads; 0 = not given
  std::optional<std::string> omp_num_threads;  // the environment's value, when set
  int affinity_cores = 1;                      // CPUs in this process's affinity mask
  int ranks_on_node = 1;                       // ranks of the job on this node
  int ranks_sharing_cores = 1;                 // of those, the ones that may run on these cores
  int world = 1;                               // ranks of the job (1: a lone process)
};

enum class ThreadSource { requested, omp_num_threads, share_of_cores };

struct ThreadChoice {
  int threads = 1;  // the OpenMP team size of the run's parallel regions
  ThreadSource source = ThreadSource::share_of_cores;
  // One line for the start of the run, e.g. "threads: 1 per rank (2 cores in
  // this rank's affinity mask, 4 ranks on this node; --threads or
  // OMP_NUM_THREADS to override)".
  std::string message;
};

// Throws sdp::Error naming OMP_NUM_THREADS when its value is not a thread
// count (an integer >= 1, or a comma-separated list of them whose first is
// the count of the outermost level); an empty value counts as unset.
// Throws when a count of the inputs is below 1.
ThreadChoice choose_threads(const ThreadChoiceInputs& in);

}  // namespace sdp
