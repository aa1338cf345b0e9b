#pragma once
// CUDA LayerNorm (arguments checked by kernels/ops_layernorm.cpp first):
// x, y, dy, dx, weight, bias in f32 or bf16 (one dtype); mean, rstd,
// dweight, dbias in f32. Statistics and sums in f32, in a fixed order (no
// atomics), so the same input gives the same bits on every run.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// x, y [N, D] (leading dims flattened); mean, rstd [N].
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd);
void layernorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor& dx);
// dweight, dbias [D] +=.
void layernorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& dweight, Tensor& dbias);

}  // namespace sdp::cuda
