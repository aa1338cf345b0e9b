#include "kernels/cpu/lane_interleave.h"

#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SDP_INTERLEAVE_AVX2 1
#include <immintrin.h>
#endif

namespace sdp::cpu {

namespace {

constexpr int64_t kL = kInterleaveLanes;

// The plain loops, for what the 8 x 8 blocks leave: lanes [l0, l1) x
// columns [j0, j1).
template <typename T>
void interleave_plain(const T* planes, int64_t stride, int64_t l0, int64_t l1, int64_t j0,
                      int64_t j1, T* interleaved) {
  for (int64_t l = l0; l < l1; ++l)
    for (int64_t j = j0; j < j1; ++j) interleaved[j * kL + l] = planes[l * stride + j];
}

template <typename T>
void deinterleave_plain(const T* interleaved, int64_t l0, int64_t l1, int64_t j0, int64_t j1,
                        T* planes, int64_t stride, bool accumulate) {
  for (int64_t l = l0; l < l1; ++l) {
    T* dst = planes + l * stride;
    if (accumulate) {
      for (int64_t j = j0; j < j1; ++j) dst[j] += interleaved[j * kL + l];
    } else {
      for (int64_t j = j0; j < j1; ++j) dst[j] = interleaved[j * kL + l];
    }
  }
}

#ifdef SDP_INTERLEAVE_AVX2

// r[i] <- column i of the 8 x 8 matrix whose rows are r[0..7].
__attribute__((target("avx2"))) inline void transpose8(__m256 (&r)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Lanes [0, full_lanes) x columns [0, full_cols), both multiples of 8.
__attribute__((target("avx2"))) void interleave_blocks_avx2(const float* planes, int64_t stride,
                                                            int64_t full_lanes, int64_t full_cols,
                                                            float* interleaved) {
  for (int64_t l0 = 0; l0 < full_lanes; l0 += 8)
    for (int64_t j0 = 0; j0 < full_cols; j0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(planes + (l0 + i) * stride + j0);
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(interleaved + (j0 + i) * kL + l0, r[i]);
    }
}

__attribute__((target("avx2"))) void deinterleave_blocks_avx2(const float* interleaved,
                                                              int64_t full_lanes,
                                                              int64_t full_cols, float* planes,
                                                              int64_t stride, bool accumulate) {
  for (int64_t l0 = 0; l0 < full_lanes; l0 += 8)
    for (int64_t j0 = 0; j0 < full_cols; j0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(interleaved + (j0 + i) * kL + l0);
      transpose8(r);
      for (int i = 0; i < 8; ++i) {
        float* dst = planes + (l0 + i) * stride + j0;
        _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(_mm256_loadu_ps(dst), r[i]) : r[i]);
      }
    }
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

#endif  // SDP_INTERLEAVE_AVX2

}  // namespace

template <typename T>
void interleave_lanes(const T* planes, int64_t stride, int64_t lanes, int64_t width,
                      T* interleaved) {
  int64_t full_lanes = 0, full_cols = 0;  // the part the 8 x 8 blocks cover
#ifdef SDP_INTERLEAVE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx2()) {
      full_lanes = lanes / 8 * 8;
      full_cols = width / 8 * 8;
      interleave_blocks_avx2(planes, stride, full_lanes, full_cols, interleaved);
    }
  }
#endif
  interleave_plain(planes, stride, 0, full_lanes, full_cols, width, interleaved);
  interleave_plain(planes, stride, full_lanes, lanes, 0, width, interleaved);
}

template <typename T>
void deinterleave_lanes(const T* interleaved, int64_t lanes, int64_t width, T* planes,
                        int64_t stride, bool accumulate) {
  int64_t full_lanes = 0, full_cols = 0;
#ifdef SDP_INTERLEAVE_AVX2
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx2()) {
      full_lanes = lanes / 8 * 8;
      full_cols = width / 8 * 8;
      deinterleave_blocks_avx2(interleaved, full_lanes, full_cols, planes, stride, accumulate);
    }
  }
#endif
  deinterleave_plain(interleaved, 0, full_lanes, full_cols, width, planes, stride, accumulate);
  deinterleave_plain(interleaved, full_lanes, lanes, 0, width, planes, stride, accumulate);
}

template void interleave_lanes<float>(const float*, int64_t, int64_t, int64_t, float*);
template void interleave_lanes<double>(const double*, int64_t, int64_t, int64_t, double*);
template void deinterleave_lanes<float>(const float*, int64_t, int64_t, float*, int64_t, bool);
template void deinterleave_lanes<double>(const double*, int64_t, int64_t, double*, int64_t, bool);

}  // namespace sdp::cpu
