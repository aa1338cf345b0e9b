#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/row_chunks.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;  // elements; below this one thread wins
constexpr int64_t kRowChunk = 16;          // rows per task
constexpr int64_t kCols = 64;              // columns per task of the weight gradient

// Row kernels over rows [lo, hi). The reductions are explicit SIMD reductions
// (in double): without them the compiler may not reorder the sums and runs
// them one element at a time.
template <typename T>
[[gnu::always_inline]] inline void forward_rows(const T* x, const T* w, double eps, T* y,
                                                T* rstd, int64_t lo, int64_t hi, int64_t d) {
  for (int64_t i = lo; i < hi; ++i) {
    const T* xi = x + i * d;
    T* yi = y + i * d;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(xi[j]) * static_cast<double>(xi[j]);
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    rstd[i] = static_cast<T>(r);
    const T rt = static_cast<T>(r);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yi[j] = xi[j] * rt * w[j];
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_input_rows(const T* dy, const T* x, const T* w,
                                                       const T* rstd, T* dx, int64_t lo,
                                                       int64_t hi, int64_t d) {
  for (int64_t i = lo; i < hi; ++i) {
    const T* xi = x + i * d;
    const T* dyi = dy + i * d;
    T* dxi = dx + i * d;
    double dot = 0;  // sum_j dy_j w_j x_j
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j)
      dot += static_cast<double>(dyi[j]) * w[j] * xi[j];
    const double r = rstd[i];
    const T a = static_cast<T>(r);
    const T b = static_cast<T>(r * r * r * dot / static_cast<double>(d));
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dxi[j] = a * dyi[j] * w[j] - b * xi[j];
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_weight_cols(const T* dy, const T* x, const T* rstd,
                                                        T* dw, int64_t n, int64_t d, int64_t lo,
                                                        int64_t hi) {
  double acc[kCols] = {};
  const int64_t w = hi - lo;
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d + lo;
    const T* dyi = dy + i * d + lo;
    const double r = rstd[i];
#pragma omp simd
    for (int64_t j = 0; j < w; ++j)
      acc[j] += static_cast<double>(dyi[j]) * xi[j] * r;
  }
  for (int64_t j = 0; j < w; ++j) dw[lo + j] += static_cast<T>(acc[j]);
}

SDP_MULTIVERSION void forward_rows_f32(const float* x, const float* w, double eps, float* y,
                                       float* rstd, int64_t lo, int64_t hi, int64_t d) {
  forward_rows(x, w, eps, y, rstd, lo, hi, d);
}
SDP_MULTIVERSION void backward_input_rows_f32(const float* dy, const float* x, const float* w,
                                              const float* rstd, float* dx, int64_t lo,
                                              int64_t hi, int64_t d) {
  backward_input_rows(dy, x, w, rstd, dx, lo, hi, d);
}
SDP_MULTIVERSION void backward_weight_cols_f32(const float* dy, const float* x,
                                               const float* rstd, float* dw, int64_t n,
                                               int64_t d, int64_t lo, int64_t hi) {
  backward_weight_cols(dy, x, rstd, dw, n, d, lo, hi);
}
}  // namespace

template <typename T>
void rmsnorm_forward(const T* x, const T* w, double eps, T* y, T* rstd, int64_t n, int64_t d) {
  for_row_chunks(n, d, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      forward_rows_f32(x, w, eps, y, rstd, lo, hi, d);
    else
      forward_rows(x, w, eps, y, rstd, lo, hi, d);
  });
}

template <typename T>
void rmsnorm_backward_input(const T* dy, const T* x, const T* w, const T* rstd, T* dx,
                            int64_t n, int64_t d) {
  for_row_chunks(n, d, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      backward_input_rows_f32(dy, x, w, rstd, dx, lo, hi, d);
    else
      backward_input_rows(dy, x, w, rstd, dx, lo, hi, d);
  });
}

template <typename T>
void rmsnorm_backward_weight(const T* dy, const T* x, const T* rstd, T* dw, int64_t n,
                             int64_t d) {
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kCols, hi = std::min(d, lo + kCols);
    if constexpr (std::is_same_v<T, float>)
      backward_weight_cols_f32(dy, x, rstd, dw, n, d, lo, hi);
    else
      backward_weight_cols(dy, x, rstd, dw, n, d, lo, hi);
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
