#pragma once
// CUDA SwiGLU (checked by kernels/ops_swiglu.cpp first). All tensors share
// one shape and dtype (f32 or bf16) and are contiguous.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// out = silu(gate) * up; out may alias gate or up.
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out);
// Each element of dout, gate and up is read before dgate and dup are written
// there (by the same thread), so dgate and dup may alias those inputs, as on
// the CPU.
void swiglu_backward_input(const Tensor& dout, const Tensor& gate, const Tensor& up,
                           Tensor& dgate, Tensor& dup);

}  // namespace sdp::cuda
