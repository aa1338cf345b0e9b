#pragma once
// The device stream this thread queues compute work on, as an opaque handle
// (a cudaStream_t on CUDA builds; nullptr = the legacy default stream).
// It lives here, below kernels and comm, because both need it: kernels
// launch on it, and the NCCL communicator orders its own stream after it
// with an event, so a collective reads buffers only once the kernels that
// wrote them have run. kernels/cuda/stream.h is the typed face of it.
namespace sdp {

void* current_compute_stream();
void set_current_compute_stream(void* stream);

}  // namespace sdp
