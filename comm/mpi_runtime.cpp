#include "comm/mpi_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "engine/core/error.h"
#if SDP_HAVE_MPI
#include <mpi.h>

#include "comm/mpi_check.h"
#endif

namespace sdp::comm {

MpiRuntime::MpiRuntime(int& argc, char**& argv) { init(&argc, &argv); }
MpiRuntime::MpiRuntime() { init(nullptr, nullptr); }

bool MpiRuntime::launched_by_mpi() {
  // mpirun (Open MPI), Hydra and PMI-1/2 launchers, PMIx (srun --mpi=pmix,
  // prterun).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(var) != nullptr) return true;
  // A task of an srun step. SLURM_PROCID alone is also set in an sbatch
  // script itself, which is one process, not a rank of a job; only srun
  // sets SLURM_STEP_ID.
  return std::getenv("SLURM_PROCID") != nullptr && std::getenv("SLURM_STEP_ID") != nullptr;
}

#if SDP_HAVE_MPI

bool MpiRuntime::available() { return true; }

void MpiRuntime::init(int* argc, char*** argv) {
  int already = 0;
  MPI_CHECK(MPI_Initialized(&already));
  if (already) return;
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  owns_ = true;
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (provided < MPI_THREAD_FUNNELED)
    fail("MPI provides thread level ", provided, " but the engine needs MPI_THREAD_FUNNELED (",
         MPI_THREAD_FUNNELED, "): OpenMP threads run while the main thread calls MPI");
}

MpiRuntime::~MpiRuntime() {
  if (owns_ && initialized()) MPI_Finalize();
}

bool MpiRuntime::initialized() {
  int init = 0, finalized = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&finalized);
  return init && !finalized;
}

int MpiRuntime::rank() {
  if (!initialized())
    fail("MpiRuntime::rank(): MPI is not initialized (create an MpiRuntime in main)");
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  return r;
}

int MpiRuntime::size() {
  if (!initialized())
    fail("MpiRuntime::size(): MPI is not initialized (create an MpiRuntime in main)");
  int s = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &s));
  return s;
}

void MpiRuntime::abort_job(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

#else  // no MPI in this build

bool MpiRuntime::available() { return false; }

void MpiRuntime::init(int*, char***) {
  fail("this build has no MPI, so it cannot run as part of an MPI job (install OpenMPI and "
       "reconfigure; single-process runs need no MpiRuntime)");
}

MpiRuntime::~MpiRuntime() = default;
bool MpiRuntime::initialized() { return false; }
int MpiRuntime::rank() { fail("MpiRuntime::rank(): this build has no MPI"); }
int MpiRuntime::size() { fail("MpiRuntime::size(): this build has no MPI"); }

void MpiRuntime::abort_job(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::exit(code);
}

#endif

}  // namespace sdp::comm
