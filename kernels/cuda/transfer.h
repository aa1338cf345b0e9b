#pragma once
// Copies between host and device memory, or within the device, for
// ops::transfer (which checks shape, dtype and contiguity first).
#include "engine/core/tensor.h"

namespace sdp::cuda {

// src and dst: same bytes, contiguous; each on cpu or cuda, at least one on
// cuda. Queued on compute_stream(); returns once the copy is done when the
// host is either side.
void transfer(const Tensor& src, Tensor& dst);

}  // namespace sdp::cuda
