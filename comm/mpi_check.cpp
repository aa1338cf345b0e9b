#if SDP_HAVE_MPI
#include "comm/mpi_check.h"

#include "engine/core/error.h"

namespace sdp::comm::detail {

void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) text[0] = '\0';
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string who = rank >= 0 ? format("[rank ", rank, "] ") : std::string();
  fail(who, call, " failed (", file, ":", line, "): ", text, " (MPI error ", code, ")");
}

}  // namespace sdp::comm::detail
#endif
