#pragma once
// Private to the Winograd convolutions (conv2d_winograd.cpp, F(2x2, 3x3),
// and conv2d_winograd4.cpp, F(4x4, 3x3)): what the two share but the
// transform itself. Each file passes its own G g G^T as a policy so the
// gather of kernels into lanes and the weight loops live once.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/conv2d.h"

namespace sdp::cpu::winograd_common {

// Kernels (weight transforms; in F(4x4) also channels of the input
// transform) side by side: kLanes consecutive input channels of one output
// channel, gathered into g[tap][lane] so the arithmetic and U's stores run
// across lanes (one kernel at a time, 16 scattered stores each cost more
// than the transform).
constexpr int64_t kLanes = 16;
// Output channels of the transposed conv gathered per pass over 16 rows of w.
constexpr int64_t kOutChunk = 32;
// Below this many elements in a loop one thread does it all.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// Distance between the point matrices of V, U, M, E and dU: their size plus
// one cache line. With power-of-two channel counts they would otherwise lie
// a multiple of 4 KiB apart, in one L1 set, and each tile's stores would
// evict one another.
constexpr int64_t kSkew = 16;
inline int64_t skewed(int64_t elems) { return elems + kSkew; }

// The input gradient as a forward conv: dy is its input, dx its output, the
// kernel flipped with in and out channels swapped, padding k - 1 - p.
inline Conv2dDims transposed(const Conv2dDims& d) {
  Conv2dDims t = d;
  t.in_channels = d.out_channels;
  t.height = d.out_height;
  t.width = d.out_width;
  t.out_channels = d.in_channels;
  t.padding = d.kernel - 1 - d.padding;
  t.out_height = d.height;
  t.out_width = d.width;
  return t;
}

// U's row (u: at column i0, point 0) of kernels w[oc][i0 .. i0 + n).
// Lanes::run(g, n, u, ps) writes u[point][l] = G g G^T of g[.][l].
template <typename Lanes, typename T>
[[gnu::always_inline]] inline void weight_row(const T* w, int64_t cin, int64_t oc, int64_t i0,
                                              int64_t n, T* u, int64_t ps) {
  T g[9][kLanes];
  const T* src = w + (oc * cin + i0) * 9;  // n kernels in a row
  for (int64_t l = 0; l < n; ++l)
    for (int t = 0; t < 9; ++t) g[t][l] = src[l * 9 + t];
  Lanes::run(g, n, u, ps);
}

// U's rows [0, m) (u: row 0 at column i0, point 0; rows cin apart) of the
// transposed conv: kernel (o, i) is w[i][oc + o] turned by 180 degrees, w
// [., cd, 3, 3]. Each of w's rows i0 .. i0 + n is read in order, m kernels
// at a time (reading across rows would miss the cache on every kernel).
template <typename Lanes, typename T>
[[gnu::always_inline]] inline void weight_rows_transposed(const T* w, int64_t cd, int64_t cin,
                                                          int64_t oc, int64_t i0, int64_t n,
                                                          int64_t m, T* u, int64_t ps) {
  T g[kOutChunk][9][kLanes];
  for (int64_t l = 0; l < n; ++l) {
    const T* src = w + ((i0 + l) * cd + oc) * 9;
    for (int64_t o = 0; o < m; ++o)
      for (int t = 0; t < 9; ++t) g[o][8 - t][l] = src[o * 9 + t];
  }
  for (int64_t o = 0; o < m; ++o) Lanes::run(g[o], n, u + o * cin, ps);
}

// U [kPoints, nb, Cin] = G g G^T for output channels [o0, o0 + nb): g =
// w[o][i], or for the transposed conv (the input gradient) w[i][o] turned by
// 180 degrees, w being the original [Cin of d = Cout, Cout of d = Cin, 3, 3].
// Rows::row and Rows::rows_transposed are weight_row and
// weight_rows_transposed, for f32 through the file's multiversioned copies.
template <int64_t kPoints, typename Rows, typename T>
void transform_weights(const T* w, bool transpose, T* u, const Conv2dDims& d, int64_t o0,
                       int64_t nb) {
  const int64_t cin = d.in_channels, ps = skewed(nb * cin);
  const int64_t groups = (cin + kLanes - 1) / kLanes;
  if (!transpose) {
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
    for (int64_t o = 0; o < nb; ++o)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const int64_t i0 = gi * kLanes, n = std::min(kLanes, cin - i0);
        Rows::row(w, cin, o0 + o, i0, n, u + o * cin + i0, ps);
      }
  } else {
    const int64_t chunks = (nb + kOutChunk - 1) / kOutChunk;
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
    for (int64_t gi = 0; gi < groups; ++gi)
      for (int64_t ci = 0; ci < chunks; ++ci) {
        const int64_t i0 = gi * kLanes, n = std::min(kLanes, cin - i0);
        const int64_t o = ci * kOutChunk, m = std::min(kOutChunk, nb - o);
        Rows::rows_transposed(w, d.out_channels, cin, o0 + o, i0, n, m, u + o * cin + i0, ps);
      }
  }
}

// dw [o0 .. o0 + nb, Cin, 3, 3] += G^T dU G, dU [kPoints, nb, Cin] (points
// skewed(nb * Cin) apart). Lanes::add(du, ps, n, dw) adds G^T dU G for n <=
// kLanes kernels side by side, for f32 through the file's multiversioned copy.
template <int64_t kPoints, typename Lanes, typename T>
void add_weight_gradients(const T* du, T* dw, const Conv2dDims& d, int64_t o0, int64_t nb) {
  const int64_t cin = d.in_channels, ps = skewed(nb * cin);
  const int64_t groups = (cin + kLanes - 1) / kLanes;
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t o = 0; o < nb; ++o)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t i0 = gi * kLanes, n = std::min(kLanes, cin - i0);
      Lanes::add(du + o * cin + i0, ps, n, dw + ((o0 + o) * cin + i0) * 9);
    }
}

}  // namespace sdp::cpu::winograd_common
