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

namespace {
// sum term(x[i]) in double. Partial sums run over fixed blocks and are added
// in block order, so the result does not depend on the thread count.
template <typename T, typename Term>
double blocked_sum(const T* x, int64_t n, Term term) {
  constexpr int kBlocks = 64;
  double partial[kBlocks] = {};
  const int64_t block = (n + kBlocks - 1) / kBlocks;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int b = 0; b < kBlocks; ++b) {
    const int64_t lo = b * block, hi = std::min(n, lo + block);
    double s = 0;
    for (int64_t i = lo; i < hi; ++i) s += term(static_cast<double>(x[i]));
    partial[b] = s;
  }
  double total = 0;
  for (double p : partial) total += p;
  return total;
}
}  // namespace

template <typename T>
double sum_squares(const T* x, int64_t n) {
  return blocked_sum(x, n, [](double v) { return v * v; });
}

template <typename T>
double sum(const T* x, int64_t n) {
  return blocked_sum(x, n, [](double v) { return v; });
}

int64_t count_nonnegative(const int32_t* x, int64_t n) {
  int64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : count) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) count += x[i] >= 0 ? 1 : 0;
  return count;
}

namespace {
// One element from From to To; bf16 goes through f32 both ways.
template <typename To, typename From>
To convert_one(From v) {
  if constexpr (std::is_same_v<From, bf16>)
    return convert_one<To>(v.to_float());
  else if constexpr (std::is_same_v<To, bf16>)
    return bf16::from_float(static_cast<float>(v));
  else
    return static_cast<To>(v);
}
}  // namespace

template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = convert_one<To>(src[i]);
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
template double sum<float>(const float*, int64_t);
template double sum<double>(const double*, int64_t);
template void convert<float, float>(const float*, float*, int64_t);
template void convert<float, double>(const float*, double*, int64_t);
template void convert<float, bf16>(const float*, bf16*, int64_t);
template void convert<double, float>(const double*, float*, int64_t);
template void convert<double, double>(const double*, double*, int64_t);
template void convert<double, bf16>(const double*, bf16*, int64_t);
template void convert<bf16, float>(const bf16*, float*, int64_t);
template void convert<bf16, double>(const bf16*, double*, int64_t);
template void convert<bf16, bf16>(const bf16*, bf16*, int64_t);

}  // namespace sdp::cpu
