#pragma once
// Top-k correct counts of a classifier's logits (kernels/ops.h,
// count_top_k). Targets are validated by the caller
// (kernels/ops_top_k.cpp): each is in [0, v) or negative (ignored).
#include <cstdint>

namespace sdp::cpu {

// logits [n, v], targets [n], ks [nk] (each >= 1): correct[i] = rows whose
// target ranks below ks[i]. A row's target ranks after every larger logit
// and after equal logits of lower classes; a row with a NaN logit is never
// correct; a negative target is ignored.
template <typename T>
void count_top_k(const T* logits, const int32_t* targets, int64_t n, int64_t v, const int* ks,
                 int nk, int64_t* correct);

}  // namespace sdp::cpu
