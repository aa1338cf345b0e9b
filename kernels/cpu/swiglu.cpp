#include "kernels/cpu/swiglu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;
constexpr int64_t kChunk = 1 << 12;  // elements per task: whole vectors, L1-sized

// f64: exp(-g) overflows to inf for very negative g, giving s = 0, the right
// limit. f32: exp_fast clamps at exp(88), so below g = -88 s is set to 0
// explicitly (a select, it still vectorizes); for large g exp_fast(-g) is
// ~1e-38 and s rounds to exactly 1.
[[gnu::always_inline]] inline float sigmoid(float g) {
  const float s = 1.0f / (1.0f + exp_fast(-g));
  return g < -88.0f ? 0.0f : s;
}
inline double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

template <typename T>
[[gnu::always_inline]] inline void forward_impl(const T* gate, const T* up, T* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    const T s = sigmoid(g);
    out[i] = g * s * up[i];
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_impl(const T* dout, const T* gate, const T* up,
                                                 T* dgate, T* dup, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], u = up[i], d = dout[i];
    const T s = sigmoid(g);
    const T ds = d * s;
    dgate[i] = ds * u * (T(1) + g * (T(1) - s));
    dup[i] = ds * g;
  }
}

SDP_MULTIVERSION void forward_f32(const float* gate, const float* up, float* out, int64_t n) {
  forward_impl(gate, up, out, n);
}
SDP_MULTIVERSION void backward_f32(const float* dout, const float* gate, const float* up,
                                   float* dgate, float* dup, int64_t n) {
  backward_impl(dout, gate, up, dgate, dup, n);
}
}  // namespace

template <typename T>
void swiglu_forward(const T* gate, const T* up, T* out, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * kChunk, len = std::min(kChunk, n - lo);
    if constexpr (std::is_same_v<T, float>)
      forward_f32(gate + lo, up + lo, out + lo, len);
    else
      forward_impl(gate + lo, up + lo, out + lo, len);
  }
}

template <typename T>
void swiglu_backward_input(const T* dout, const T* gate, const T* up, T* dgate, T* dup,
                           int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * kChunk, len = std::min(kChunk, n - lo);
    if constexpr (std::is_same_v<T, float>)
      backward_f32(dout + lo, gate + lo, up + lo, dgate + lo, dup + lo, len);
    else
      backward_impl(dout + lo, gate + lo, up + lo, dgate + lo, dup + lo, len);
  }
}

template void swiglu_forward<float>(const float*, const float*, float*, int64_t);
template void swiglu_forward<double>(const double*, const double*, double*, int64_t);
template void swiglu_backward_input<float>(const float*, const float*, const float*, float*,
                                           float*, int64_t);
template void swiglu_backward_input<double>(const double*, const double*, const double*,
                                            double*, double*, int64_t);

}  // namespace sdp::cpu
