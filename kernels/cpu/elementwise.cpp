#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/vec_math.h"

namespace sdp::cpu {

namespace {
// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

template <typename T>
void fill(T* x, int64_t n, T value) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

template <typename T>
void copy_strided(const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides,
                  const int64_t* shape, int ndim) {
  if (ndim == 0) {
    *dst = *src;
    return;
  }
  for (int d = 0; d < ndim; ++d)
    if (shape[d] == 0) return;
  // Odometer over all dims but the last; the last dim is the inner loop.
  int64_t index[8] = {};
  const int outer = ndim - 1;
  const int64_t inner = shape[outer];
  const int64_t s_in = src_strides[outer], d_in = dst_strides[outer];
  while (true) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < outer; ++d) {
      so += index[d] * src_strides[d];
      doff += index[d] * dst_strides[d];
    }
    for (int64_t i = 0; i < inner; ++i) dst[doff + i * d_in] = src[so + i * s_in];
    int d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

template <typename T>
void add(const T* a, const T* b, T* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

namespace {
constexpr int64_t kChunk = 1 << 13;  // elements per task
SDP_MULTIVERSION void accumulate_f32(float* acc, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}
}  // namespace

template <typename T>
void accumulate(T* acc, const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = c * kChunk;
      accumulate_f32(acc + lo, x + lo, std::min(kChunk, n - lo));
    }
  } else {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
  }
}

template <typename T>
void scale(T* x, int64_t n, T alpha) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  constexpr int kBlocks = 64;
  double partial[kBlocks] = {};
  const int64_t block = (n + kBlocks - 1) / kBlocks;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int b = 0; b < kBlocks; ++b) {
    const int64_t lo = b * block, hi = std::min(n, lo + block);
    double s = 0;
    for (int64_t i = lo; i < hi; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[b] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

template void fill<float>(float*, int64_t, float);
template void fill<double>(double*, int64_t, double);
template void fill<int32_t>(int32_t*, int64_t, int32_t);
template void copy_strided<float>(const float*, const int64_t*, float*, const int64_t*,
                                  const int64_t*, int);
template void copy_strided<double>(const double*, const int64_t*, double*, const int64_t*,
                                   const int64_t*, int);
template void copy_strided<int32_t>(const int32_t*, const int64_t*, int32_t*, const int64_t*,
                                    const int64_t*, int);
template void add<float>(const float*, const float*, float*, int64_t);
template void add<double>(const double*, const double*, double*, int64_t);
template void accumulate<float>(float*, const float*, int64_t);
template void accumulate<double>(double*, const double*, int64_t);
template void scale<float>(float*, int64_t, float);
template void scale<double>(double*, int64_t, double);
template double sum_squares<float>(const float*, int64_t);
template double sum_squares<double>(const double*, int64_t);

}  // namespace sdp::cpu
