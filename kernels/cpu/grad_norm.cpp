#include "kernels/cpu/grad_norm.h"

namespace sdp::cpu {

template <typename T>
double grad_sum_squares(const T* x, int64_t n) {
  double total = 0;
#pragma omp parallel for simd reduction(+ : total) schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const double xi = static_cast<double>(x[i]);
    total += xi * xi;
  }
  return total;
}

template <typename T>
void grad_scale(T* x, int64_t n, double alpha) {
  const T a = static_cast<T>(alpha);
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

template double grad_sum_squares<float>(const float*, int64_t);
template double grad_sum_squares<double>(const double*, int64_t);
template void grad_scale<float>(float*, int64_t, double);
template void grad_scale<double>(double*, int64_t, double);

}  // namespace sdp::cpu
