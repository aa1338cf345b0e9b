#include "comm/cuda/nccl_check.h"

#include <string>

#include "comm/mpi_runtime.h"
#include "engine/core/error.h"

namespace sdp::comm::detail {

namespace {
std::string rank_prefix() {
  return MpiRuntime::initialized() ? format("[rank ", MpiRuntime::rank(), "] ") : std::string();
}
}  // namespace

void nccl_fail(ncclResult_t result, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  fail(rank_prefix(), call, " failed (", file, ":", line, "): ", ncclGetErrorString(result),
       last && *last ? format(" (", last, ")") : std::string());
}

void cuda_fail(cudaError_t error, const char* call, const char* file, int line) {
  fail(rank_prefix(), call, " failed (", file, ":", line, "): ", cudaGetErrorName(error), " (",
       cudaGetErrorString(error), ")");
}

}  // namespace sdp::comm::detail
