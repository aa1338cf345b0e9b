#pragma once
// CUDA rotary position embedding (checked by kernels/ops_rope.cpp first).
// The tables are not computed here: ops::rope_tables computes them in double
// on the host, exactly as for the CPU, and uploads them.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// x, y [B, T, H, Dh] (f32 or bf16, one dtype), cos, sin [T, Dh/2] f32.
// sign +1 rotates forward, -1 applies the transpose (backward). y may alias x.
void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y, int sign);

}  // namespace sdp::cuda
