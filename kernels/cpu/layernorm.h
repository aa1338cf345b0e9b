#pragma once
// LayerNorm over the last dim: y = (x - mean) * rstd * w + b,
// rstd = 1 / sqrt(biased var + eps).
#include <cstdint>

namespace sdp::cpu {

// x, y [n, d]; w, b [d]; mean, rstd [n] are written for backward. Row
// statistics run in double, the variance as a second pass over x - mean (no
// cancellation when |mean| >> std).
template <typename T>
void layernorm_forward(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd,
                       int64_t n, int64_t d);

// dx [n, d] overwritten (may alias dy). With xhat = (x - mean) rstd and
// g = dy w: dx = rstd (g - mean(g) - xhat mean(g xhat)).
template <typename T>
void layernorm_backward_input(const T* dy, const T* x, const T* w, const T* mean,
                              const T* rstd, T* dx, int64_t n, int64_t d);

// dw [d] += sum over rows of dy xhat, db [d] += sum of dy. Threads split
// columns, so each sum runs over the rows in order (no races, the same bits
// for any thread count).
template <typename T>
void layernorm_backward_weight(const T* dy, const T* x, const T* mean, const T* rstd, T* dw,
                               T* db, int64_t n, int64_t d);

}  // namespace sdp::cpu
