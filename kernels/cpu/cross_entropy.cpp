#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/row_chunks.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = 1 << 14;
constexpr int64_t kRowChunk = 8;  // rows per task

// f32 rows use the vectorized exp_fast (~1 ulp) and sum in double; f64 rows
// keep libm's exp (vec_math.h).

template <typename T>
[[gnu::always_inline]] inline void forward_rows(const T* logits, const int32_t* targets,
                                                T* losses, T* lse, int64_t lo, int64_t hi,
                                                int64_t v) {
  for (int64_t i = lo; i < hi; ++i) {
    const T* row = logits + i * v;
    T m = row[0];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < v; ++j) m = row[j] > m ? row[j] : m;
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < v; ++j) {
      const T x = row[j] - m;  // named temporaries: GCC vectorizes them more readily
      const T e = exp_fast(x);
      sum += static_cast<double>(e);
    }
    const double l = static_cast<double>(m) + std::log(sum);
    lse[i] = static_cast<T>(l);
    const int32_t t = targets[i];
    losses[i] = t < 0 ? T(0) : static_cast<T>(l - static_cast<double>(row[t]));
  }
}

template <typename T>
[[gnu::always_inline]] inline void backward_rows(const T* logits, const int32_t* targets,
                                                 const T* lse, T gs, T* dlogits, int64_t lo,
                                                 int64_t hi, int64_t v) {
  for (int64_t i = lo; i < hi; ++i) {
    const T* row = logits + i * v;
    T* out = dlogits + i * v;
    const int32_t t = targets[i];
    if (t < 0) {
      std::fill(out, out + v, T(0));
      continue;
    }
    const T l = lse[i];
    const T pt = exp_fast(row[t] - l);  // read before the (possibly aliased) write
#pragma omp simd
    for (int64_t j = 0; j < v; ++j) {
      const T x = row[j] - l;
      const T p = exp_fast(x);
      out[j] = p * gs;
    }
    out[t] = (pt - T(1)) * gs;
  }
}

SDP_MULTIVERSION void forward_rows_f32(const float* logits, const int32_t* targets,
                                       float* losses, float* lse, int64_t lo, int64_t hi,
                                       int64_t v) {
  forward_rows(logits, targets, losses, lse, lo, hi, v);
}
SDP_MULTIVERSION void backward_rows_f32(const float* logits, const int32_t* targets,
                                        const float* lse, float gs, float* dlogits, int64_t lo,
                                        int64_t hi, int64_t v) {
  backward_rows(logits, targets, lse, gs, dlogits, lo, hi, v);
}
}  // namespace

template <typename T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* losses, T* lse,
                           int64_t n, int64_t v) {
  for_row_chunks(n, v, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      forward_rows_f32(logits, targets, losses, lse, lo, hi, v);
    else
      forward_rows(logits, targets, losses, lse, lo, hi, v);
  });
}

template <typename T>
void cross_entropy_backward_input(const T* logits, const int32_t* targets, const T* lse,
                                  double grad_scale, T* dlogits, int64_t n, int64_t v) {
  const T gs = static_cast<T>(grad_scale);
  for_row_chunks(n, v, kRowChunk, kParallelMin, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<T, float>)
      backward_rows_f32(logits, targets, lse, gs, dlogits, lo, hi, v);
    else
      backward_rows(logits, targets, lse, gs, dlogits, lo, hi, v);
  });
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
