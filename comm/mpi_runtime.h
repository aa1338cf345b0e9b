#pragma once
// MPI for the whole process: one MpiRuntime in main, made before any
// communicator and destroyed after the last one. Does not expose <mpi.h>.
//
// Typical main:
//   std::optional<sdp::comm::MpiRuntime> mpi;
//   if (sdp::comm::MpiRuntime::launched_by_mpi()) mpi.emplace(argc, argv);
//   auto world = sdp::comm::make_world(mpi ? "mpi" : "local");
//
// In a build without MPI the class still exists: launched_by_mpi() works,
// constructing a runtime fails with a message, initialized() is false.
#include <string>

namespace sdp::comm {

class MpiRuntime {
 public:
  // MPI_Init_thread with MPI_THREAD_FUNNELED: only the thread that made the
  // runtime calls MPI (OpenMP threads inside ops never do). If MPI is
  // already initialized (by a host program), this runtime neither
  // re-initializes nor finalizes it. Errors on MPI_COMM_WORLD are returned,
  // not fatal, so that MPI_CHECK can report them.
  MpiRuntime(int& argc, char**& argv);
  MpiRuntime();
  ~MpiRuntime();  // MPI_Finalize
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // True when this process was started by mpirun/mpiexec, a PMI or PMIx
  // launcher or srun: OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMI_RANK or PMIX_RANK
  // is set, or SLURM_PROCID with SLURM_STEP_ID (a task of an srun step, not
  // the sbatch script itself).
  static bool launched_by_mpi();
  // True when this build has MPI (SDP_HAVE_MPI).
  static bool available();
  // MPI_Init done and MPI_Finalize not yet.
  static bool initialized();
  // Rank and size of MPI_COMM_WORLD; fail when MPI is not initialized.
  static int rank();
  static int size();
  // Ends every rank of the job with `code`: MPI_Abort when MPI is
  // initialized, std::exit otherwise. Flushes stdout and stderr first.
  [[noreturn]] static void abort_job(int code);

 private:
  void init(int* argc, char*** argv);
  bool owns_ = false;
};

}  // namespace sdp::comm
