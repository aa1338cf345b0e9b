// The OpenMP threads a process of a run takes (engine/core/thread_choice.h):
// an explicit count, then OMP_NUM_THREADS, then the cores of its affinity
// mask shared among the ranks of its node that run on them.
#include <catch2/catch.hpp>

#include "engine/core/thread_choice.h"

using namespace sdp;

namespace {

ThreadChoiceInputs node(int cores, int on_node, int sharing, int world) {
  ThreadChoiceInputs in;
  in.affinity_cores = cores;
  in.ranks_on_node = on_node;
  in.ranks_sharing_cores = sharing;
  in.world = world;
  return in;
}

}  // namespace

TEST_CASE("choose_threads: the cores of the mask divided by the ranks sharing them", "[threads]") {
  // 4 ranks of a job on 2 cores: one thread each, never 2 x 4.
  ThreadChoice c = choose_threads(node(2, 4, 4, 4));
  CHECK(c.threads == 1);
  CHECK(c.source == ThreadSource::share_of_cores);
  CHECK(c.message ==
        "threads: 1 per rank (2 cores in this rank's affinity mask, 4 ranks on this node; "
        "--threads or OMP_NUM_THREADS to override)");
  CHECK(choose_threads(node(16, 4, 4, 8)).threads == 4);
  CHECK(choose_threads(node(16, 3, 3, 3)).threads == 5);  // rounded down
  // Ranks bound to cores of their own (srun --cpu-bind, mpirun --bind-to)
  // share them with nobody: all their cores.
  c = choose_threads(node(8, 8, 1, 16));
  CHECK(c.threads == 8);
  CHECK(c.message ==
        "threads: 8 per rank (8 cores in this rank's affinity mask, used by 1 of the 8 ranks "
        "on this node; --threads or OMP_NUM_THREADS to override)");
  // A lone process takes every core of its mask.
  c = choose_threads(node(6, 1, 1, 1));
  CHECK(c.threads == 6);
  CHECK(c.message == "threads: 6 (6 cores in this process's affinity mask; --threads or "
                     "OMP_NUM_THREADS to override)");
  CHECK(choose_threads(node(1, 1, 1, 1)).message ==
        "threads: 1 (1 core in this process's affinity mask; --threads or OMP_NUM_THREADS to "
        "override)");
}

TEST_CASE("choose_threads: --threads wins over OMP_NUM_THREADS and the share", "[threads]") {
  ThreadChoiceInputs in = node(2, 4, 4, 4);
  in.requested = 3;
  in.omp_num_threads = "1";
  const ThreadChoice c = choose_threads(in);
  CHECK(c.threads == 3);
  CHECK(c.source == ThreadSource::requested);
  CHECK(c.message == "threads: 3 per rank (--threads)");
}

TEST_CASE("choose_threads: OMP_NUM_THREADS wins over the share", "[threads]") {
  ThreadChoiceInputs in = node(16, 2, 2, 2);
  in.omp_num_threads = "1";
  ThreadChoice c = choose_threads(in);
  CHECK(c.threads == 1);
  CHECK(c.source == ThreadSource::omp_num_threads);
  CHECK(c.message == "threads: 1 per rank (OMP_NUM_THREADS=1; --threads to override)");
  // The outermost level of a nested list, spaces as the runtime allows.
  in.omp_num_threads = " 4 ,2";
  CHECK(choose_threads(in).threads == 4);
  // Empty counts as unset.
  in.omp_num_threads = "";
  c = choose_threads(in);
  CHECK(c.source == ThreadSource::share_of_cores);
  CHECK(c.threads == 8);
}

TEST_CASE("choose_threads: an OMP_NUM_THREADS that is no count is refused", "[threads]") {
  ThreadChoiceInputs in = node(2, 1, 1, 1);
  for (const char* bad : {"abc", "0", "-2", "4x", "99999999999", ",4"}) {
    in.omp_num_threads = bad;
    CHECK_THROWS_WITH(choose_threads(in),
                      Catch::Contains(std::string("OMP_NUM_THREADS = '") + bad +
                                      "' is not a thread count (valid: an integer >= 1"));
  }
}

TEST_CASE("choose_threads: inputs out of range are refused", "[threads]") {
  CHECK_THROWS_WITH(choose_threads(node(0, 1, 1, 1)), Catch::Contains("affinity_cores = 0"));
  CHECK_THROWS_WITH(choose_threads(node(2, 2, 3, 2)),
                    Catch::Contains("ranks_sharing_cores <= ranks_on_node"));
  ThreadChoiceInputs in = node(2, 1, 1, 1);
  in.requested = -1;
  CHECK_THROWS_WITH(choose_threads(in), Catch::Contains("requested = -1"));
}
