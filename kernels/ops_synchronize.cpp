// Waiting for queued device work: steps are timed and host values read only
// after the device has run what was queued.
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/stream.h"
#endif

namespace sdp::ops {

void synchronize(Device device) {
  if (device != Device::cuda) return;
  Tensor probe(nullptr, {0}, DType::f32, device);
  if (detail::backend_of(probe, "synchronize") == detail::Backend::cuda)
    SDP_ON_CUDA(cuda::synchronize_compute_stream());
}

}  // namespace sdp::ops
