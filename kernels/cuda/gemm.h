#pragma once
// The bias-free linear layer on CUDA through cuBLASLt (HF layout, w [out, in]).
// Arguments are validated by kernels/ops_linear.cpp; the dtype rules are:
//   mixed precision: x, w, y, dy, dx bf16; dw f32 (accum_dtype);
//   f32 mode:        everything f32.
// Products always accumulate in f32 (CUBLAS_COMPUTE_32F, never TF32: f32
// mode exists for exact comparisons against the CPU).
//
// The one exception to "ops never allocate": each device gets one cuBLASLt
// handle and a workspace of gemm_workspace_bytes() from cudaMalloc on first
// use, kept for the life of the process (a per-call workspace from the
// caller's allocator would cost an allocation per GEMM for no gain).
#include <cstddef>

#include "engine/core/tensor.h"

namespace sdp::cuda {

// x [N, in], w [out, in] -> y [N, out] = x w^T (overwritten).
void linear_forward(const Tensor& x, const Tensor& w, Tensor& y);
// dy [N, out], w [out, in] -> dx [N, in] = dy w (overwritten).
void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx);
// dy [N, out], x [N, in] -> dw [out, in] += dy^T x.
void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw);

// Device memory the GEMMs hold outside every allocator: the workspaces
// created so far, summed over devices and threads (0 before the first GEMM).
size_t gemm_workspace_bytes();

}  // namespace sdp::cuda
