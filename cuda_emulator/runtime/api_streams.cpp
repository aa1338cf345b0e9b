// Stream, event and synchronization calls of the emulated runtime (the
// semantics are in stream_engine.h).
#include <cuda_runtime_api.h>

#include "cuda_emulator/runtime/api_state.h"
#include "cuda_emulator/runtime/stream_engine.h"

using sdp::emu::note_status;

extern "C" {

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return note_status(sdp::emu::create_stream(stream, true));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (flags != cudaStreamDefault && flags != cudaStreamNonBlocking) {
    sdp::emu::say("cudaStreamCreateWithFlags: flags %u (valid: cudaStreamDefault, "
                  "cudaStreamNonBlocking)", flags);
    return note_status(cudaErrorInvalidValue);
  }
  return note_status(sdp::emu::create_stream(stream, flags == cudaStreamDefault));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return note_status(sdp::emu::destroy_stream(stream));
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return note_status(sdp::emu::synchronize_stream(stream));
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return note_status(sdp::emu::query_stream(stream));
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (flags != 0) {
    sdp::emu::say("cudaStreamWaitEvent: flags %u (valid: 0)", flags);
    return note_status(cudaErrorInvalidValue);
  }
  return note_status(sdp::emu::wait_event(stream, event));
}
cudaError_t cudaDeviceSynchronize() { return note_status(sdp::emu::synchronize_device()); }

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return note_status(sdp::emu::create_event(event));
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  // Timing is meaningless on the emulator; every flag combination the
  // runtime defines is accepted and only ordering is modelled.
  if (flags & ~static_cast<unsigned>(cudaEventBlockingSync | cudaEventDisableTiming |
                                     cudaEventInterprocess)) {
    sdp::emu::say("cudaEventCreateWithFlags: flags %u are not event flags", flags);
    return note_status(cudaErrorInvalidValue);
  }
  return note_status(sdp::emu::create_event(event));
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return note_status(sdp::emu::destroy_event(event));
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return note_status(sdp::emu::record_event(event, stream));
}
cudaError_t cudaEventQuery(cudaEvent_t event) { return note_status(sdp::emu::query_event(event)); }
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return note_status(sdp::emu::synchronize_event(event));
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  // The emulator proves semantics, never speed: no time to report.
  if (ms) *ms = 0;
  sdp::emu::say("cudaEventElapsedTime: the emulated device has no GPU time to measure");
  return note_status(cudaErrorNotSupported);
}

}  // extern "C"
