#pragma once
// Sum of squares and scaling for gradient-norm clipping on the host.
#include <cstdint>

namespace sdp::cpu {

// sum x^2 over n contiguous elements, accumulated in double.
template <typename T>
double grad_sum_squares(const T* x, int64_t n);

// x *= alpha over n contiguous elements.
template <typename T>
void grad_scale(T* x, int64_t n, double alpha);

}  // namespace sdp::cpu
