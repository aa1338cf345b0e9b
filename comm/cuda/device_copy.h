#pragma once
// Device-to-device byte copy for the peerless backends (buffer_copy.h) in
// builds with CUDA; ordered on the legacy default stream, finished on return.
#include <cstddef>

namespace sdp::comm {
void copy_device_bytes(void* dst, const void* src, size_t bytes);
}  // namespace sdp::comm
