#pragma once
// CUDA window attention with relative position bias and mask (arguments
// checked by kernels/ops_window_attention.cpp first; semantics in
// kernels/ops.h). qkv, table, mask, out, probs, dout, dqkv in f32 or bf16
// (one dtype); dtable in f32. Softmax in f32.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// mask: ndim 0 for none.
void window_attention_forward(const Tensor& qkv, const Tensor& table, const Tensor& index,
                              const Tensor& mask, double scale, Tensor& out, Tensor& probs);
// probs is overwritten with the score gradients (ops.h); dtable: null when
// the table is not trained here.
void window_attention_backward_input(const Tensor& dout, const Tensor& qkv, Tensor& probs,
                                     const Tensor& index, double scale, Tensor& dqkv,
                                     Tensor* dtable);

}  // namespace sdp::cuda
