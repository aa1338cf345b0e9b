#pragma once
// GELU in its exact (erf) form, y = x Phi(x) with Phi the standard normal
// CDF, and the per-sample scale of stochastic depth.
#include <cstdint>

namespace sdp::cpu {

// y [n] = x Phi(x). f32 uses a vectorizable erfc that keeps its relative
// accuracy in both tails: ~2e-7 near 0, growing with x^2 (the rounding of
// the exponent -x^2 / 2) to ~1e-5 at |x| = 13, past which Phi(x) leaves
// f32's normal range; f64 keeps libm's erfc (the reference path of the
// gradient checks). NaN passes through.
template <typename T>
void gelu_forward(const T* x, T* y, int64_t n);

// dx [n] = dy (Phi(x) + x phi(x)), phi the standard normal density; dx may
// alias dy.
template <typename T>
void gelu_backward_input(const T* dy, const T* x, T* dx, int64_t n);

// y [samples, inner] = x * factors[sample]; y may alias x.
template <typename T>
void scale_per_sample(const T* x, const T* factors, T* y, int64_t samples, int64_t inner);

}  // namespace sdp::cpu
