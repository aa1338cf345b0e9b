#pragma once
// Error checks wrapped around every CUDA runtime, cuBLAS and cuDNN call: a
// failure throws sdp::Error naming the call, the file and the library's own
// message.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef SDP_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "engine/core/error.h"

#define CUDA_CHECK(call)                                                           \
  do {                                                                             \
    cudaError_t sdp_cuda_status = (call);                                          \
    if (sdp_cuda_status != cudaSuccess)                                            \
      ::sdp::fail(__FILE__, ":", __LINE__, ": ", #call, " failed: ",               \
                  cudaGetErrorName(sdp_cuda_status), " (",                         \
                  cudaGetErrorString(sdp_cuda_status), ")");                       \
  } while (0)

#define CUBLAS_CHECK(call)                                                         \
  do {                                                                             \
    cublasStatus_t sdp_cublas_status = (call);                                     \
    if (sdp_cublas_status != CUBLAS_STATUS_SUCCESS)                                \
      ::sdp::fail(__FILE__, ":", __LINE__, ": ", #call, " failed: ",               \
                  cublasGetStatusString(sdp_cublas_status));                       \
  } while (0)

#ifdef SDP_HAVE_CUDNN
#define CUDNN_CHECK(call)                                                          \
  do {                                                                             \
    cudnnStatus_t sdp_cudnn_status = (call);                                       \
    if (sdp_cudnn_status != CUDNN_STATUS_SUCCESS)                                  \
      ::sdp::fail(__FILE__, ":", __LINE__, ": ", #call, " failed: ",               \
                  cudnnGetErrorString(sdp_cudnn_status));                          \
  } while (0)
#endif

// After a kernel launch: reports a bad launch configuration at once, naming
// the kernel. Errors inside the kernel surface at the next synchronizing call.
#define SDP_CUDA_LAUNCH_CHECK(kernel_name)                                         \
  do {                                                                             \
    cudaError_t sdp_launch_status = cudaGetLastError();                            \
    if (sdp_launch_status != cudaSuccess)                                          \
      ::sdp::fail(__FILE__, ":", __LINE__, ": launch of ", kernel_name, " failed: ", \
                  cudaGetErrorName(sdp_launch_status), " (",                       \
                  cudaGetErrorString(sdp_launch_status), ")");                     \
  } while (0)
