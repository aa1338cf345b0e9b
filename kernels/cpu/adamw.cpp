#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {

struct Coefs {
  double decay, b1, one_minus_b1, b2, one_minus_b2, step_size, inv_sqrt_bc2, eps;
};

template <typename T>
[[gnu::always_inline]] inline void update_impl(T* param, const T* grad, T* m, T* v, int64_t n,
                                               const Coefs& c) {
  const T decay = static_cast<T>(c.decay);
  const T b1 = static_cast<T>(c.b1), one_minus_b1 = static_cast<T>(c.one_minus_b1);
  const T b2 = static_cast<T>(c.b2), one_minus_b2 = static_cast<T>(c.one_minus_b2);
  const T step_size = static_cast<T>(c.step_size);
  const T inv_sqrt_bc2 = static_cast<T>(c.inv_sqrt_bc2);
  const T eps = static_cast<T>(c.eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = b1 * m[i] + one_minus_b1 * g;
    const T vi = b2 * v[i] + one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    // p -= lr * (m / bc1) / (sqrt(v / bc2) + eps), written with the bias
    // corrections folded into scalars as PyTorch does.
    param[i] = param[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

SDP_MULTIVERSION void update_f32(float* param, const float* grad, float* m, float* v, int64_t n,
                                 const Coefs& c) {
  update_impl(param, grad, m, v, n, c);
}

constexpr int64_t kChunk = 1 << 13;  // elements per task

}  // namespace

template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWScalars& s) {
  const Coefs c{1.0 - s.lr * s.weight_decay,
                s.beta1,
                1.0 - s.beta1,
                s.beta2,
                1.0 - s.beta2,
                s.lr / s.bias_correction1,
                1.0 / std::sqrt(s.bias_correction2),
                s.eps};
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t lo = ch * kChunk, len = std::min(kChunk, n - lo);
    if constexpr (std::is_same_v<T, float>)
      update_f32(param + lo, grad + lo, m + lo, v + lo, len, c);
    else
      update_impl(param + lo, grad + lo, m + lo, v + lo, len, c);
  }
}

template <typename T>
void round_to_bf16(const T* src, bf16* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16::from_float(static_cast<float>(src[i]));
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t,
                                  const AdamWScalars&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t,
                                   const AdamWScalars&);
template void round_to_bf16<float>(const float*, bf16*, int64_t);
template void round_to_bf16<double>(const double*, bf16*, int64_t);

}  // namespace sdp::cpu
