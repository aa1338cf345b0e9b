#pragma once
// CUDA ReLU, global average pooling and bias (arguments checked by
// kernels/ops_activation.cpp first). Activations, gradients and bias hold
// f32 or bf16, all one dtype; dbias holds f32 (accum_dtype). Everything
// computes in f32; sums run in a fixed order (no atomics), so the same input
// gives the same bits on every run.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// y = max(x, 0), any shape; y may alias x.
void relu_forward(const Tensor& x, Tensor& y);
// dx = dy where y > 0, else 0; dx may alias dy.
void relu_backward_input(const Tensor& dy, const Tensor& y, Tensor& dx);
// x [B, C, H, W] -> y [B, C]: the mean over H, W.
void global_avg_pool_forward(const Tensor& x, Tensor& y);
// dy [B, C] -> dx [B, C, H, W] = dy / (H W) (overwritten).
void global_avg_pool_backward_input(const Tensor& dy, Tensor& dx);
// y [N, C] += bias [C] per row.
void bias_add_forward(Tensor& y, const Tensor& bias);
// dbias [C] (f32) += column sums of dy [N, C].
void bias_backward_weight(const Tensor& dy, Tensor& dbias);

}  // namespace sdp::cuda
