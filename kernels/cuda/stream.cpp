#include "kernels/cuda/stream.h"

namespace sdp::cuda {

namespace {
thread_local cudaStream_t current = nullptr;
}

cudaStream_t compute_stream() { return current; }
void set_compute_stream(cudaStream_t stream) { current = stream; }

}  // namespace sdp::cuda
