#include "kernels/cpu/activation.h"

#include <algorithm>
#include <cstdint>

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t{1} << 15;  // elements; below, one thread
constexpr int64_t kBlock = 4096;                      // elements per task of flat loops
constexpr int64_t kCols = 64;                         // columns per task of bias sums
}  // namespace

template <typename T>
void relu_forward(const T* x, T* y, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t hi = std::min(n, (blk + 1) * kBlock);
#pragma omp simd
    for (int64_t i = blk * kBlock; i < hi; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];
  }
}

template <typename T>
void relu_backward_input(const T* dy, const T* y, T* dx, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t hi = std::min(n, (blk + 1) * kBlock);
    // Both operands are read unconditionally: a select, which vectorizes,
    // where a load under the condition compiled to a branch per element
    // (mispredicted about half the time on ReLU outputs).
#pragma omp simd
    for (int64_t i = blk * kBlock; i < hi; ++i) {
      const T d = dy[i];
      dx[i] = y[i] > T(0) ? d : T(0);
    }
  }
}

template <typename T>
void global_avg_pool_forward(const T* x, T* y, int64_t planes, int64_t spatial) {
  const double inv = spatial > 0 ? 1.0 / static_cast<double>(spatial) : 0.0;
#pragma omp parallel for schedule(static) if (planes * spatial >= kParallelMin)
  for (int64_t p = 0; p < planes; ++p) {
    const T* in = x + p * spatial;
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < spatial; ++i) s += static_cast<double>(in[i]);
    y[p] = static_cast<T>(s * inv);
  }
}

template <typename T>
void global_avg_pool_backward_input(const T* dy, T* dx, int64_t planes, int64_t spatial) {
  const double inv = spatial > 0 ? 1.0 / static_cast<double>(spatial) : 0.0;
#pragma omp parallel for schedule(static) if (planes * spatial >= kParallelMin)
  for (int64_t p = 0; p < planes; ++p) {
    const T g = static_cast<T>(static_cast<double>(dy[p]) * inv);
    std::fill(dx + p * spatial, dx + (p + 1) * spatial, g);
  }
}

template <typename T>
void bias_add_forward(T* y, const T* bias, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    T* row = y + r * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) row[j] += bias[j];
  }
}

template <typename T>
void bias_backward_weight(const T* dy, T* dbias, int64_t rows, int64_t cols) {
  const int64_t blocks = (cols + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t lo = blk * kCols, width = std::min(cols, lo + kCols) - lo;
    double acc[kCols] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = dy + r * cols + lo;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) dbias[lo + j] += static_cast<T>(acc[j]);
  }
}

#define SDP_INSTANTIATE(T)                                                          \
  template void relu_forward<T>(const T*, T*, int64_t);                             \
  template void relu_backward_input<T>(const T*, const T*, T*, int64_t);            \
  template void global_avg_pool_forward<T>(const T*, T*, int64_t, int64_t);         \
  template void global_avg_pool_backward_input<T>(const T*, T*, int64_t, int64_t);  \
  template void bias_add_forward<T>(T*, const T*, int64_t, int64_t);                \
  template void bias_backward_weight<T>(const T*, T*, int64_t, int64_t);
SDP_INSTANTIATE(float)
SDP_INSTANTIATE(double)
#undef SDP_INSTANTIATE

}  // namespace sdp::cpu
