#include "kernels/cpu/window_layout.h"

#include <algorithm>
#include <cstdint>

namespace sdp::cpu {

namespace {
constexpr int64_t kParallelMin = int64_t{1} << 15;  // elements; below, one thread
constexpr int64_t kCols = 64;                         // columns per task of the mean

// Window partition and merge are one permutation read in either direction:
// kToWindows copies x rows into window rows, otherwise back.
template <bool kToWindows, typename T>
void window_map(const T* src, T* dst, const WindowGeometry& g) {
  const int64_t H = g.height, W = g.width, C = g.channels, w = g.window, s = g.shift;
  const int64_t nh = H / w, nw = W / w, windows = g.batch * nh * nw;
#pragma omp parallel for schedule(static) if (windows * w * w * C >= kParallelMin)
  for (int64_t win = 0; win < windows; ++win) {
    const int64_t b = win / (nh * nw), i = win / nw % nh, j = win % nw;
    for (int64_t r = 0; r < w; ++r) {
      const int64_t row = (i * w + r + s) % H;
      for (int64_t c = 0; c < w; ++c) {
        const int64_t col = (j * w + c + s) % W;
        const int64_t x_off = ((b * H + row) * W + col) * C;
        const int64_t w_off = (win * w * w + r * w + c) * C;
        if constexpr (kToWindows)
          std::copy_n(src + x_off, C, dst + w_off);
        else
          std::copy_n(src + w_off, C, dst + x_off);
      }
    }
  }
}

// Patch merging, likewise: neighbour k of output (i, j) is x[2i + k % 2,
// 2j + k / 2] (timm's order: (0,0), (1,0), (0,1), (1,1)).
template <bool kForward, typename T>
void patch_merge_map(const T* src, T* dst, int64_t batch, int64_t h, int64_t w, int64_t c) {
  const int64_t ho = h / 2, wo = w / 2, rows = batch * ho;
#pragma omp parallel for schedule(static) if (batch * h * w * c >= kParallelMin)
  for (int64_t bi = 0; bi < rows; ++bi) {
    const int64_t b = bi / ho, i = bi % ho;
    for (int64_t j = 0; j < wo; ++j) {
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t x_off = ((b * h + 2 * i + k % 2) * w + 2 * j + k / 2) * c;
        const int64_t y_off = ((bi * wo + j) * 4 + k) * c;
        if constexpr (kForward)
          std::copy_n(src + x_off, c, dst + y_off);
        else
          std::copy_n(src + y_off, c, dst + x_off);
      }
    }
  }
}
}  // namespace

template <typename T>
void patchify(const T* images, T* patches, int64_t b, int64_t c, int64_t h, int64_t w,
              int64_t p) {
  const int64_t hp = h / p, wp = w / p, rows = b * hp;
#pragma omp parallel for schedule(static) if (b * c * h * w >= kParallelMin)
  for (int64_t bi = 0; bi < rows; ++bi) {
    const int64_t n = bi / hp, i = bi % hp;
    for (int64_t j = 0; j < wp; ++j) {
      T* out = patches + (bi * wp + j) * c * p * p;  // [c, p, p] of patch (i, j)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t r = 0; r < p; ++r)
          std::copy_n(images + ((n * c + ch) * h + i * p + r) * w + j * p, p,
                      out + (ch * p + r) * p);
    }
  }
}

template <typename T>
void window_partition(const T* x, T* windows, const WindowGeometry& g) {
  window_map<true>(x, windows, g);
}

template <typename T>
void window_merge(const T* windows, T* x, const WindowGeometry& g) {
  window_map<false>(windows, x, g);
}

template <typename T>
void patch_merge_forward(const T* x, T* y, int64_t b, int64_t h, int64_t w, int64_t c) {
  patch_merge_map<true>(x, y, b, h, w, c);
}

template <typename T>
void patch_merge_backward_input(const T* dy, T* dx, int64_t b, int64_t h, int64_t w,
                                int64_t c) {
  patch_merge_map<false>(dy, dx, b, h, w, c);
}

template <typename T>
void token_mean_forward(const T* x, T* y, int64_t b, int64_t l, int64_t c) {
  const int64_t blocks = (c + kCols - 1) / kCols;
  const double inv = 1.0 / static_cast<double>(l);
#pragma omp parallel for schedule(static) if (b * l * c >= kParallelMin)
  for (int64_t task = 0; task < b * blocks; ++task) {
    const int64_t n = task / blocks, lo = task % blocks * kCols;
    const int64_t width = std::min(c, lo + kCols) - lo;
    double acc[kCols] = {};
    for (int64_t t = 0; t < l; ++t) {
      const T* row = x + (n * l + t) * c + lo;
#pragma omp simd
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(row[j]);
    }
    for (int64_t j = 0; j < width; ++j) y[n * c + lo + j] = static_cast<T>(acc[j] * inv);
  }
}

template <typename T>
void token_mean_backward_input(const T* dy, T* dx, int64_t b, int64_t l, int64_t c) {
  const double inv = 1.0 / static_cast<double>(l);
#pragma omp parallel for schedule(static) if (b * l * c >= kParallelMin)
  for (int64_t row = 0; row < b * l; ++row) {
    const T* g = dy + row / l * c;
    T* out = dx + row * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = static_cast<T>(static_cast<double>(g[j]) * inv);
  }
}

#define SDP_INSTANTIATE(T)                                                                    \
  template void patchify<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t, int64_t);       \
  template void window_partition<T>(const T*, T*, const WindowGeometry&);                     \
  template void window_merge<T>(const T*, T*, const WindowGeometry&);                         \
  template void patch_merge_forward<T>(const T*, T*, int64_t, int64_t, int64_t, int64_t);     \
  template void patch_merge_backward_input<T>(const T*, T*, int64_t, int64_t, int64_t,        \
                                              int64_t);                                       \
  template void token_mean_forward<T>(const T*, T*, int64_t, int64_t, int64_t);               \
  template void token_mean_backward_input<T>(const T*, T*, int64_t, int64_t, int64_t);
SDP_INSTANTIATE(float)
SDP_INSTANTIATE(double)
#undef SDP_INSTANTIATE

}  // namespace sdp::cpu
