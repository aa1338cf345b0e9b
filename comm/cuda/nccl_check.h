#pragma once
// NCCL_CHECK(call) and CUDA_CHECK(call) for comm/ (which may not include
// kernels/, home of the engine's other CUDA_CHECK): a failed call throws
// sdp::Error naming the rank, the call (the operation), the file and the
// library's own message. Included by comm/cuda sources only.
#include <cuda_runtime.h>
#include <nccl.h>

namespace sdp::comm::detail {
[[noreturn]] void nccl_fail(ncclResult_t result, const char* call, const char* file, int line);
[[noreturn]] void cuda_fail(cudaError_t error, const char* call, const char* file, int line);
}  // namespace sdp::comm::detail

#define NCCL_CHECK(call)                                                            \
  do {                                                                              \
    const ncclResult_t sdp_nccl_status = (call);                                    \
    if (sdp_nccl_status != ncclSuccess)                                             \
      ::sdp::comm::detail::nccl_fail(sdp_nccl_status, #call, __FILE__, __LINE__);   \
  } while (0)

// Same meaning as kernels/cuda/cuda_check.h's; the first definition seen wins.
#ifndef CUDA_CHECK
#define CUDA_CHECK(call)                                                            \
  do {                                                                              \
    const cudaError_t sdp_cuda_status = (call);                                     \
    if (sdp_cuda_status != cudaSuccess)                                             \
      ::sdp::comm::detail::cuda_fail(sdp_cuda_status, #call, __FILE__, __LINE__);   \
  } while (0)
#endif
