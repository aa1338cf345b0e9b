#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

namespace sdp::cpu {

template <typename T>
void embedding_forward(const int32_t* tokens, const T* table, T* out, int64_t n, int64_t d) {
#pragma omp parallel for schedule(static) if (n * d >= (1 << 15))
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out + i * d, table + static_cast<int64_t>(tokens[i]) * d, sizeof(T) * d);
}

template <typename T>
void embedding_backward_weight(const int32_t* tokens, const T* dout, T* dtable, int64_t n,
                               int64_t d) {
  // 64 columns span whole cache lines of a row for both f32 and f64.
  constexpr int64_t kCols = 64;
  const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * d >= (1 << 15))
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * kCols, hi = std::min(d, lo + kCols);
    for (int64_t i = 0; i < n; ++i) {
      T* dst = dtable + static_cast<int64_t>(tokens[i]) * d;
      const T* src = dout + i * d;
      for (int64_t j = lo; j < hi; ++j) dst[j] += src[j];
    }
  }
}

template void embedding_forward<float>(const int32_t*, const float*, float*, int64_t, int64_t);
template void embedding_forward<double>(const int32_t*, const double*, double*, int64_t,
                                        int64_t);
template void embedding_backward_weight<float>(const int32_t*, const float*, float*, int64_t,
                                               int64_t);
template void embedding_backward_weight<double>(const int32_t*, const double*, double*,
                                                int64_t, int64_t);

}  // namespace sdp::cpu
