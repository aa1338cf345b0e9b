#pragma once
// The stream every CUDA op of this thread is queued on (the typed face of
// engine/core/device_stream.h). Default: the legacy default stream (0). The
// trainer sets a stream of its own so that communication on the NCCL
// communicator's stream can overlap compute; the two are ordered with
// events (the communicator waits for this stream before each collective).
#include <cuda_runtime.h>

namespace sdp::cuda {

cudaStream_t compute_stream();
void set_compute_stream(cudaStream_t stream);
// Blocks the host until the compute stream has run everything queued.
void synchronize_compute_stream();
// A non-blocking stream for compute (ops/compute_stream.h owns one), and its
// release after everything queued on it has run.
cudaStream_t create_compute_stream();
void destroy_compute_stream(cudaStream_t stream);

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
