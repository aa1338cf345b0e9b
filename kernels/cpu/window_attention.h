#pragma once
// Swin window attention on the host (kernels/ops.h gives the semantics):
// per (window, head) the scores are one [N, N] GEMM on strided views of qkv,
// the relative position bias and the mask are added in the softmax pass, and
// the output is a second GEMM. The probabilities are saved, so backward
// needs no recomputation.
#include <cstdint>

namespace sdp::cpu {

struct WindowAttentionDims {
  int64_t windows;       // Bw
  int64_t tokens;        // N = w w
  int64_t heads;         // H
  int64_t head_dim;      // Dh
  int64_t mask_windows;  // nW, 0 without a mask
};

// Backward turns the probabilities into score gradients one block of query
// rows at a time, with a per-thread [rows, N] tile of dO V^T on the stack of
// this many elements; so N is bounded by it (64 x 64 windows).
inline constexpr int64_t kWindowAttentionScratch = 4096;
inline constexpr int64_t kWindowAttentionMaxTokens = kWindowAttentionScratch;

// qkv [Bw, N, 3, H, Dh]; table [R, H]; index [N N] in [0, R) (checked by the
// caller); mask [nW, N, N] or null; out [Bw, N, H, Dh]; probs [Bw, H, N, N].
template <typename T>
void window_attention_forward(const T* qkv, const T* table, const int32_t* index,
                              const T* mask, T scale, T* out, T* probs,
                              const WindowAttentionDims& d);

// dqkv [Bw, N, 3, H, Dh] overwritten; probs [Bw, H, N, N] overwritten with
// the score gradients dS = P (dP - rowsum(P dP)); dtable [R, H], when not
// null, += dS summed over windows in window order, then scattered by index
// in (i, j) order: the same bits for any thread count.
template <typename T>
void window_attention_backward(const T* dout, const T* qkv, T* probs, const int32_t* index,
                               T scale, T* dqkv, T* dtable, const WindowAttentionDims& d);

}  // namespace sdp::cpu
