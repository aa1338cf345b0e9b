#pragma once
// Top-k correct counts on CUDA (kernels/ops.h, count_top_k): one thread per
// row ranks the row's target, each block sums its rows' counts into a fixed
// device array (no allocation), and the host adds the blocks' counts in
// block order after waiting for the stream. Arguments are validated by
// kernels/ops_top_k.cpp (logits f32 or bf16). A target at or above V counts
// as wrong (cross_entropy_forward reports it as a NaN loss).
#include <cstdint>

#include "engine/core/tensor.h"

namespace sdp::cuda {

// The most values of k one call counts (ops::kMaxTopK, checked there).
constexpr int kTopKLimit = 4;

// logits [N, V], targets [N] i32, ks [nk] (nk <= kTopKLimit) -> correct [nk].
void count_top_k(const Tensor& logits, const Tensor& targets, const int* ks, int nk,
                 int64_t* correct);

}  // namespace sdp::cuda
