#include "kernels/cpu/window_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t{1} << 15;  // multiply-adds; below, one thread
constexpr int64_t kCols = 64;                         // (i, j) entries per block of the table sum

// Scores of one (window, head) in, probabilities out: s[i, j] +=
// bias[index[i, j]] (+ mask[i, j]), then a max-subtracted softmax per row.
// bias is the head's column of the table (stride `heads`).
template <typename T>
[[gnu::always_inline]] inline void softmax_rows_impl(T* s, const T* table, int64_t heads,
                                                     const int32_t* index, const T* mask,
                                                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T* row = s + i * n;
    const int32_t* idx = index + i * n;
    if (mask != nullptr) {
      const T* m = mask + i * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] += table[idx[j] * heads] + m[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row[j] += table[idx[j] * heads];
    }
    T mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      const T e = exp_fast(row[j] - mx);
      row[j] = e;
      sum += e;
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  }
}

// p: probabilities in, score gradients out, given dp = dO V^T for the same
// rows: dS = P (dP - D), D = rowsum(P dP).
template <typename T>
[[gnu::always_inline]] inline void softmax_grad_rows_impl(T* p, const T* dp, int64_t rows,
                                                          int64_t n) {
  for (int64_t i = 0; i < rows; ++i) {
    T* prow = p + i * n;
    const T* drow = dp + i * n;
    T dsum = 0;
#pragma omp simd reduction(+ : dsum)
    for (int64_t j = 0; j < n; ++j) dsum += prow[j] * drow[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) prow[j] = prow[j] * (drow[j] - dsum);
  }
}

// The row kernels are the only non-BLAS work: built for AVX2 and AVX-512 too.
SDP_MULTIVERSION void softmax_rows(float* s, const float* table, int64_t heads,
                                   const int32_t* index, const float* mask, int64_t n) {
  softmax_rows_impl(s, table, heads, index, mask, n);
}
void softmax_rows(double* s, const double* table, int64_t heads, const int32_t* index,
                  const double* mask, int64_t n) {
  softmax_rows_impl(s, table, heads, index, mask, n);
}
SDP_MULTIVERSION void softmax_grad_rows(float* p, const float* dp, int64_t rows, int64_t n) {
  softmax_grad_rows_impl(p, dp, rows, n);
}
void softmax_grad_rows(double* p, const double* dp, int64_t rows, int64_t n) {
  softmax_grad_rows_impl(p, dp, rows, n);
}

// dtable[index[ij], h] += sum over windows of dS[b, h, ij]. One task per
// head (heads write disjoint columns of the table); within it the windows
// are summed in order into double accumulators, one block of (i, j) entries
// at a time, then scattered in (i, j) order.
template <typename T>
void table_gradient(const T* ds, const int32_t* index, T* dtable, const WindowAttentionDims& d) {
  const int64_t n2 = d.tokens * d.tokens, H = d.heads;
#pragma omp parallel for schedule(static) if (d.windows * H * n2 >= kParallelMin)
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t lo = 0; lo < n2; lo += kCols) {
      const int64_t width = std::min(n2, lo + kCols) - lo;
      double acc[kCols] = {};
      for (int64_t b = 0; b < d.windows; ++b) {
        const T* src = ds + (b * H + h) * n2 + lo;
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) acc[k] += static_cast<double>(src[k]);
      }
      for (int64_t k = 0; k < width; ++k) dtable[index[lo + k] * H + h] += static_cast<T>(acc[k]);
    }
  }
}
}  // namespace

template <typename T>
void window_attention_forward(const T* qkv, const T* table, const int32_t* index,
                              const T* mask, T scale, T* out, T* probs,
                              const WindowAttentionDims& d) {
  const int64_t N = d.tokens, H = d.heads, Dh = d.head_dim;
  const int64_t ld = 3 * H * Dh, ldo = H * Dh;  // token strides of qkv and out
  const int64_t tasks = d.windows * H;
#pragma omp parallel for schedule(static) if (tasks * N * N * Dh >= kParallelMin)
  for (int64_t bh = 0; bh < tasks; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const T* q = qkv + b * N * ld + h * Dh;  // [N, Dh] views, row stride ld
    const T* k = q + H * Dh;
    const T* v = q + 2 * H * Dh;
    T* p = probs + bh * N * N;  // [N, N]
    const T* m = mask != nullptr ? mask + b % d.mask_windows * N * N : nullptr;
    gemm(CblasNoTrans, CblasTrans, N, N, Dh, scale, q, ld, k, ld, T(0), p, N);
    softmax_rows(p, table + h, H, index, m, N);
    gemm(CblasNoTrans, CblasNoTrans, N, Dh, N, T(1), p, N, v, ld, T(0),
         out + b * N * ldo + h * Dh, ldo);
  }
}

template <typename T>
void window_attention_backward(const T* dout, const T* qkv, T* probs, const int32_t* index,
                               T scale, T* dqkv, T* dtable, const WindowAttentionDims& d) {
  const int64_t N = d.tokens, H = d.heads, Dh = d.head_dim;
  const int64_t ld = 3 * H * Dh, ldo = H * Dh;
  const int64_t tasks = d.windows * H;
  const int64_t block = std::min(N, kWindowAttentionScratch / N);  // query rows per tile
#pragma omp parallel for schedule(static) if (tasks * N * N * Dh >= kParallelMin)
  for (int64_t bh = 0; bh < tasks; ++bh) {
    const int64_t b = bh / H, h = bh % H;
    const T* q = qkv + b * N * ld + h * Dh;
    const T* k = q + H * Dh;
    const T* v = q + 2 * H * Dh;
    T* dq = dqkv + b * N * ld + h * Dh;
    T* dk = dq + H * Dh;
    T* dv = dq + 2 * H * Dh;
    const T* dob = dout + b * N * ldo + h * Dh;  // [N, Dh], row stride ldo
    T* p = probs + bh * N * N;
    T dp[kWindowAttentionScratch];  // [rows, N] dO V^T of one block of query rows
    // dV = P^T dO, while P still holds the probabilities.
    gemm(CblasTrans, CblasNoTrans, N, Dh, N, T(1), p, N, dob, ldo, T(0), dv, ld);
    for (int64_t i0 = 0; i0 < N; i0 += block) {
      const int64_t rows = std::min(block, N - i0);
      T* pb = p + i0 * N;
      gemm(CblasNoTrans, CblasTrans, rows, N, Dh, T(1), dob + i0 * ldo, ldo, v, ld, T(0), dp, N);
      softmax_grad_rows(pb, dp, rows, N);
      // The scores were scale q k^T: dQ = scale dS K, dK += scale dS^T Q.
      gemm(CblasNoTrans, CblasNoTrans, rows, Dh, N, scale, pb, N, k, ld, T(0), dq + i0 * ld, ld);
      gemm(CblasTrans, CblasNoTrans, N, Dh, rows, scale, pb, N, q + i0 * ld, ld,
           i0 == 0 ? T(0) : T(1), dk, ld);
    }
  }
  if (dtable != nullptr) table_gradient(probs, index, dtable, d);
}

#define SDP_INSTANTIATE(T)                                                                   \
  template void window_attention_forward<T>(const T*, const T*, const int32_t*, const T*, T, \
                                            T*, T*, const WindowAttentionDims&);             \
  template void window_attention_backward<T>(const T*, const T*, T*, const int32_t*, T, T*,  \
                                             T*, const WindowAttentionDims&);
SDP_INSTANTIATE(float)
SDP_INSTANTIATE(double)
#undef SDP_INSTANTIATE

}  // namespace sdp::cpu
