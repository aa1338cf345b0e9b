#pragma once
// Causal grouped-query attention on CUDA (the ops API's attention_forward and
// attention_backward_input once kernels/ops_attention.cpp has checked the
// arguments). Memory-efficient: no [T, T] tensor is ever stored; forward saves
// lse [B, Hq, T] (f32 next to bf16) and backward recomputes the probabilities
// from q, k and lse. No workspace is needed (attention_workspace_elems is 0
// for Device::cuda): the row terms D_i = sum_d dO_id O_id are recomputed
// inside the backward kernels, and dq gets its own kernel, so no gradient is
// accumulated with atomics and results are bit-identical from run to run.
//
// Kernels: bf16 with an even head dim <= 128 runs on tensor cores
// (mma.sync m16n8k16, f32 accumulation; the head dim is padded with zeros to
// 16, 32, 64 or 128). f32, odd head dims and misaligned pointers take a
// scalar f32 shared-memory path, which is also the cross-check for the
// tensor-core one. Head dims above 128 are rejected.
#include "engine/core/tensor.h"

namespace sdp::cuda {

// Largest head dim the CUDA kernels support.
inline constexpr int64_t kAttentionMaxHeadDim = 128;

enum class AttentionKernel {
  automatic,  // tensor cores where they apply, else scalar
  scalar,     // the scalar path whatever the dtype (tests compare the two)
};

// q, out [B, T, Hq, Dh]; k, v [B, T, Hkv, Dh]; lse [B, Hq, T] f32; all
// contiguous, on the GPU, q/k/v/out of one dtype (f32 or bf16).
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                       Tensor& lse, AttentionKernel kernel = AttentionKernel::automatic);

// dout, dq like q; dk, dv like k; all overwritten.
void attention_backward_input(const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse, Tensor& dq,
                              Tensor& dk, Tensor& dv,
                              AttentionKernel kernel = AttentionKernel::automatic);

}  // namespace sdp::cuda
