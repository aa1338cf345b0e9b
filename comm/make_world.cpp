// Backend choice by name; the only file that knows every backend.
#include "comm/communicator.h"
#include "comm/emulated_communicator.h"
#include "comm/local_communicator.h"
#if SDP_HAVE_MPI
#include "comm/mpi_communicator.h"
#endif
#if SDP_HAVE_NCCL
#include "comm/cuda/nccl_communicator.h"
#endif

namespace sdp::comm {

std::unique_ptr<Communicator> make_world(std::string_view backend, CommOptions options,
                                         int emulate_world, int emulate_rank) {
  if (backend == "local") return std::make_unique<LocalCommunicator>(options);
  if (backend == "emulated")
    return std::make_unique<EmulatedCommunicator>(emulate_world, emulate_rank, options);
  if (backend == "mpi") {
#if SDP_HAVE_MPI
    return MpiCommunicator::world(options);
#else
    fail("communicator backend 'mpi' is unavailable: this build has no MPI (install OpenMPI "
         "and reconfigure; available here: local, emulated)");
#endif
  }
  if (backend == "nccl") {
#if SDP_HAVE_NCCL
    return NcclCommunicator::world(options);
#elif SDP_HAVE_MPI
    fail("communicator backend 'nccl' is unavailable: this build has no CUDA toolkit with NCCL "
         "(available here: local, emulated, mpi)");
#else
    fail("communicator backend 'nccl' is unavailable: this build has no CUDA toolkit with NCCL "
         "(available here: local, emulated)");
#endif
  }
  fail("unknown communicator backend '", backend, "' (valid: local, emulated, mpi, nccl)");
}

}  // namespace sdp::comm
