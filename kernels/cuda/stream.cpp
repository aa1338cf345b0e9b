#include "kernels/cuda/stream.h"

#include "engine/core/device_stream.h"
#include "kernels/cuda/cuda_check.h"

namespace sdp::cuda {

cudaStream_t compute_stream() { return static_cast<cudaStream_t>(current_compute_stream()); }
void set_compute_stream(cudaStream_t stream) { set_current_compute_stream(stream); }
void synchronize_compute_stream() { CUDA_CHECK(cudaStreamSynchronize(compute_stream())); }

cudaStream_t create_compute_stream() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void destroy_compute_stream(cudaStream_t stream) {
  // Never throws (called from destructors); a failure here is only reported.
  if (cudaStreamSynchronize(stream) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess)
    cudaGetLastError();
}

}  // namespace sdp::cuda
