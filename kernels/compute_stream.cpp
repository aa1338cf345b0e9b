#include "kernels/compute_stream.h"

#include "engine/core/device_stream.h"
#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/stream.h"
#endif

namespace sdp::ops {

ComputeStream::ComputeStream(Device device) {
#ifdef SDP_HAVE_CUDA
  if (device == Device::cuda) {
    stream_ = cuda::create_compute_stream();
    owns_ = true;
  }
#else
  (void)device;
#endif
}

ComputeStream::~ComputeStream() {
#ifdef SDP_HAVE_CUDA
  if (owns_) cuda::destroy_compute_stream(static_cast<cudaStream_t>(stream_));
#endif
}

ComputeStream::Scope::Scope(const ComputeStream& stream) {
  if (!stream.owns_) return;
  active_ = true;
  previous_ = current_compute_stream();
  set_current_compute_stream(stream.stream_);
}

ComputeStream::Scope::~Scope() {
  if (active_) set_current_compute_stream(previous_);
}

}  // namespace sdp::ops
