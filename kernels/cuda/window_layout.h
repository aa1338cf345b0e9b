#pragma once
// CUDA index maps of the Swin Transformer (arguments checked by
// kernels/ops_window_layout.cpp first; semantics in kernels/ops.h): each output
// element is read from one input element (no atomics), f32 or bf16.
#include <cstdint>

#include "engine/core/tensor.h"

namespace sdp::cuda {

void patchify(const Tensor& images, int64_t patch, Tensor& patches);
void window_partition(const Tensor& x, int64_t window, int64_t shift, Tensor& windows);
void window_merge(const Tensor& windows, int64_t window, int64_t shift, Tensor& x);
void patch_merge_forward(const Tensor& x, Tensor& y);
void patch_merge_backward_input(const Tensor& dy, Tensor& dx);
// x [B, L, C] -> y [B, C] (sums in f32, fixed order); and its backward.
void token_mean_forward(const Tensor& x, Tensor& y);
void token_mean_backward_input(const Tensor& dy, Tensor& dx);

}  // namespace sdp::cuda
