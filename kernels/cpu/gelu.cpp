#include "kernels/cpu/gelu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t{1} << 15;  // elements; below, one thread
constexpr int64_t kBlock = 4096;                      // elements per task

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

// erfc(z) for z >= 0 in f32 as t exp(-z^2 + P(t)), t = 1 / (1 + z / 2): the
// log of erfc(z) / t is smooth in t, so one polynomial holds the relative
// error near 1e-7 from z = 0 out to where erfc underflows. P is a degree-10
// Chebyshev fit (made for this file) in u = (2t - (a + 1)) / (1 - a),
// a = 1 / (1 + kZMax / 2), the t of kZMax. Past kZMax erfc is below f32's
// normal range (~1e-41 at 9.5) and is returned as 0.
constexpr float kZMax = 9.5f;
[[gnu::always_inline]] inline float erfc_fast(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float u = t * (46.0f / 19.0f) - 27.0f / 19.0f;
  float p = -2.15766668e-05f;
  p = p * u + 4.91654828e-05f;
  p = p * u + 1.26482730e-04f;
  p = p * u - 4.94585140e-04f;
  p = p * u - 2.93617632e-04f;
  p = p * u + 3.53486463e-03f;
  p = p * u - 8.53945734e-04f;
  p = p * u - 2.87410058e-02f;
  p = p * u + 1.47164762e-02f;
  p = p * u + 5.65612733e-01f;
  p = p * u - 5.53635001e-01f;
  const float zc = z < kZMax ? z : kZMax;  // keeps z^2 finite for inf inputs
  const float e = t * exp_fast(p - zc * zc);
  return z < kZMax ? e : 0.0f;
}

// Phi(x) and phi(x) in f32 from erfc of |x| / sqrt 2, so both tails keep
// their relative accuracy (1 + erf(x) would lose it for x << 0).
[[gnu::always_inline]] inline float gelu_value(float x) {
  const float z = (x < 0 ? -x : x) * static_cast<float>(kInvSqrt2);
  const float e = erfc_fast(z);
  const float cdf = x < 0 ? 0.5f * e : 1.0f - 0.5f * e;
  return x * cdf;
}
[[gnu::always_inline]] inline float gelu_slope(float x) {
  const float z = (x < 0 ? -x : x) * static_cast<float>(kInvSqrt2);
  const float e = erfc_fast(z);
  const float cdf = x < 0 ? 0.5f * e : 1.0f - 0.5f * e;
  const float zc = z < kZMax ? z : kZMax;
  const float pdf = z < kZMax ? static_cast<float>(kInvSqrt2Pi) * exp_fast(-zc * zc) : 0.0f;
  return cdf + x * pdf;
}
inline double gelu_value(double x) { return x * 0.5 * std::erfc(-x * kInvSqrt2); }
inline double gelu_slope(double x) {
  return 0.5 * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}

template <typename T>
[[gnu::always_inline]] inline void forward_range(const T* x, T* y, int64_t lo, int64_t hi) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) y[i] = gelu_value(x[i]);
}
template <typename T>
[[gnu::always_inline]] inline void backward_range(const T* dy, const T* x, T* dx, int64_t lo,
                                                  int64_t hi) {
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    const T s = gelu_slope(x[i]);  // named: keeps the loop one vectorizable body
    dx[i] = dy[i] * s;
  }
}

SDP_MULTIVERSION void forward_range_f32(const float* x, float* y, int64_t lo, int64_t hi) {
  forward_range(x, y, lo, hi);
}
SDP_MULTIVERSION void backward_range_f32(const float* dy, const float* x, float* dx,
                                         int64_t lo, int64_t hi) {
  backward_range(dy, x, dx, lo, hi);
}

// Calls range(lo, hi) over blocks of kBlock elements covering [0, n).
template <typename RangeFn>
void for_blocks(int64_t n, const RangeFn& range) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) range(blk * kBlock, std::min(n, (blk + 1) * kBlock));
}
}  // namespace

template <typename T>
void gelu_forward(const T* x, T* y, int64_t n) {
  for_blocks(n, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      forward_range_f32(x, y, lo, hi);
    else
      forward_range(x, y, lo, hi);
  });
}

template <typename T>
void gelu_backward_input(const T* dy, const T* x, T* dx, int64_t n) {
  for_blocks(n, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      backward_range_f32(dy, x, dx, lo, hi);
    else
      backward_range(dy, x, dx, lo, hi);
  });
}

template <typename T>
void scale_per_sample(const T* x, const T* factors, T* y, int64_t samples, int64_t inner) {
  // Blocks of the flat range, so a few large samples still split across
  // threads; a block may straddle samples.
  for_blocks(samples * inner, [&](int64_t lo, int64_t hi) {
    while (lo < hi) {
      const int64_t s = lo / inner, end = std::min(hi, (s + 1) * inner);
      const T f = factors[s];
#pragma omp simd
      for (int64_t i = lo; i < end; ++i) y[i] = x[i] * f;
      lo = end;
    }
  });
}

#define SDP_INSTANTIATE(T)                                                   \
  template void gelu_forward<T>(const T*, T*, int64_t);                      \
  template void gelu_backward_input<T>(const T*, const T*, T*, int64_t);     \
  template void scale_per_sample<T>(const T*, const T*, T*, int64_t, int64_t);
SDP_INSTANTIATE(float)
SDP_INSTANTIATE(double)
#undef SDP_INSTANTIATE

}  // namespace sdp::cpu
