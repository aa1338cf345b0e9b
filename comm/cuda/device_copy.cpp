#include "comm/cuda/device_copy.h"

#include "comm/cuda/nccl_check.h"
#include "engine/core/device_stream.h"

namespace sdp::comm {

void copy_device_bytes(void* dst, const void* src, size_t bytes) {
  // On the thread's compute stream, in order with the kernels that wrote
  // `src` (a non-blocking stream does not order itself with a plain
  // cudaMemcpy), and finished before returning, as every call here is.
  const auto stream = static_cast<cudaStream_t>(current_compute_stream());
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sdp::comm
