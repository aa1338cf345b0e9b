#include "kernels/cuda/stream.h"

#include "kernels/cuda/cuda_check.h"

namespace sdp::cuda {

namespace {
thread_local cudaStream_t current = nullptr;
}

cudaStream_t compute_stream() { return current; }
void set_compute_stream(cudaStream_t stream) { current = stream; }
void synchronize_compute_stream() { CUDA_CHECK(cudaStreamSynchronize(current)); }

}  // namespace sdp::cuda
