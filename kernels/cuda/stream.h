#pragma once
// The stream every CUDA op of this thread is queued on. Default: the legacy
// default stream (0), which orders itself with every blocking stream,
// including the NCCL communicator's; code that overlaps work sets its own
// stream here and orders the streams with events.
#include <cuda_runtime.h>

namespace sdp::cuda {

cudaStream_t compute_stream();
void set_compute_stream(cudaStream_t stream);
// Blocks the host until the compute stream has run everything queued.
void synchronize_compute_stream();

// Sets the compute stream for a scope and restores the previous one.
class ComputeStreamScope {
 public:
  explicit ComputeStreamScope(cudaStream_t stream) : previous_(compute_stream()) {
    set_compute_stream(stream);
  }
  ~ComputeStreamScope() { set_compute_stream(previous_); }
  ComputeStreamScope(const ComputeStreamScope&) = delete;
  ComputeStreamScope& operator=(const ComputeStreamScope&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace sdp::cuda
