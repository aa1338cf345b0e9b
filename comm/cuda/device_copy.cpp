#include "comm/cuda/device_copy.h"

#include "comm/cuda/nccl_check.h"

namespace sdp::comm {

void copy_device_bytes(void* dst, const void* src, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

}  // namespace sdp::comm
