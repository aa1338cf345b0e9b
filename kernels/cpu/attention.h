#pragma once
// Memory-efficient causal attention with grouped-query heads on the host.
// Scores are computed one block of query rows at a time with BLAS on strided
// views of q, k, v; only lse [B, Hq, T] is saved, and backward recomputes the
// probabilities from it.
#include <cstdint>

namespace sdp::cpu {

struct AttentionDims {
  int64_t batch, seq, q_heads, kv_heads, head_dim;
};

// Query rows per block: a [64, T] score tile and its gradient stay in L2
// for the sequence lengths we train with.
inline constexpr int64_t kAttentionRowBlock = 64;

// Scratch elements needed by `threads` OpenMP threads:
//   threads * round_up(2 * rows * T + rows, 16), rows = min(64, T)
// (per thread: a score/probability tile, its gradient tile, and one value per
// row). Depends only on the shape and the thread count, never on timing.
int64_t attention_workspace_elems(const AttentionDims& d, int threads);

// q, out [B, T, Hq, Dh]; k, v [B, T, Hkv, Dh]; lse [B, Hq, T]; all contiguous.
// workspace holds attention_workspace_elems(d, omp_get_max_threads()) elements.
template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, T* workspace,
                       const AttentionDims& d);

// dq [B, T, Hq, Dh], dk, dv [B, T, Hkv, Dh] are overwritten.
template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, T* dq, T* dk, T* dv, T* workspace,
                        const AttentionDims& d);

}  // namespace sdp::cpu
