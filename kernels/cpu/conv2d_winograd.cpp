#include "kernels/cpu/conv2d_winograd.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/winograd_common.h"

namespace sdp::cpu {

namespace {

using namespace winograd_common;

constexpr int64_t kPoints = 16;  // 4 x 4 transform points per tile
// Tiles (GEMM columns) per block: OpenBLAS runs near its peak from a few
// hundred columns on.
constexpr int64_t kTargetTiles = 512;
// V [16, Cin, tiles] never holds more than this many elements (4 MiB of f32)
// unless one tile row needs more: the 512-channel layers take 128 tiles.
constexpr int64_t kTransformBudget = int64_t{1} << 20;
// U [16, out_block, Cin] never holds more than this many elements unless one
// output channel needs more: the 512-channel layers take 64 at a time.
constexpr int64_t kWeightBudget = int64_t{1} << 19;

struct Plan {
  int64_t tiles_h = 1, tiles_w = 1;   // tiles per image: ceil(Ho / 2) x ceil(Wo / 2)
  int64_t images = 1, tile_rows = 1;  // per block: several images only with all their rows
  int64_t out_block = 1;              // output channels per GEMM
  int64_t tiles() const { return images * tile_rows * tiles_w; }  // most per block
  // Each input plane of a block is copied zero-padded and split into even and
  // odd columns, so the stride-2 tile windows read unit-stride: 2 tile_rows + 2
  // rows of [even | odd], each half tiles_w + 1 long.
  int64_t half() const { return tiles_w + 1; }
  int64_t pad_plane() const { return (2 * tile_rows + 2) * 2 * half(); }
};

Plan plan_of(const Conv2dDims& d) {
  Plan p;
  p.tiles_h = std::max<int64_t>((d.out_height + 1) / 2, 1);
  p.tiles_w = std::max<int64_t>((d.out_width + 1) / 2, 1);
  const int64_t cin = std::max<int64_t>(d.in_channels, 1);
  const int64_t tiles =
      std::min(kTargetTiles, std::max<int64_t>(kTransformBudget / (kPoints * cin), 1));
  const int64_t per_image = p.tiles_h * p.tiles_w;
  if (per_image >= tiles) {
    p.tile_rows = std::clamp(tiles / p.tiles_w, int64_t{1}, p.tiles_h);
  } else {
    p.images = std::clamp(tiles / per_image, int64_t{1}, std::max<int64_t>(d.batch, 1));
    p.tile_rows = p.tiles_h;
  }
  p.out_block = std::clamp(kWeightBudget / (kPoints * cin), int64_t{1},
                           std::max<int64_t>(d.out_channels, 1));
  return p;
}

// Workspace: padded planes, then V [16, Cin, tiles], then U [16, out_block,
// Cin] and M [16, out_block, tiles] (forward), or dU [16, out_block, Cin] and
// E [16, out_block, tiles] (backward weight): the same sizes.
int64_t pad_elems(const Conv2dDims& d, const Plan& p) {
  return d.in_channels * p.images * p.pad_plane();
}
int64_t forward_elems(const Conv2dDims& d) {
  const Plan p = plan_of(d);
  return pad_elems(d, p) + kPoints * skewed(d.in_channels * p.tiles()) +
         kPoints * skewed(p.out_block * d.in_channels) + kPoints * skewed(p.out_block * p.tiles());
}

// A block: images [image, image + images), tile rows [first_row,
// first_row + rows) of each; tile (i, a, tx) is column (i rows + a) tiles_w + tx
// of the block's GEMMs.
struct TileBlock {
  int64_t image, images, first_row, rows;
};

template <typename F>
void for_tile_blocks(const Conv2dDims& d, const Plan& p, F&& f) {
  for (int64_t b = 0; b < d.batch; b += p.images)
    for (int64_t r = 0; r < p.tiles_h; r += p.tile_rows)
      f(TileBlock{b, std::min(p.images, d.batch - b), r, std::min(p.tile_rows, p.tiles_h - r)});
}

// One input plane [H, W] -> the block's padded rows: row r holds input row
// 2 first_row - padding + r as [even | odd] columns of the padded row
// (padded column q = input column + padding); outside the input, zeros.
template <typename T>
[[gnu::always_inline]] inline void split_pad(const T* in, T* pad, const Conv2dDims& d,
                                             const Plan& p, const TileBlock& blk) {
  const int64_t half = p.half(), W = d.width;
  const Conv2dSpan even = conv2d_inside(-d.padding, W, 2, half);
  const Conv2dSpan odd = conv2d_inside(1 - d.padding, W, 2, half);
  std::fill(pad, pad + p.pad_plane(), T(0));
  for (int64_t r = 0; r < 2 * blk.rows + 2; ++r) {
    const int64_t ih = 2 * blk.first_row - d.padding + r;
    if (ih < 0 || ih >= d.height) continue;
    const T* src = in + ih * W;
    T* e = pad + r * 2 * half;
    T* o = e + half;
    for (int64_t j = even.lo; j < even.hi; ++j) e[j] = src[2 * j - d.padding];
    for (int64_t j = odd.lo; j < odd.hi; ++j) o[j] = src[2 * j + 1 - d.padding];
  }
}

// V = B^T d B for the tiles of padded tile row `a`, d the 4 x 4 window at
// padded rows 2a..2a+3, columns 2t..2t+3 (= even t, odd t, even t+1, odd
// t+1). Point (k, j) goes to v[(4k + j) point_stride + t].
template <typename T>
[[gnu::always_inline]] inline void input_tiles(const T* pad, T* v, int64_t point_stride,
                                               const Plan& p, int64_t a) {
  const int64_t half = p.half(), row = 2 * half;
  const T* e[4];
  const T* o[4];
  for (int k = 0; k < 4; ++k) {
    e[k] = pad + (2 * a + k) * row;
    o[k] = e[k] + half;
  }
  const int64_t ps = point_stride;
#pragma omp simd
  for (int64_t t = 0; t < p.tiles_w; ++t) {
    T c[4][4];  // B^T applied along the columns of each row
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const T d0 = e[k][t], d1 = o[k][t], d2 = e[k][t + 1], d3 = o[k][t + 1];
      c[k][0] = d0 - d2;
      c[k][1] = d1 + d2;
      c[k][2] = d2 - d1;
      c[k][3] = d1 - d3;
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      v[(0 + j) * ps + t] = c[0][j] - c[2][j];
      v[(4 + j) * ps + t] = c[1][j] + c[2][j];
      v[(8 + j) * ps + t] = c[2][j] - c[1][j];
      v[(12 + j) * ps + t] = c[1][j] - c[3][j];
    }
  }
}

// One input plane of the block -> its tiles' columns of V (v: the plane's
// first tile at point 0, ps: the distance between points).
template <typename T>
[[gnu::always_inline]] inline void input_plane(const T* in, T* pad, T* v, int64_t ps,
                                               const Conv2dDims& d, const Plan& p,
                                               const TileBlock& blk) {
  split_pad(in, pad, d, p, blk);
  for (int64_t a = 0; a < blk.rows; ++a) input_tiles(pad, v + a * p.tiles_w, ps, p, a);
}

// The transforms are the only non-BLAS work: their f32 loops are also built
// for AVX2 and AVX-512 (vec_math.h).
SDP_MULTIVERSION void input_plane_f32(const float* in, float* pad, float* v, int64_t ps,
                                      const Conv2dDims& d, const Plan& p, const TileBlock& blk) {
  input_plane(in, pad, v, ps, d, p, blk);
}

// x's planes of the block -> V [16, Cin, tiles].
template <typename T>
void transform_inputs(const T* x, T* pad, T* v, const Conv2dDims& d, const Plan& p,
                      const TileBlock& blk) {
  const int64_t cin = d.in_channels, nt = blk.images * blk.rows * p.tiles_w;
  const int64_t plane = d.height * d.width, ps = skewed(cin * nt);
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t c = 0; c < cin; ++c) {
      const T* in = x + ((blk.image + i) * cin + c) * plane;
      T* padded = pad + (i * cin + c) * p.pad_plane();
      T* out = v + c * nt + i * blk.rows * p.tiles_w;
      if constexpr (std::is_same_v<T, float>)
        input_plane_f32(in, padded, out, ps, d, p, blk);
      else
        input_plane(in, padded, out, ps, d, p, blk);
    }
}

// u[point][l] (points ps apart) = G g G^T of kernels g[.][l], l < n.
template <typename T>
[[gnu::always_inline]] inline void weight_lanes(const T (&g)[9][kLanes], int64_t n, T* u,
                                                int64_t ps) {
  const T h = T(0.5);
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    T r[4][3];  // G g
    for (int kw = 0; kw < 3; ++kw) {
      const T g0 = g[kw][l], g1 = g[3 + kw][l], g2 = g[6 + kw][l];
      r[0][kw] = g0;
      r[1][kw] = (g0 + g1 + g2) * h;
      r[2][kw] = (g0 - g1 + g2) * h;
      r[3][kw] = g2;
    }
    for (int k = 0; k < 4; ++k) {  // (G g) G^T
      u[(4 * k + 0) * ps + l] = r[k][0];
      u[(4 * k + 1) * ps + l] = (r[k][0] + r[k][1] + r[k][2]) * h;
      u[(4 * k + 2) * ps + l] = (r[k][0] - r[k][1] + r[k][2]) * h;
      u[(4 * k + 3) * ps + l] = r[k][2];
    }
  }
}

// weight_lanes as the shared weight loops' policy.
struct Lanes {
  template <typename T>
  [[gnu::always_inline]] static void run(const T (&g)[9][kLanes], int64_t n, T* u, int64_t ps) {
    weight_lanes(g, n, u, ps);
  }
};

SDP_MULTIVERSION void weight_row_f32(const float* w, int64_t cin, int64_t oc, int64_t i0,
                                     int64_t n, float* u, int64_t ps) {
  weight_row<Lanes>(w, cin, oc, i0, n, u, ps);
}
SDP_MULTIVERSION void weight_rows_transposed_f32(const float* w, int64_t cd, int64_t cin,
                                                 int64_t oc, int64_t i0, int64_t n, int64_t m,
                                                 float* u, int64_t ps) {
  weight_rows_transposed<Lanes>(w, cd, cin, oc, i0, n, m, u, ps);
}

// The rows for transform_weights: f32 through the multiversioned copies.
struct Rows {
  template <typename T>
  static void row(const T* w, int64_t cin, int64_t oc, int64_t i0, int64_t n, T* u, int64_t ps) {
    if constexpr (std::is_same_v<T, float>)
      weight_row_f32(w, cin, oc, i0, n, u, ps);
    else
      weight_row<Lanes>(w, cin, oc, i0, n, u, ps);
  }
  template <typename T>
  static void rows_transposed(const T* w, int64_t cd, int64_t cin, int64_t oc, int64_t i0,
                              int64_t n, int64_t m, T* u, int64_t ps) {
    if constexpr (std::is_same_v<T, float>)
      weight_rows_transposed_f32(w, cd, cin, oc, i0, n, m, u, ps);
    else
      weight_rows_transposed<Lanes>(w, cd, cin, oc, i0, n, m, u, ps);
  }
};

// y tile = A^T m A of tile t (m: point 0 of tile 0, points ps apart).
template <typename T>
[[gnu::always_inline]] inline void output_tile(const T* m, int64_t ps, int64_t t, T out[2][2]) {
  T s[2][4];  // A^T m
  for (int j = 0; j < 4; ++j) {
    const T m0 = m[j * ps + t], m1 = m[(4 + j) * ps + t];
    const T m2 = m[(8 + j) * ps + t], m3 = m[(12 + j) * ps + t];
    s[0][j] = m0 + m1 + m2;
    s[1][j] = m1 - m2 - m3;
  }
  for (int k = 0; k < 2; ++k) {  // (A^T m) A
    out[k][0] = s[k][0] + s[k][1] + s[k][2];
    out[k][1] = s[k][1] - s[k][2] - s[k][3];
  }
}

template <bool kAccumulate, typename T>
[[gnu::always_inline]] inline void put(T* dst, T value) {
  if constexpr (kAccumulate)
    *dst += value;
  else
    *dst = value;
}

// One tile row of one output plane: output rows 2 ty (y0) and, with
// kTwoRows, 2 ty + 1 (y1). Tiles [0, full) have both columns; the last may
// have one (odd Wo).
template <typename T, bool kAccumulate, bool kTwoRows>
[[gnu::always_inline]] inline void output_row(const T* m, int64_t ps, T* y0, T* y1,
                                              int64_t tiles_w, int64_t full) {
#pragma omp simd
  for (int64_t t = 0; t < full; ++t) {
    T out[2][2];
    output_tile(m, ps, t, out);
    put<kAccumulate>(y0 + 2 * t, out[0][0]);
    put<kAccumulate>(y0 + 2 * t + 1, out[0][1]);
    if constexpr (kTwoRows) {
      put<kAccumulate>(y1 + 2 * t, out[1][0]);
      put<kAccumulate>(y1 + 2 * t + 1, out[1][1]);
    }
  }
  if (full < tiles_w) {
    T out[2][2];
    output_tile(m, ps, full, out);
    put<kAccumulate>(y0 + 2 * full, out[0][0]);
    if constexpr (kTwoRows) put<kAccumulate>(y1 + 2 * full, out[1][0]);
  }
}

// The block's tile rows of one output plane (m: the plane's first tile).
template <typename T>
[[gnu::always_inline]] inline void output_plane(const T* m, int64_t ps, T* plane,
                                                const Conv2dDims& d, const Plan& p,
                                                const TileBlock& blk, bool accumulate) {
  const int64_t Ho = d.out_height, Wo = d.out_width, full = Wo / 2;
  for (int64_t a = 0; a < blk.rows; ++a) {
    const T* mt = m + a * p.tiles_w;
    const int64_t oh = 2 * (blk.first_row + a);
    T* y0 = plane + oh * Wo;
    T* y1 = y0 + Wo;
    const bool two = oh + 1 < Ho;
    if (accumulate) {
      if (two)
        output_row<T, true, true>(mt, ps, y0, y1, p.tiles_w, full);
      else
        output_row<T, true, false>(mt, ps, y0, y1, p.tiles_w, full);
    } else {
      if (two)
        output_row<T, false, true>(mt, ps, y0, y1, p.tiles_w, full);
      else
        output_row<T, false, false>(mt, ps, y0, y1, p.tiles_w, full);
    }
  }
}

SDP_MULTIVERSION void output_plane_f32(const float* m, int64_t ps, float* plane,
                                       const Conv2dDims& d, const Plan& p, const TileBlock& blk,
                                       bool accumulate) {
  output_plane(m, ps, plane, d, p, blk, accumulate);
}

// M [16, nb, tiles] -> y's planes of output channels [o0, o0 + nb).
template <typename T>
void transform_outputs(const T* m, T* y, const Conv2dDims& d, const Plan& p,
                       const TileBlock& blk, int64_t o0, int64_t nb, bool accumulate) {
  const int64_t nt = blk.images * blk.rows * p.tiles_w, ps = skewed(nb * nt);
  const int64_t plane = d.out_height * d.out_width;
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t o = 0; o < nb; ++o) {
      const T* mt = m + o * nt + i * blk.rows * p.tiles_w;
      T* out = y + ((blk.image + i) * d.out_channels + o0 + o) * plane;
      if constexpr (std::is_same_v<T, float>)
        output_plane_f32(mt, ps, out, d, p, blk, accumulate);
      else
        output_plane(mt, ps, out, d, p, blk, accumulate);
    }
}

// E = A g A^T of one 2 x 2 dy tile (a b / c dd): A g has rows (a, b),
// (a + c, b + dd), (a - c, b - dd), (-c, -dd); each row (p, q) becomes
// (p, p + q, p - q, -q). Point (k, j) goes to e[(4k + j) ps + t].
template <typename T>
[[gnu::always_inline]] inline void gradient_tile(T* e, int64_t ps, int64_t t, T a, T b, T c,
                                                 T dd) {
  const T rows[4][2] = {{a, b}, {a + c, b + dd}, {a - c, b - dd}, {-c, -dd}};
  for (int k = 0; k < 4; ++k) {
    e[(4 * k + 0) * ps + t] = rows[k][0];
    e[(4 * k + 1) * ps + t] = rows[k][0] + rows[k][1];
    e[(4 * k + 2) * ps + t] = rows[k][0] - rows[k][1];
    e[(4 * k + 3) * ps + t] = -rows[k][1];
  }
}

// The block's tile rows of one output-gradient plane (zeros past Ho, Wo).
template <typename T>
[[gnu::always_inline]] inline void gradient_plane(const T* plane, T* e, int64_t ps,
                                                  const Conv2dDims& d, const Plan& p,
                                                  const TileBlock& blk) {
  const int64_t Ho = d.out_height, Wo = d.out_width, full = Wo / 2, tw = p.tiles_w;
  for (int64_t a = 0; a < blk.rows; ++a) {
    const int64_t oh = 2 * (blk.first_row + a);
    const T* g0 = plane + oh * Wo;
    const T* g1 = g0 + Wo;
    T* et = e + a * tw;
    if (oh + 1 < Ho) {
#pragma omp simd
      for (int64_t t = 0; t < full; ++t)
        gradient_tile(et, ps, t, g0[2 * t], g0[2 * t + 1], g1[2 * t], g1[2 * t + 1]);
      if (full < tw) gradient_tile(et, ps, full, g0[2 * full], T(0), g1[2 * full], T(0));
    } else {
#pragma omp simd
      for (int64_t t = 0; t < full; ++t)
        gradient_tile(et, ps, t, g0[2 * t], g0[2 * t + 1], T(0), T(0));
      if (full < tw) gradient_tile(et, ps, full, g0[2 * full], T(0), T(0), T(0));
    }
  }
}

SDP_MULTIVERSION void gradient_plane_f32(const float* plane, float* e, int64_t ps,
                                         const Conv2dDims& d, const Plan& p,
                                         const TileBlock& blk) {
  gradient_plane(plane, e, ps, d, p, blk);
}

// dy's planes of the block, output channels [o0, o0 + nb) -> E [16, nb, tiles].
template <typename T>
void transform_gradients(const T* dy, T* e, const Conv2dDims& d, const Plan& p,
                         const TileBlock& blk, int64_t o0, int64_t nb) {
  const int64_t nt = blk.images * blk.rows * p.tiles_w, ps = skewed(nb * nt);
  const int64_t plane = d.out_height * d.out_width;
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t o = 0; o < nb; ++o) {
      const T* in = dy + ((blk.image + i) * d.out_channels + o0 + o) * plane;
      T* out = e + o * nt + i * blk.rows * p.tiles_w;
      if constexpr (std::is_same_v<T, float>)
        gradient_plane_f32(in, out, ps, d, p, blk);
      else
        gradient_plane(in, out, ps, d, p, blk);
    }
}

// dw[oc][i0 .. i0 + n) += G^T dU G, n <= kLanes (du: dU's row at column
// i0, point 0; points ps apart), computed across lanes into r[tap][lane]
// and then added kernel by kernel.
template <typename T>
[[gnu::always_inline]] inline void weight_gradient_lanes(const T* du, int64_t ps, int64_t n,
                                                         T* dw) {
  T r[9][kLanes];
  const T h = T(0.5);
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    T q[3][4];  // G^T dU
    for (int j = 0; j < 4; ++j) {
      const T m0 = du[j * ps + l], m1 = du[(4 + j) * ps + l];
      const T m2 = du[(8 + j) * ps + l], m3 = du[(12 + j) * ps + l];
      q[0][j] = m0 + (m1 + m2) * h;
      q[1][j] = (m1 - m2) * h;
      q[2][j] = (m1 + m2) * h + m3;
    }
    for (int kh = 0; kh < 3; ++kh) {  // (G^T dU) G
      r[kh * 3 + 0][l] = q[kh][0] + (q[kh][1] + q[kh][2]) * h;
      r[kh * 3 + 1][l] = (q[kh][1] - q[kh][2]) * h;
      r[kh * 3 + 2][l] = (q[kh][1] + q[kh][2]) * h + q[kh][3];
    }
  }
  for (int64_t l = 0; l < n; ++l)
    for (int t = 0; t < 9; ++t) dw[l * 9 + t] += r[t][l];
}

SDP_MULTIVERSION void weight_gradient_lanes_f32(const float* du, int64_t ps, int64_t n,
                                                float* dw) {
  weight_gradient_lanes(du, ps, n, dw);
}

// The weight gradient's lanes for add_weight_gradients: f32 through the
// multiversioned copy.
struct GradientLanes {
  template <typename T>
  static void add(const T* du, int64_t ps, int64_t n, T* dw) {
    if constexpr (std::is_same_v<T, float>)
      weight_gradient_lanes_f32(du, ps, n, dw);
    else
      weight_gradient_lanes(du, ps, n, dw);
  }
};

// The forward of d (for the input gradient: of transposed(d), transpose set).
template <typename T>
void forward(const T* x, const T* w, bool transpose, T* y, T* workspace, const Conv2dDims& d,
             bool accumulate) {
  const Plan p = plan_of(d);
  const int64_t cin = d.in_channels, cout = d.out_channels;
  T* pad = workspace;
  T* v = pad + pad_elems(d, p);
  T* u = v + kPoints * skewed(cin * p.tiles());
  T* m = u + kPoints * skewed(p.out_block * cin);
  const bool one_weight_block = p.out_block >= cout;
  if (one_weight_block) transform_weights<kPoints, Rows>(w, transpose, u, d, 0, cout);
  for_tile_blocks(d, p, [&](const TileBlock& blk) {
    const int64_t nt = blk.images * blk.rows * p.tiles_w;
    transform_inputs(x, pad, v, d, p, blk);
    for (int64_t o0 = 0; o0 < cout; o0 += p.out_block) {
      const int64_t nb = std::min(p.out_block, cout - o0);
      if (!one_weight_block) transform_weights<kPoints, Rows>(w, transpose, u, d, o0, nb);
      const int64_t u_ps = skewed(nb * cin), v_ps = skewed(cin * nt), m_ps = skewed(nb * nt);
      for (int64_t xi = 0; xi < kPoints; ++xi)
        gemm(CblasNoTrans, CblasNoTrans, nb, nt, cin, T(1), u + xi * u_ps, cin, v + xi * v_ps,
             nt, T(0), m + xi * m_ps, nt);
      transform_outputs(m, y, d, p, blk, o0, nb, accumulate);
    }
  });
}

}  // namespace

bool winograd_applies(const Conv2dDims& d) {
  return d.kernel == 3 && d.stride == 1 && d.padding <= 2;
}

int64_t winograd_workspace_elems(const Conv2dDims& d) {
  return std::max(forward_elems(d), forward_elems(transposed(d)));
}

template <typename T>
void winograd_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                      bool accumulate) {
  forward(x, w, false, y, workspace, d, accumulate);
}

template <typename T>
void winograd_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                             bool accumulate) {
  forward(dy, w, true, dx, workspace, transposed(d), accumulate);
}

template <typename T>
void winograd_backward_weight(const T* dy, const T* x, T* dw, T* workspace,
                              const Conv2dDims& d) {
  const Plan p = plan_of(d);
  const int64_t cin = d.in_channels, cout = d.out_channels;
  T* pad = workspace;
  T* v = pad + pad_elems(d, p);
  T* du = v + kPoints * skewed(cin * p.tiles());
  T* e = du + kPoints * skewed(p.out_block * cin);
  for_tile_blocks(d, p, [&](const TileBlock& blk) {
    const int64_t nt = blk.images * blk.rows * p.tiles_w;
    transform_inputs(x, pad, v, d, p, blk);
    for (int64_t o0 = 0; o0 < cout; o0 += p.out_block) {
      const int64_t nb = std::min(p.out_block, cout - o0);
      transform_gradients(dy, e, d, p, blk, o0, nb);
      const int64_t e_ps = skewed(nb * nt), v_ps = skewed(cin * nt), du_ps = skewed(nb * cin);
      for (int64_t xi = 0; xi < kPoints; ++xi)
        gemm(CblasNoTrans, CblasTrans, nb, cin, nt, T(1), e + xi * e_ps, nt, v + xi * v_ps, nt,
             T(0), du + xi * du_ps, cin);
      add_weight_gradients<kPoints, GradientLanes>(du, dw, d, o0, nb);
    }
  });
}

template void winograd_forward<float>(const float*, const float*, float*, float*,
                                      const Conv2dDims&, bool);
template void winograd_forward<double>(const double*, const double*, double*, double*,
                                       const Conv2dDims&, bool);
template void winograd_backward_input<float>(const float*, const float*, float*, float*,
                                             const Conv2dDims&, bool);
template void winograd_backward_input<double>(const double*, const double*, double*, double*,
                                              const Conv2dDims&, bool);
template void winograd_backward_weight<float>(const float*, const float*, float*, float*,
                                              const Conv2dDims&);
template void winograd_backward_weight<double>(const double*, const double*, double*, double*,
                                               const Conv2dDims&);

}  // namespace sdp::cpu
