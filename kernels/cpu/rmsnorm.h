#pragma once
// RMSNorm over the last dim: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps).
#include <cstdint>

namespace sdp::cpu {

// x, y [n, d]; w [d]; rstd [n] is written for backward. Row sums run in double.
template <typename T>
void rmsnorm_forward(const T* x, const T* w, double eps, T* y, T* rstd, int64_t n, int64_t d);

// dx [n, d] = d loss / d x, overwritten. With r = rstd and g = dy * w:
//   dx = r * g - x * r^3 * mean(g * x)
template <typename T>
void rmsnorm_backward_input(const T* dy, const T* x, const T* w, const T* rstd, T* dx,
                            int64_t n, int64_t d);

// dw [d] += sum over rows of dy * x * rstd. Threads split columns, so the row
// order of each sum is fixed and there are no races.
template <typename T>
void rmsnorm_backward_weight(const T* dy, const T* x, const T* rstd, T* dw, int64_t n,
                             int64_t d);

}  // namespace sdp::cpu
