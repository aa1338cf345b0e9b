// Host <-> device and device <-> device copies for ops::transfer.
#include "kernels/cuda/transfer.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {

void transfer(const Tensor& src, Tensor& dst) {
  const size_t bytes = src.bytes();
  if (bytes == 0) return;
  const bool from_host = src.device() == Device::cpu;
  const bool to_host = dst.device() == Device::cpu;
  const cudaMemcpyKind kind = from_host ? (to_host ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                                        : (to_host ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyDeviceToDevice);
  cudaStream_t stream = compute_stream();
  // Stream order puts the copy after every kernel queued before it, so it
  // reads finished results and later kernels see what it wrote.
  CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), bytes, kind, stream));
  // The host buffer may be read or reused as soon as we return.
  if (from_host || to_host) CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sdp::cuda
