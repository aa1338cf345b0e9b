#pragma once
// Rotary position embedding on the host, rotate-half convention (HF LLaMA).
#include <cstdint>

namespace sdp::cpu {

// cos, sin [T, Dh/2]: angle t * theta^(-2i/Dh), computed in double.
template <typename T>
void rope_tables(double theta, int64_t seq, int64_t head_dim, T* cos, T* sin);

// x, y [B, T, H, Dh] contiguous; y may alias x. sign = +1 rotates by the
// angle (forward), sign = -1 by its negative (the transpose, for backward).
template <typename T>
void rope_apply(const T* x, const T* cos, const T* sin, T* y, int64_t batch, int64_t seq,
                int64_t heads, int64_t head_dim, int sign);

}  // namespace sdp::cpu
