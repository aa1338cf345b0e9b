#include "kernels/cpu/adamw.h"

#include <cmath>

namespace sdp::cpu {

template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWScalars& s) {
  const T decay = static_cast<T>(1.0 - s.lr * s.weight_decay);
  const T b1 = static_cast<T>(s.beta1), one_minus_b1 = static_cast<T>(1.0 - s.beta1);
  const T b2 = static_cast<T>(s.beta2), one_minus_b2 = static_cast<T>(1.0 - s.beta2);
  const T step_size = static_cast<T>(s.lr / s.bias_correction1);
  const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(s.bias_correction2));
  const T eps = static_cast<T>(s.eps);
#pragma omp parallel for simd schedule(static) if (n > 32768)
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

template void adamw_update<float>(float*, const float*, float*, float*, int64_t,
                                  const AdamWScalars&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t,
                                   const AdamWScalars&);

}  // namespace sdp::cpu
