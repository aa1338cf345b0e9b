#include "kernels/cpu/cross_entropy.h"

#include <cmath>

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;
}

template <typename T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* losses, T* lse,
                           int64_t n, int64_t v) {
#pragma omp parallel for schedule(static) if (n * v >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * v;
    T m = row[0];
    for (int64_t j = 1; j < v; ++j) m = row[j] > m ? row[j] : m;
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
    const double l = static_cast<double>(m) + std::log(sum);
    lse[i] = static_cast<T>(l);
    const int32_t t = targets[i];
    losses[i] = t < 0 ? T(0) : static_cast<T>(l - static_cast<double>(row[t]));
  }
}

template <typename T>
void cross_entropy_backward_input(const T* logits, const int32_t* targets, const T* lse,
                                  double grad_scale, T* dlogits, int64_t n, int64_t v) {
  const T gs = static_cast<T>(grad_scale);
#pragma omp parallel for schedule(static) if (n * v >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * v;
    T* out = dlogits + i * v;
    const int32_t t = targets[i];
    if (t < 0) {
      for (int64_t j = 0; j < v; ++j) out[j] = T(0);
      continue;
    }
    const T l = lse[i];
    for (int64_t j = 0; j < v; ++j) {
      const T p = std::exp(row[j] - l);  // read before the (possibly aliased) write
      out[j] = (j == t ? p - T(1) : p) * gs;
    }
  }
}

template void cross_entropy_forward<float>(const float*, const int32_t*, float*, float*,
                                           int64_t, int64_t);
template void cross_entropy_forward<double>(const double*, const int32_t*, double*, double*,
                                            int64_t, int64_t);
template void cross_entropy_backward_input<float>(const float*, const int32_t*, const float*,
                                                  double, float*, int64_t, int64_t);
template void cross_entropy_backward_input<double>(const double*, const int32_t*,
                                                   const double*, double, double*, int64_t,
                                                   int64_t);

}  // namespace sdp::cpu
