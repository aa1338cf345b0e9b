#pragma once
// Convolution on CUDA through cuDNN (arguments checked by kernels/ops_conv2d.cpp
// first: shapes, dtypes, contiguity, workspace size). x, w, y, dy, dx hold the
// activation dtype (f32 or bf16); dw holds accum_dtype (f32). Products
// accumulate in f32; f32 runs never use TF32 (f32 mode exists for comparisons
// against the CPU), bf16 runs use tensor cores.
//
// workspace [n] (x's dtype), n >= ops::conv2d_workspace_elems(..., Device::cuda):
//   f32 : cuDNN's scratch, from the start.
//   bf16: backward_weight puts a bf16 copy of dw (w.numel() elements, the
//         "staging" area) at the start and cuDNN's scratch after it (rounded
//         up to 256 bytes); forward and backward_input use it from the start.
// cuDNN gets at most the formula's share (min(B Cin k k Ho Wo, 64 MiB) of
// x's dtype), whatever n is, so the algorithm chosen for a geometry does not
// depend on how generously the caller sized its workspace.
#include "engine/core/tensor.h"
#include "kernels/ops.h"

namespace sdp::cuda {

// x [B, Cin, H, W], w [Cout, Cin, k, k] -> y [B, Cout, Ho, Wo]; y += with accumulate.
void conv2d_forward(const Tensor& x, const Tensor& w, const ops::Conv2dGeometry& geometry,
                    Tensor& y, Tensor& workspace, bool accumulate);
// dy [B, Cout, Ho, Wo], w -> dx [B, Cin, H, W] (overwritten, or += with accumulate).
void conv2d_backward_input(const Tensor& dy, const Tensor& w, const ops::Conv2dGeometry& geometry,
                           Tensor& dx, Tensor& workspace, bool accumulate);
// dw [Cout, Cin, k, k] (f32) += correlation of x with dy.
void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const ops::Conv2dGeometry& geometry,
                            Tensor& dw, Tensor& workspace);

}  // namespace sdp::cuda
