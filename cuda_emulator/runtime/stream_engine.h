#pragma once
// Streams and events of the emulated device, and the stream-order checker.
//
// Execution: work runs in stream order on the host thread that drives
// progress (the call that queued it, when its stream is idle, else the next
// runtime call that makes progress). Only communication stays in flight.
//
// Ordering: each stream keeps a vector clock, one entry per stream: the
// number of operations of that stream that its next operation must follow.
// An operation ticks its own stream's entry; an event captures the clock of
// its stream; a wait on an event joins that clock in; the legacy default
// stream joins every blocking stream's clock (and they join its clock), as
// CUDA's implicit synchronization does; whatever the host has synchronized
// with joins every stream. An operation may start once every operation its
// clock names has finished.
//
// Checking: every device byte range remembers its last writer and its last
// reader on each stream. An access that is not ordered after a conflicting
// earlier access by those clocks (a write after any access, a read after a
// write) is a race on a GPU, whatever order the emulator happened to run
// them in: it is reported as a fault naming both operations and the range.
// PyTorch's CUDA stream sanitizer checks the same relation for tensors.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"

namespace sdp::emu {

// The stream a handle names (the legacy default stream for 0,
// cudaStreamLegacy and cudaStreamPerThread); -1 when it names no live stream.
int stream_id(cudaStream_t stream);

cudaError_t create_stream(cudaStream_t* stream, bool blocking);
cudaError_t destroy_stream(cudaStream_t stream);
// Finishes the stream's work; the host is then ordered after it.
cudaError_t synchronize_stream(cudaStream_t stream);
// cudaSuccess when the stream's work has finished (the host is then ordered
// after it), else cudaErrorNotReady.
cudaError_t query_stream(cudaStream_t stream);
cudaError_t synchronize_device();

cudaError_t create_event(cudaEvent_t* event);
cudaError_t destroy_event(cudaEvent_t event);
cudaError_t record_event(cudaEvent_t event, cudaStream_t stream);
cudaError_t wait_event(cudaStream_t stream, cudaEvent_t event);
cudaError_t query_event(cudaEvent_t event);
cudaError_t synchronize_event(cudaEvent_t event);

// Queues work and waits until it has finished (for copies into pageable
// host memory, which CUDA completes before the call returns).
cudaError_t submit_and_wait(cudaStream_t stream, StreamWork work);

// Forgets what the checker knows of [begin, end) (the memory was freed).
void forget_accesses(uintptr_t begin, uintptr_t end);

}  // namespace sdp::emu
