#pragma once
// Fused softmax cross-entropy. Targets are validated by the caller
// (kernels/ops_cross_entropy.cpp): each is in [0, v) or negative (ignored).
#include <cstdint>

namespace sdp::cpu {

// logits [n, v], targets [n]; writes lse [n] (max-subtracted, summed in
// double) for every row and losses [n] = lse - logit[target], 0 if ignored.
template <typename T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* losses, T* lse,
                           int64_t n, int64_t v);

// dlogits [n, v] = (exp(logits - lse) - onehot(target)) * grad_scale, 0 for
// ignored rows. dlogits may alias logits: each logit is read before its slot
// is written.
template <typename T>
void cross_entropy_backward_input(const T* logits, const int32_t* targets, const T* lse,
                                  double grad_scale, T* dlogits, int64_t n, int64_t v);

}  // namespace sdp::cpu
