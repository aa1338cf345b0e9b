#pragma once
// CUDA RMSNorm (checked by kernels/ops_rmsnorm.cpp first). x, y, dy, dx
// [..., D] and weight [D] are f32 or bf16, all one dtype; rstd [...] and
// dweight [D] are f32 (accum_dtype). Rows are x.numel() / D.
#include "engine/core/tensor.h"

namespace sdp::cuda {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& y, Tensor& rstd);
// dx may alias dy or x.
void rmsnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx);
// dweight += sum over rows of dy * x * rstd: per-chunk partial sums (fixed
// order) added with one f32 atomic per column per chunk of rows, so the last
// bits of dweight may differ between runs.
void rmsnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                             Tensor& dweight);

}  // namespace sdp::cuda
