#pragma once
// The cuDNN handle of the calling thread on its current device. Only
// compiled with cuDNN (SDP_HAVE_CUDNN); included by kernels/cuda sources
// alone, never by the host-only op files.
#include <cudnn.h>

namespace sdp::cuda {

// Created on the first call of each (thread, device) pair and destroyed when
// the thread ends. Every call binds it to the thread's compute_stream(), so
// the cuDNN work it queues runs in order with the engine's own kernels.
cudnnHandle_t cudnn_handle();

}  // namespace sdp::cuda
