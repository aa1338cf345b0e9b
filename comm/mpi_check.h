#pragma once
// MPI_CHECK(call): a failed MPI call throws sdp::Error naming the rank, the
// call (the operation) and MPI's own error string. Errors are returned, not
// fatal, on every communicator the engine makes (MpiRuntime sets
// MPI_ERRORS_RETURN), so this is where they surface.
#include <mpi.h>

namespace sdp::comm::detail {
[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line);
}  // namespace sdp::comm::detail

#define MPI_CHECK(call)                                                          \
  do {                                                                           \
    const int sdp_mpi_status = (call);                                           \
    if (sdp_mpi_status != MPI_SUCCESS)                                           \
      ::sdp::comm::detail::mpi_fail(sdp_mpi_status, #call, __FILE__, __LINE__);  \
  } while (0)
