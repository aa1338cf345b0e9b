// How a process learns it is a rank of a launched job and which GPU of its
// node it takes: the launchers' environment variables (mpirun, srun, Hydra,
// PMI/PMIx), read with the environment set by the test. Multi-rank launches
// on one host are held by the mpi.launch.* entries (test/mpi).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/local_rank.h"
#include "comm/mpi_runtime.h"

using namespace sdp::comm;

namespace {

// Every launcher variable these functions read, cleared for the test's
// lifetime and put back afterwards (ctest itself may run inside a job).
class LauncherEnvironment {
 public:
  LauncherEnvironment() {
    std::vector<std::string> names = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK",
                                      "PMIX_RANK", "SLURM_PROCID", "SLURM_STEP_ID"};
    for (const char* const* n = local_rank_variables(); *n != nullptr; ++n) names.push_back(*n);
    for (const char* const* n = local_size_variables(); *n != nullptr; ++n) names.push_back(*n);
    for (const std::string& name : names) {
      const char* value = std::getenv(name.c_str());
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name.c_str());
    }
  }
  ~LauncherEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("launched_by_mpi: a plain process is not a rank of a job", "[comm][launch]") {
  LauncherEnvironment env;
  CHECK_FALSE(MpiRuntime::launched_by_mpi());
}

TEST_CASE("launched_by_mpi: mpirun, PMI, PMIx and srun launches are recognised",
          "[comm][launch]") {
  const char* variable = GENERATE("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK");
  LauncherEnvironment env;
  env.set(variable, "0");
  INFO(variable);
  CHECK(MpiRuntime::launched_by_mpi());
}

TEST_CASE("launched_by_mpi: an srun task is a rank, the sbatch script itself is not",
          "[comm][launch]") {
  LauncherEnvironment env;
  env.set("SLURM_PROCID", "0");  // also set in the batch script
  CHECK_FALSE(MpiRuntime::launched_by_mpi());
  env.set("SLURM_STEP_ID", "0");  // only srun sets it
  CHECK(MpiRuntime::launched_by_mpi());
}

TEST_CASE("local_rank_from_environment: none set, then each launcher's variable",
          "[comm][launch]") {
  LauncherEnvironment env;
  CHECK_FALSE(local_rank_from_environment().has_value());
  const NodeLocalRank lone = node_local_rank();  // MPI is not initialized here
  CHECK(lone.rank == 0);
  CHECK(lone.source == "default");

  const char* variable = GENERATE("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                  "MPI_LOCALRANKID", "PALS_LOCAL_RANKID",
                                  "MV2_COMM_WORLD_LOCAL_RANK");
  env.set(variable, "3");
  const auto found = local_rank_from_environment();
  REQUIRE(found.has_value());
  CHECK(found->rank == 3);
  CHECK(found->source == variable);
  const NodeLocalRank local = node_local_rank();
  CHECK(local.rank == 3);
  CHECK(local.source == variable);
}

TEST_CASE("local_rank_from_environment: Open MPI's variable wins over srun's", "[comm][launch]") {
  // mpirun inside an sbatch allocation inherits the script's SLURM_LOCALID
  // (0 for every rank); the launcher that started the ranks says the truth.
  LauncherEnvironment env;
  env.set("SLURM_LOCALID", "0");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "2");
  const auto found = local_rank_from_environment();
  REQUIRE(found.has_value());
  CHECK(found->rank == 2);
  CHECK(found->source == "OMPI_COMM_WORLD_LOCAL_RANK");
}

TEST_CASE("local_rank_from_environment: a value that is no rank names the variable",
          "[comm][launch]") {
  const char* value = GENERATE("", "abc", "-1", "2x", "99999999999");
  LauncherEnvironment env;
  env.set("SLURM_LOCALID", value);
  INFO("value '" << value << "'");
  CHECK_THROWS_WITH(local_rank_from_environment(),
                    Catch::Contains("environment variable SLURM_LOCALID = '" + std::string(value) +
                                    "' is not a node-local rank (valid: an integer >= 0)"));
}

TEST_CASE("node_ranks_from_environment: none set, then each launcher's variable",
          "[comm][launch]") {
  LauncherEnvironment env;
  CHECK_FALSE(node_ranks_from_environment().has_value());
  const NodeRanks lone = node_ranks();  // MPI is not initialized here
  CHECK(lone.on_node == 1);
  CHECK(lone.sharing_cpus == 1);
  CHECK(lone.source == "default");

  const char* variable = GENERATE("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                  "MV2_COMM_WORLD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE");
  env.set(variable, "4");
  const NodeRanks found = node_ranks();
  CHECK(found.on_node == 4);
  CHECK(found.sharing_cpus == 4);  // without MPI, every rank of the node counts as sharing
  CHECK(found.source == variable);
}

TEST_CASE("node_ranks_from_environment: srun's count only when every node has the same",
          "[comm][launch]") {
  LauncherEnvironment env;
  env.set("SLURM_STEP_TASKS_PER_NODE", "8(x2)");
  auto found = node_ranks_from_environment();
  REQUIRE(found.has_value());
  CHECK(found->on_node == 8);
  // Nodes with different counts: this node's is not known from this alone.
  env.set("SLURM_STEP_TASKS_PER_NODE", "8(x2),3");
  CHECK_FALSE(node_ranks_from_environment().has_value());
  // Open MPI's variable comes first (mpirun inside an allocation).
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  found = node_ranks_from_environment();
  REQUIRE(found.has_value());
  CHECK(found->on_node == 2);
  CHECK(found->source == "OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST_CASE("node_ranks_from_environment: a value that is no count names the variable",
          "[comm][launch]") {
  const char* value = GENERATE("", "abc", "0", "-1", "2x", "99999999999");
  LauncherEnvironment env;
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", value);
  INFO("value '" << value << "'");
  CHECK_THROWS_WITH(node_ranks_from_environment(),
                    Catch::Contains("environment variable OMPI_COMM_WORLD_LOCAL_SIZE = '" +
                                    std::string(value) +
                                    "' is not a count of ranks on a node (valid: an integer >= 1)"));
}

TEST_CASE("node_ranks_from_environment: an srun count of another form names the variable",
          "[comm][launch]") {
  const char* slurm = GENERATE("4(x)", "4(y2)", "4(x2", "x4");
  LauncherEnvironment env;
  env.set("SLURM_STEP_TASKS_PER_NODE", slurm);
  INFO("SLURM_STEP_TASKS_PER_NODE '" << slurm << "'");
  CHECK_THROWS_WITH(node_ranks_from_environment(),
                    Catch::Contains("SLURM_STEP_TASKS_PER_NODE = '" + std::string(slurm) +
                                    "' is not a count of ranks on a node (valid: N or N(xK)"));
}

TEST_CASE("gpu_for_local_rank: node-local rank modulo the GPUs", "[comm][launch]") {
  CHECK(gpu_for_local_rank(0, 1) == 0);
  CHECK(gpu_for_local_rank(3, 1) == 0);
  CHECK(gpu_for_local_rank(3, 4) == 3);
  CHECK(gpu_for_local_rank(5, 4) == 1);
  CHECK(gpu_for_local_rank(7, 8) == 7);
  CHECK_THROWS_WITH(gpu_for_local_rank(0, 0), Catch::Contains("gpus = 0 is invalid (valid: >= 1)"));
  CHECK_THROWS_WITH(gpu_for_local_rank(-1, 2),
                    Catch::Contains("local_rank = -1 is invalid (valid: >= 0)"));
}
