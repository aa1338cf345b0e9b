#pragma once
// Byte copies within one device, for the backends that move data without
// peers (local, emulated): host memory directly, CUDA memory through the
// runtime where this build has it, meta storage not at all (it holds no data).
#include <cstddef>

#include "engine/core/dtype.h"

namespace sdp::comm {

// dst and src may overlap or coincide.
void copy_bytes(void* dst, const void* src, size_t bytes, Device device);

}  // namespace sdp::comm
