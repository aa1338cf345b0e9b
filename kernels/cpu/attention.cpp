#include "kernels/cpu/attention.h"
#include "kernels/cpu/vec_math.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/blas.h"

namespace sdp::cpu {
namespace {

// ---- exp that vectorizes: exp_fast(float) in vec_math.h ----------------------
// The softmax of every score goes through exp; at small head_dim a libm call
// per score would cost more than the matrix products. Inputs here are <= 0
// (scores minus their row maximum or lse).
// (f64 keeps libm's exp: see vec_math.h.)

// ---- per-row softmax pieces -----------------------------------------------------
// Each works on a [rows, keys] tile (row stride keys) of scores for query rows
// i0 .. i0 + rows; row r sees keys 0 .. i0 + r (causal), the rest become 0.

// s: scaled scores in, unnormalized exp(s - rowmax) out; lse_out[r] = log sum_j
// exp(s[r, j]) and inv_sum[r] = 1 / sum_j exp(s[r, j] - rowmax). The caller
// scales rows of P V by inv_sum: [rows, Dh] multiplies instead of [rows, keys].
template <typename T>
[[gnu::always_inline]] inline void softmax_rows_impl(T* s, int64_t rows, int64_t keys, int64_t i0, T* lse_out,
                                                     T* inv_sum) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * keys;
    const int64_t valid = i0 + r + 1;
    T mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < valid; ++j) mx = row[j] > mx ? row[j] : mx;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < valid; ++j) {
      const T e = exp_fast(row[j] - mx);
      row[j] = e;
      sum += e;
    }
    inv_sum[r] = T(1) / sum;
    std::fill(row + valid, row + keys, T(0));
    lse_out[r] = mx + std::log(sum);
  }
}

// s: scaled scores in, probabilities exp(s - lse) out.
template <typename T>
[[gnu::always_inline]] inline void probs_from_lse_impl(T* s, int64_t rows, int64_t keys, int64_t i0, const T* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * keys;
    const int64_t valid = i0 + r + 1;
    const T l = lse[r];
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) {
      // named temporaries: written as one expression GCC 12 does not vectorize it
      const T x = row[j] - l;
      const T e = exp_fast(x);
      row[j] = e;
    }
    std::fill(row + valid, row + keys, T(0));
  }
}

// dp: dO V^T in, dS = P * (dP - D) out, D[r] = rowsum(dO * O) given in d.
template <typename T>
[[gnu::always_inline]] inline void softmax_grad_rows_impl(const T* p, T* dp, int64_t rows, int64_t keys, int64_t i0, const T* d) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* prow = p + r * keys;
    T* row = dp + r * keys;
    const int64_t valid = i0 + r + 1;
    const T dr = d[r];
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) row[j] = prow[j] * (row[j] - dr);
    std::fill(row + valid, row + keys, T(0));
  }
}

// The row kernels above are the only non-BLAS work: SDP_MULTIVERSION builds
// them for AVX2 and AVX-512 too (vec_math.h).
SDP_MULTIVERSION void softmax_rows(float* s, int64_t rows, int64_t keys, int64_t i0,
                                   float* lse_out, float* inv_sum) {
  softmax_rows_impl(s, rows, keys, i0, lse_out, inv_sum);
}
void softmax_rows(double* s, int64_t rows, int64_t keys, int64_t i0, double* lse_out,
                  double* inv_sum) {
  softmax_rows_impl(s, rows, keys, i0, lse_out, inv_sum);
}
SDP_MULTIVERSION void probs_from_lse(float* s, int64_t rows, int64_t keys, int64_t i0,
                                     const float* lse) {
  probs_from_lse_impl(s, rows, keys, i0, lse);
}
void probs_from_lse(double* s, int64_t rows, int64_t keys, int64_t i0, const double* lse) {
  probs_from_lse_impl(s, rows, keys, i0, lse);
}
SDP_MULTIVERSION void softmax_grad_rows(const float* p, float* dp, int64_t rows, int64_t keys,
                                        int64_t i0, const float* d) {
  softmax_grad_rows_impl(p, dp, rows, keys, i0, d);
}
void softmax_grad_rows(const double* p, double* dp, int64_t rows, int64_t keys, int64_t i0,
                       const double* d) {
  softmax_grad_rows_impl(p, dp, rows, keys, i0, d);
}

int64_t thread_slab(int64_t seq) {
  const int64_t rows = std::min(kAttentionRowBlock, seq);
  return (2 * rows * seq + rows + 15) / 16 * 16;
}

}  // namespace

int64_t attention_workspace_elems(const AttentionDims& d, int threads) {
  return static_cast<int64_t>(std::max(threads, 1)) * thread_slab(d.seq);
}

template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, T* workspace,
                       const AttentionDims& d) {
  const int64_t B = d.batch, S = d.seq, Hq = d.q_heads, Hkv = d.kv_heads, Dh = d.head_dim;
  const int64_t group = Hq / Hkv;
  const int64_t qs = Hq * Dh, kvs = Hkv * Dh;  // row strides along the sequence
  const int64_t slab = thread_slab(S);
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dh)));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < B * Hq; ++bh) {
    const int64_t b = bh / Hq, h = bh % Hq, g = h / group;
    T* tile = workspace + omp_get_thread_num() * slab;  // [rows, keys]
    T* inv_sum = tile + std::min(kAttentionRowBlock, S) * S;  // [rows]
    const T* kb = k + b * S * kvs + g * Dh;
    const T* vb = v + b * S * kvs + g * Dh;
    T* lse_bh = lse + bh * S;
    for (int64_t i0 = 0; i0 < S; i0 += kAttentionRowBlock) {
      const int64_t rows = std::min(kAttentionRowBlock, S - i0);
      const int64_t keys = i0 + rows;  // causal: later keys are never seen
      const T* qb = q + (b * S + i0) * qs + h * Dh;
      gemm(CblasNoTrans, CblasTrans, rows, keys, Dh, scale, qb, qs, kb, kvs, T(0), tile, keys);
      softmax_rows(tile, rows, keys, i0, lse_bh + i0, inv_sum);
      T* ob = out + (b * S + i0) * qs + h * Dh;
      gemm(CblasNoTrans, CblasNoTrans, rows, Dh, keys, T(1), tile, keys, vb, kvs, T(0), ob, qs);
      for (int64_t r = 0; r < rows; ++r) {
        const T inv = inv_sum[r];
#pragma omp simd
        for (int64_t c = 0; c < Dh; ++c) ob[r * qs + c] *= inv;
      }
    }
  }
}

template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, T* dq, T* dk, T* dv, T* workspace,
                        const AttentionDims& d) {
  const int64_t B = d.batch, S = d.seq, Hq = d.q_heads, Hkv = d.kv_heads, Dh = d.head_dim;
  const int64_t group = Hq / Hkv;
  const int64_t qs = Hq * Dh, kvs = Hkv * Dh;
  const int64_t slab = thread_slab(S);
  const int64_t tile_elems = std::min(kAttentionRowBlock, S) * S;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dh)));
  // One task per (batch, kv head): the query heads of a group all add into the
  // same dk, dv rows, so they run in one task and need no atomics.
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < B * Hkv; ++bg) {
    const int64_t b = bg / Hkv, g = bg % Hkv;
    T* ws = workspace + omp_get_thread_num() * slab;
    T* p = ws;                   // [rows, keys] probabilities
    T* dp = ws + tile_elems;     // [rows, keys] dP, then dS
    T* drow = dp + tile_elems;   // [rows] rowsum(dO * O)
    const T* kb = k + b * S * kvs + g * Dh;
    const T* vb = v + b * S * kvs + g * Dh;
    T* dkb = dk + b * S * kvs + g * Dh;
    T* dvb = dv + b * S * kvs + g * Dh;
    for (int64_t t = 0; t < S; ++t) {
      std::memset(dkb + t * kvs, 0, static_cast<size_t>(Dh) * sizeof(T));
      std::memset(dvb + t * kvs, 0, static_cast<size_t>(Dh) * sizeof(T));
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const T* lse_bh = lse + (b * Hq + h) * S;
      for (int64_t i0 = 0; i0 < S; i0 += kAttentionRowBlock) {
        const int64_t rows = std::min(kAttentionRowBlock, S - i0);
        const int64_t keys = i0 + rows;
        const int64_t off = (b * S + i0) * qs + h * Dh;
        const T* qb = q + off;
        const T* ob = out + off;
        const T* dob = dout + off;
        gemm(CblasNoTrans, CblasTrans, rows, keys, Dh, scale, qb, qs, kb, kvs, T(0), p, keys);
        probs_from_lse(p, rows, keys, i0, lse_bh + i0);
        // dV[0:keys] += P^T dO
        gemm(CblasTrans, CblasNoTrans, keys, Dh, rows, T(1), p, keys, dob, qs, T(1), dvb, kvs);
        // dP = dO V^T
        gemm(CblasNoTrans, CblasTrans, rows, keys, Dh, T(1), dob, qs, vb, kvs, T(0), dp, keys);
        for (int64_t r = 0; r < rows; ++r) {
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t c = 0; c < Dh; ++c) acc += dob[r * qs + c] * ob[r * qs + c];
          drow[r] = acc;
        }
        softmax_grad_rows(p, dp, rows, keys, i0, drow);
        // dQ = scale dS K; dK[0:keys] += scale dS^T Q
        gemm(CblasNoTrans, CblasNoTrans, rows, Dh, keys, scale, dp, keys, kb, kvs, T(0),
             dq + off, qs);
        gemm(CblasTrans, CblasNoTrans, keys, Dh, rows, scale, dp, keys, qb, qs, T(1), dkb, kvs);
      }
    }
  }
}

template void attention_forward<float>(const float*, const float*, const float*, float*,
                                       float*, float*, const AttentionDims&);
template void attention_forward<double>(const double*, const double*, const double*, double*,
                                        double*, double*, const AttentionDims&);
template void attention_backward<float>(const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*,
                                        float*, const AttentionDims&);
template void attention_backward<double>(const double*, const double*, const double*,
                                         const double*, const double*, const double*, double*,
                                         double*, double*, double*, const AttentionDims&);

}  // namespace sdp::cpu
