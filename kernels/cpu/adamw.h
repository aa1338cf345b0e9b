#pragma once
// AdamW with decoupled weight decay on the host (PyTorch convention).
#include <cstdint>

#include "engine/core/dtype.h"

namespace sdp::cpu {

struct AdamWScalars {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1;  // 1 - beta1^step
  double bias_correction2;  // 1 - beta2^step
};

// param, grad, m, v: n contiguous elements each, updated in place.
template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWScalars& s);

// dst[i] = src[i] rounded to bf16 (nearest even, via f32 for double
// sources): the low-precision copy of updated master values.
template <typename T>
void round_to_bf16(const T* src, bf16* dst, int64_t n);

}  // namespace sdp::cpu
