#pragma once
// CUDA GELU (erf form) and the per-sample scale of stochastic depth
// (arguments checked by kernels/ops_gelu.cpp first). Tensors in f32 or bf16,
// computed in f32; factors in f32.
#include "engine/core/tensor.h"

namespace sdp::cuda {

void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward_input(const Tensor& dy, const Tensor& x, Tensor& dx);
// y [B, ...] = x * factors[b]; y may alias x.
void scale_per_sample(const Tensor& x, const Tensor& factors, Tensor& y);

}  // namespace sdp::cuda
