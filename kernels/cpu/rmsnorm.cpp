#include "kernels/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;  // elements; below this one thread wins
}

template <typename T>
void rmsnorm_forward(const T* x, const T* w, double eps, T* y, T* rstd, int64_t n, int64_t d) {
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    T* yi = y + i * d;
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xi[j]) * xi[j];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    rstd[i] = static_cast<T>(r);
    const T rt = static_cast<T>(r);
    for (int64_t j = 0; j < d; ++j) yi[j] = xi[j] * rt * w[j];
  }
}

template <typename T>
void rmsnorm_backward_input(const T* dy, const T* x, const T* w, const T* rstd, T* dx,
                            int64_t n, int64_t d) {
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    const T* dyi = dy + i * d;
    T* dxi = dx + i * d;
    double dot = 0;  // sum_j dy_j w_j x_j
    for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(dyi[j]) * w[j] * xi[j];
    const double r = rstd[i];
    const T a = static_cast<T>(r);
    const T b = static_cast<T>(r * r * r * dot / static_cast<double>(d));
    for (int64_t j = 0; j < d; ++j) dxi[j] = a * dyi[j] * w[j] - b * xi[j];
  }
}

template <typename T>
void rmsnorm_backward_weight(const T* dy, const T* x, const T* rstd, T* dw, int64_t n,
                             int64_t d) {
  constexpr int64_t kCols = 64;
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kCols, hi = std::min(d, lo + kCols);
    double acc[kCols] = {};
    for (int64_t i = 0; i < n; ++i) {
      const T* xi = x + i * d;
      const T* dyi = dy + i * d;
      const double r = rstd[i];
      for (int64_t j = lo; j < hi; ++j) acc[j - lo] += static_cast<double>(dyi[j]) * xi[j] * r;
    }
    for (int64_t j = lo; j < hi; ++j) dw[j] += static_cast<T>(acc[j - lo]);
  }
}

template void rmsnorm_forward<float>(const float*, const float*, double, float*, float*,
                                     int64_t, int64_t);
template void rmsnorm_forward<double>(const double*, const double*, double, double*, double*,
                                      int64_t, int64_t);
template void rmsnorm_backward_input<float>(const float*, const float*, const float*,
                                            const float*, float*, int64_t, int64_t);
template void rmsnorm_backward_input<double>(const double*, const double*, const double*,
                                             const double*, double*, int64_t, int64_t);
template void rmsnorm_backward_weight<float>(const float*, const float*, const float*, float*,
                                             int64_t, int64_t);
template void rmsnorm_backward_weight<double>(const double*, const double*, const double*,
                                              double*, int64_t, int64_t);

}  // namespace sdp::cpu
