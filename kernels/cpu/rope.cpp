#include "kernels/cpu/rope.h"

#include <cmath>

namespace sdp::cpu {

template <typename T>
void rope_tables(double theta, int64_t seq, int64_t head_dim, T* cos, T* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < seq; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq =
          std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(t) * inv_freq;
      cos[t * half + i] = static_cast<T>(std::cos(angle));
      sin[t * half + i] = static_cast<T>(std::sin(angle));
    }
  }
}

template <typename T>
void rope_apply(const T* x, const T* cos, const T* sin, T* y, int64_t batch, int64_t seq,
                int64_t heads, int64_t head_dim, int sign) {
  const int64_t half = head_dim / 2;
  const T s_sign = static_cast<T>(sign);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      const T* c = cos + t * half;
      const T* s = sin + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t off = ((b * seq + t) * heads + h) * head_dim;
        const T* xr = x + off;
        T* yr = y + off;
        // Reads both halves before writing either, so y may alias x.
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const T lo = xr[i], hi = xr[i + half];
          const T sn = s_sign * s[i];
          yr[i] = lo * c[i] - hi * sn;
          yr[i + half] = hi * c[i] + lo * sn;
        }
      }
    }
  }
}

template void rope_tables<float>(double, int64_t, int64_t, float*, float*);
template void rope_tables<double>(double, int64_t, int64_t, double*, double*);
template void rope_apply<float>(const float*, const float*, const float*, float*, int64_t,
                                int64_t, int64_t, int64_t, int);
template void rope_apply<double>(const double*, const double*, const double*, double*, int64_t,
                                 int64_t, int64_t, int64_t, int);

}  // namespace sdp::cpu
