#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/row_chunks.h"
#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;  // elements; below this one thread wins
constexpr int64_t kRowChunk = 16;          // rows per task
constexpr int64_t kCols = 64;              // columns per task of the weight gradients

// Row kernels over rows [lo, hi). The reductions are explicit SIMD reductions
// in double: without them the compiler may not reorder the sums.
template <typename T>
[[gnu::always_inline]] inline void forward_rows(const T* x, const T* w, const T* b, double eps,
                                                T* y, T* mean, T* rstd, int64_t lo, int64_t hi,
                                                int64_t d) {
  const double inv_d = 1.0 / static_cast<double>(d);
  for (int64_t i = lo; i < hi; ++i) {
    const T* xi = x + i * d;
    T* yi = y + i * d;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xi[j]);
    const double mu = s * inv_d;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; ++j) {
      const double c = static_cast<double>(xi[j]) - mu;
      ss += c * c;
    }
    const double r = 1.0 / std::sqrt(ss * inv_d + eps);
    mean[i] = static_cast<T>(mu);
    rstd[i] = static_cast<T>(r);
    const T mt = static_cast<T>(mu), rt = static_cast<T>(r);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yi[j] = (xi[j] - mt) * rt * w[j] + b[j];
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_input_rows(const T* dy, const T* x, const T* w,
                                                       const T* mean, const T* rstd, T* dx,
                                                       int64_t lo, int64_t hi, int64_t d) {
  const double inv_d = 1.0 / static_cast<double>(d);
  for (int64_t i = lo; i < hi; ++i) {
    const T* xi = x + i * d;
    const T* dyi = dy + i * d;
    T* dxi = dx + i * d;
    const T mt = mean[i], rt = rstd[i];
    double sg = 0, sgx = 0;  // sum_j g_j, sum_j g_j xhat_j with g = dy w
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < d; ++j) {
      const double g = static_cast<double>(dyi[j]) * w[j];
      sg += g;
      sgx += g * static_cast<double>((xi[j] - mt) * rt);
    }
    const T a = static_cast<T>(sg * inv_d), c = static_cast<T>(sgx * inv_d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const T xhat = (xi[j] - mt) * rt;
      dxi[j] = rt * (dyi[j] * w[j] - a - xhat * c);
    }
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_weight_cols(const T* dy, const T* x, const T* mean,
                                                        const T* rstd, T* dw, T* db, int64_t n,
                                                        int64_t d, int64_t lo, int64_t hi) {
  double acc_w[kCols] = {}, acc_b[kCols] = {};
  const int64_t width = hi - lo;
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d + lo;
    const T* dyi = dy + i * d + lo;
    const T mt = mean[i], rt = rstd[i];
#pragma omp simd
    for (int64_t j = 0; j < width; ++j) {
      const double g = static_cast<double>(dyi[j]);
      acc_w[j] += g * static_cast<double>((xi[j] - mt) * rt);
      acc_b[j] += g;
    }
  }
  for (int64_t j = 0; j < width; ++j) {
    dw[lo + j] += static_cast<T>(acc_w[j]);
    db[lo + j] += static_cast<T>(acc_b[j]);
  }
}

SDP_MULTIVERSION void forward_rows_f32(const float* x, const float* w, const float* b,
                                       double eps, float* y, float* mean, float* rstd,
                                       int64_t lo, int64_t hi, int64_t d) {
  forward_rows(x, w, b, eps, y, mean, rstd, lo, hi, d);
}
SDP_MULTIVERSION void backward_input_rows_f32(const float* dy, const float* x, const float* w,
                                              const float* mean, const float* rstd, float* dx,
                                              int64_t lo, int64_t hi, int64_t d) {
  backward_input_rows(dy, x, w, mean, rstd, dx, lo, hi, d);
}
SDP_MULTIVERSION void backward_weight_cols_f32(const float* dy, const float* x,
                                               const float* mean, const float* rstd, float* dw,
                                               float* db, int64_t n, int64_t d, int64_t lo,
                                               int64_t hi) {
  backward_weight_cols(dy, x, mean, rstd, dw, db, n, d, lo, hi);
}
}  // namespace

template <typename T>
void layernorm_forward(const T* x, const T* w, const T* b, double eps, T* y, T* mean, T* rstd,
                       int64_t n, int64_t d) {
  for_row_chunks(n, d, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      forward_rows_f32(x, w, b, eps, y, mean, rstd, lo, hi, d);
    else
      forward_rows(x, w, b, eps, y, mean, rstd, lo, hi, d);
  });
}

template <typename T>
void layernorm_backward_input(const T* dy, const T* x, const T* w, const T* mean,
                              const T* rstd, T* dx, int64_t n, int64_t d) {
  for_row_chunks(n, d, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      backward_input_rows_f32(dy, x, w, mean, rstd, dx, lo, hi, d);
    else
      backward_input_rows(dy, x, w, mean, rstd, dx, lo, hi, d);
  });
}

template <typename T>
void layernorm_backward_weight(const T* dy, const T* x, const T* mean, const T* rstd, T* dw,
                               T* db, int64_t n, int64_t d) {
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * d >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t lo = blk * kCols, hi = std::min(d, lo + kCols);
    if constexpr (std::is_same_v<T, float>)
      backward_weight_cols_f32(dy, x, mean, rstd, dw, db, n, d, lo, hi);
    else
      backward_weight_cols(dy, x, mean, rstd, dw, db, n, d, lo, hi);
  }
}

#define SDP_INSTANTIATE(T)                                                                    \
  template void layernorm_forward<T>(const T*, const T*, const T*, double, T*, T*, T*,        \
                                     int64_t, int64_t);                                       \
  template void layernorm_backward_input<T>(const T*, const T*, const T*, const T*, const T*, \
                                            T*, int64_t, int64_t);                            \
  template void layernorm_backward_weight<T>(const T*, const T*, const T*, const T*, T*, T*,  \
                                             int64_t, int64_t);
SDP_INSTANTIATE(float)
SDP_INSTANTIATE(double)
#undef SDP_INSTANTIATE

}  // namespace sdp::cpu
