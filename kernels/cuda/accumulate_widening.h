#pragma once
// dst (f32) += src (bf16), elementwise: how a weight gradient that cuDNN can
// only produce in the activations' bf16 joins its f32 accumulator.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// src: bf16, dst: f32, both contiguous CUDA tensors of the same numel.
void accumulate_bf16_into_f32(const Tensor& src, Tensor& dst);

}  // namespace sdp::cuda
