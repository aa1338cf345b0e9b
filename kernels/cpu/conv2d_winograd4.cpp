#include "kernels/cpu/conv2d_winograd4.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/lane_interleave.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/cpu/winograd_common.h"

namespace sdp::cpu {

namespace {

using namespace winograd_common;

constexpr int64_t kPoints = 36;  // 6 x 6 transform points per tile
static_assert(kInterleaveLanes == kLanes, "the interleaved rows are the transforms' lanes");
// Tiles (GEMM rows) per block: few enough that V and M stay near L2 size
// (36 x 64 x 128 f32 = 1.2 MiB each for the 64-channel layers), so a block
// holds kTileChannels / channels tiles, at least kMinTiles. bench_conv
// measured 128 tiles faster than 512 on the 64-channel 32 x 32 layer (CPU
// time, by a tenth to a quarter at batch 32 and 128); thin layers (8 to 32
// channels, an N-SDP rank's half-width ResNet blocks) get more tiles per
// block instead, so each of the 36 GEMMs is large enough to amortize its
// call and packing.
constexpr int64_t kTileChannels = 128 * 64;
constexpr int64_t kMinTiles = 128;
// V [36, tiles, Cin] never holds more than this many elements (8 MiB of f32)
// unless one tile row needs more: fewer than kMinTiles only from 456
// channels on.
constexpr int64_t kTransformBudget = int64_t{1} << 21;
// U [36, out_block, Cin] never holds more than this many elements unless one
// output channel needs more: the 256-channel layers take 227 at a time
// (with 2^20, 113: a tenth slower in bench_conv, smaller GEMMs).
constexpr int64_t kWeightBudget = int64_t{1} << 21;

struct Plan {
  int64_t tiles_h = 1, tiles_w = 1;   // tiles per image: ceil(Ho / 4) x ceil(Wo / 4)
  int64_t images = 1, tile_rows = 1;  // per block: several images only with all their rows
  int64_t out_block = 1;              // output channels per GEMM
  int64_t tiles() const { return images * tile_rows * tiles_w; }  // most per block
  // The input transform runs across kLanes channels at a time (the deep
  // layers have one or two tiles per row: too few for vectors across
  // tiles). Each (image, channel group) of a block is copied zero-padded
  // and channel-interleaved: [4 tile_rows + 2, 4 tiles_w + 2, kLanes].
  int64_t pad_cols() const { return 4 * tiles_w + 2; }
  int64_t pad_group() const { return (4 * tile_rows + 2) * pad_cols() * kLanes; }
  // The output and gradient transforms likewise run across kLanes output
  // channels, through one [4 tile_rows, 4 tiles_w, kLanes] interleaved
  // group per (image, channel group).
  int64_t out_group() const { return 4 * tile_rows * 4 * tiles_w * kLanes; }
};

Plan plan_of(const Conv2dDims& d) {
  Plan p;
  p.tiles_h = std::max<int64_t>((d.out_height + 3) / 4, 1);
  p.tiles_w = std::max<int64_t>((d.out_width + 3) / 4, 1);
  const int64_t cin = std::max<int64_t>(d.in_channels, 1);
  const int64_t widest = std::max<int64_t>(cin, d.out_channels);
  const int64_t target = std::max(kMinTiles, kTileChannels / widest);
  const int64_t tiles =
      std::min(target, std::max<int64_t>(kTransformBudget / (kPoints * cin), 1));
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

// Workspace: padded groups, then V [36, tiles, Cin], then U [36, out_block,
// Cin] and M [36, tiles, out_block] (forward), or dU [36, out_block, Cin] and
// E [36, tiles, out_block] (backward weight), then the interleaved output
// (or gradient) groups.
int64_t groups_of(int64_t channels) { return (channels + kLanes - 1) / kLanes; }
int64_t pad_elems(const Conv2dDims& d, const Plan& p) {
  return groups_of(d.in_channels) * p.images * p.pad_group();
}
int64_t forward_elems(const Conv2dDims& d) {
  const Plan p = plan_of(d);
  return pad_elems(d, p) + kPoints * skewed(d.in_channels * p.tiles()) +
         kPoints * skewed(p.out_block * d.in_channels) +
         kPoints * skewed(p.out_block * p.tiles()) +
         p.images * groups_of(p.out_block) * p.out_group();
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

// The 1-D transforms, each applied along both axes of a tile.
// B^T (6 x 6) of a window row d0..d5.
template <typename T>
[[gnu::always_inline]] inline void bt6(const T (&d)[6], T (&r)[6]) {
  r[0] = T(4) * d[0] - T(5) * d[2] + d[4];
  r[1] = d[3] + d[4] - T(4) * (d[1] + d[2]);
  r[2] = T(4) * (d[1] - d[2]) + d[4] - d[3];
  r[3] = T(2) * (d[3] - d[1]) + d[4] - d[2];
  r[4] = T(2) * (d[1] - d[3]) + d[4] - d[2];
  r[5] = T(4) * d[1] - T(5) * d[3] + d[5];
}
// G (6 x 3) of a kernel row g0..g2.
template <typename T>
[[gnu::always_inline]] inline void g63(T g0, T g1, T g2, T (&r)[6]) {
  const T even = g0 + g2;
  r[0] = g0 * T(0.25);
  r[1] = -(even + g1) / T(6);
  r[2] = (g1 - even) / T(6);
  r[3] = g0 / T(24) + g1 / T(12) + g2 / T(6);
  r[4] = g0 / T(24) - g1 / T(12) + g2 / T(6);
  r[5] = g2;
}
// A^T (4 x 6) of a point row m0..m5.
template <typename T>
[[gnu::always_inline]] inline void at46(const T (&m)[6], T (&r)[4]) {
  const T s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  r[0] = m[0] + s12 + s34;
  r[1] = d12 + T(2) * d34;
  r[2] = s12 + T(4) * s34;
  r[3] = d12 + T(8) * d34 + m[5];
}
// A (6 x 4) of a gradient row g0..g3.
template <typename T>
[[gnu::always_inline]] inline void a64(const T (&g)[4], T (&r)[6]) {
  const T s02 = g[0] + g[2], s13 = g[1] + g[3];
  const T q02 = g[0] + T(4) * g[2], q13 = T(2) * g[1] + T(8) * g[3];
  r[0] = g[0];
  r[1] = s02 + s13;
  r[2] = s02 - s13;
  r[3] = q02 + q13;
  r[4] = q02 - q13;
  r[5] = g[3];
}
// G^T (3 x 6) of a point row m0..m5.
template <typename T>
[[gnu::always_inline]] inline void gt36(const T (&m)[6], T (&r)[3]) {
  const T s12 = m[1] + m[2], s34 = m[3] + m[4];
  r[0] = m[0] * T(0.25) - s12 / T(6) + s34 / T(24);
  r[1] = (m[2] - m[1]) / T(6) + (m[3] - m[4]) / T(12);
  r[2] = (s34 - s12) / T(6) + m[5];
}

// Channels [c0, c0 + n) of one image -> the block's padded group pad
// [4 rows + 2, 4 tiles_w + 2, kLanes]: padded row r, column q hold input
// row 4 first_row - padding + r, column q - padding; outside the input,
// zeros. Lanes n.. stay unset (never read).
template <typename T>
[[gnu::always_inline]] inline void pad_group(const T* x, T* pad, int64_t n, const Conv2dDims& d,
                                             const Plan& p, const TileBlock& blk) {
  const int64_t W = d.width, plane = d.height * W, cols = p.pad_cols();
  const int64_t left = d.padding * kLanes, right = (cols - d.padding - W) * kLanes;
  for (int64_t r = 0; r < 4 * blk.rows + 2; ++r) {
    const int64_t ih = 4 * blk.first_row - d.padding + r;
    T* row = pad + r * cols * kLanes;
    if (ih < 0 || ih >= d.height) {  // a padding row
      std::fill(row, row + cols * kLanes, T(0));
      continue;
    }
    // only the padding columns are zeroed: the input columns are all written
    std::fill(row, row + left, T(0));
    std::fill(row + left + W * kLanes, row + left + W * kLanes + right, T(0));
    interleave_lanes(x + ih * W, plane, n, W, row + left);
  }
}

// V = B^T d B of the block's tiles of one padded group, d the 6 x 6 window
// at padded rows 4a.., columns 4t..; point (k, j) of lane l goes to
// v[(6k + j) ps + tile cin + l] (v: at the group's first channel).
template <typename T, bool kFull>
[[gnu::always_inline]] inline void group_tiles(const T* pad, T* v, int64_t ps, int64_t cin,
                                               int64_t n, int64_t first_tile, const Plan& p,
                                               const TileBlock& blk) {
  const int64_t cols = p.pad_cols(), lanes = kFull ? kLanes : n;
  for (int64_t a = 0; a < blk.rows; ++a)
    for (int64_t t = 0; t < p.tiles_w; ++t) {
      const T* win = pad + (4 * a * cols + 4 * t) * kLanes;
      T* out = v + (first_tile + a * p.tiles_w + t) * cin;
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) {
        T c[6][6];  // B^T applied along each window row
#pragma GCC unroll 6
        for (int k = 0; k < 6; ++k) {
          const T* r = win + k * cols * kLanes + l;
          const T dk[6] = {r[0], r[kLanes], r[2 * kLanes], r[3 * kLanes], r[4 * kLanes],
                           r[5 * kLanes]};
          bt6(dk, c[k]);
        }
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j) {
          const T col[6] = {c[0][j], c[1][j], c[2][j], c[3][j], c[4][j], c[5][j]};
          T o[6];
          bt6(col, o);
#pragma GCC unroll 6
          for (int k = 0; k < 6; ++k) out[(6 * k + j) * ps + l] = o[k];
        }
      }
    }
}

template <typename T>
[[gnu::always_inline]] inline void input_group(const T* x, T* pad, T* v, int64_t ps,
                                               int64_t cin, int64_t n, int64_t first_tile,
                                               const Conv2dDims& d, const Plan& p,
                                               const TileBlock& blk) {
  pad_group(x, pad, n, d, p, blk);
  if (n == kLanes)
    group_tiles<T, true>(pad, v, ps, cin, n, first_tile, p, blk);
  else
    group_tiles<T, false>(pad, v, ps, cin, n, first_tile, p, blk);
}

// The transforms are the only non-BLAS work: their f32 loops are also built
// for AVX2 and AVX-512 (vec_math.h).
SDP_MULTIVERSION void input_group_f32(const float* x, float* pad, float* v, int64_t ps,
                                      int64_t cin, int64_t n, int64_t first_tile,
                                      const Conv2dDims& d, const Plan& p, const TileBlock& blk) {
  input_group(x, pad, v, ps, cin, n, first_tile, d, p, blk);
}

// x's planes of the block -> V [36, tiles, Cin]: threads split (image,
// channel group) pairs, disjoint parts of V.
template <typename T>
void transform_inputs(const T* x, T* pad, T* v, const Conv2dDims& d, const Plan& p,
                      const TileBlock& blk) {
  const int64_t cin = d.in_channels, nt = blk.images * blk.rows * p.tiles_w;
  const int64_t plane = d.height * d.width, ps = skewed(cin * nt), groups = groups_of(cin);
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * kLanes, n = std::min(kLanes, cin - c0);
      const T* in = x + ((blk.image + i) * cin + c0) * plane;
      T* padded = pad + (i * groups + g) * p.pad_group();
      const int64_t first_tile = i * blk.rows * p.tiles_w;
      if constexpr (std::is_same_v<T, float>)
        input_group_f32(in, padded, v + c0, ps, cin, n, first_tile, d, p, blk);
      else
        input_group(in, padded, v + c0, ps, cin, n, first_tile, d, p, blk);
    }
}

// u[point][l] (points ps apart) = G g G^T of kernels g[.][l], l < n.
template <typename T>
[[gnu::always_inline]] inline void weight_lanes(const T (&g)[9][kLanes], int64_t n, T* u,
                                                int64_t ps) {
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    T r[3][6];  // G g, stored by kernel column
    for (int kw = 0; kw < 3; ++kw) g63(g[kw][l], g[3 + kw][l], g[6 + kw][l], r[kw]);
    for (int k = 0; k < 6; ++k) {  // (G g) G^T
      T out[6];
      g63(r[0][k], r[1][k], r[2][k], out);
      for (int j = 0; j < 6; ++j) u[(6 * k + j) * ps + l] = out[j];
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

// The block's tiles of one image, output channels [o0, o0 + n) (m: at
// point 0, the image's first tile, channel o0; points ps apart, tiles nb)
// -> og [4 rows, 4 tiles_w, kLanes], tile by tile y = A^T m A.
template <typename T, bool kFull>
[[gnu::always_inline]] inline void output_tiles(const T* m, int64_t ps, int64_t nb, int64_t n,
                                                T* og, const Plan& p, const TileBlock& blk) {
  const int64_t cols = 4 * p.tiles_w, lanes = kFull ? kLanes : n;
  for (int64_t a = 0; a < blk.rows; ++a)
    for (int64_t t = 0; t < p.tiles_w; ++t) {
      const T* mt = m + (a * p.tiles_w + t) * nb;
      T* out = og + (4 * a * cols + 4 * t) * kLanes;
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) {
        T s[4][6];  // A^T m
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j) {
          const T col[6] = {mt[j * ps + l],        mt[(6 + j) * ps + l],
                            mt[(12 + j) * ps + l], mt[(18 + j) * ps + l],
                            mt[(24 + j) * ps + l], mt[(30 + j) * ps + l]};
          T r[4];
          at46(col, r);
          for (int k = 0; k < 4; ++k) s[k][j] = r[k];
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {  // (A^T m) A
          T r[4];
          at46(s[k], r);
          for (int j = 0; j < 4; ++j) out[(k * cols + j) * kLanes + l] = r[j];
        }
      }
    }
}

// og -> the block's rows of n output planes (y: the first plane), the
// rows and columns past Ho, Wo dropped.
template <typename T>
[[gnu::always_inline]] inline void scatter_outputs(const T* og, T* y, int64_t n,
                                                   const Conv2dDims& d, const Plan& p,
                                                   const TileBlock& blk, bool accumulate) {
  const int64_t Wo = d.out_width, plane = d.out_height * Wo, cols = 4 * p.tiles_w;
  const int64_t oh0 = 4 * blk.first_row, rows = std::min(4 * blk.rows, d.out_height - oh0);
  for (int64_t r = 0; r < rows; ++r)
    deinterleave_lanes(og + r * cols * kLanes, n, Wo, y + (oh0 + r) * Wo, plane, accumulate);
}

template <typename T>
[[gnu::always_inline]] inline void output_group(const T* m, int64_t ps, int64_t nb, int64_t n,
                                                T* og, T* y, const Conv2dDims& d, const Plan& p,
                                                const TileBlock& blk, bool accumulate) {
  if (n == kLanes)
    output_tiles<T, true>(m, ps, nb, n, og, p, blk);
  else
    output_tiles<T, false>(m, ps, nb, n, og, p, blk);
  scatter_outputs(og, y, n, d, p, blk, accumulate);
}

SDP_MULTIVERSION void output_group_f32(const float* m, int64_t ps, int64_t nb, int64_t n,
                                       float* og, float* y, const Conv2dDims& d, const Plan& p,
                                       const TileBlock& blk, bool accumulate) {
  output_group(m, ps, nb, n, og, y, d, p, blk, accumulate);
}

// M [36, tiles, nb] -> y's planes of output channels [o0, o0 + nb): threads
// split (image, channel group) pairs, disjoint planes.
template <typename T>
void transform_outputs(const T* m, T* og, T* y, const Conv2dDims& d, const Plan& p,
                       const TileBlock& blk, int64_t o0, int64_t nb, bool accumulate) {
  const int64_t nt = blk.images * blk.rows * p.tiles_w, ps = skewed(nb * nt);
  const int64_t plane = d.out_height * d.out_width, groups = groups_of(nb);
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * kLanes, n = std::min(kLanes, nb - c0);
      const T* mt = m + i * blk.rows * p.tiles_w * nb + c0;
      T* group = og + (i * groups + g) * p.out_group();
      T* out = y + ((blk.image + i) * d.out_channels + o0 + c0) * plane;
      if constexpr (std::is_same_v<T, float>)
        output_group_f32(mt, ps, nb, n, group, out, d, p, blk, accumulate);
      else
        output_group(mt, ps, nb, n, group, out, d, p, blk, accumulate);
    }
}

// n dy planes (dy: the first) -> gg [4 rows, 4 tiles_w, kLanes], the
// block's rows, zeros past Ho and Wo.
template <typename T>
[[gnu::always_inline]] inline void gather_gradients(const T* dy, T* gg, int64_t n,
                                                    const Conv2dDims& d, const Plan& p,
                                                    const TileBlock& blk) {
  const int64_t Wo = d.out_width, plane = d.out_height * Wo, cols = 4 * p.tiles_w;
  const int64_t oh0 = 4 * blk.first_row, rows = std::min(4 * blk.rows, d.out_height - oh0);
  // Only the partial tiles' rows and columns past Ho and Wo need zeros (lanes
  // n.. are never read).
  for (int64_t r = 0; r < rows; ++r) {
    T* row = gg + r * cols * kLanes;
    interleave_lanes(dy + (oh0 + r) * Wo, plane, n, Wo, row);
    std::fill(row + Wo * kLanes, row + cols * kLanes, T(0));
  }
  std::fill(gg + rows * cols * kLanes, gg + p.out_group(), T(0));
}

// E = A g A^T of the block's tiles of one image, g the 4 x 4 dy tiles of
// gg; point (k, j) of lane l goes to e[(6k + j) ps + tile nb + l] (e: at
// the image's first tile, the group's first channel).
template <typename T, bool kFull>
[[gnu::always_inline]] inline void gradient_tiles(const T* gg, T* e, int64_t ps, int64_t nb,
                                                  int64_t n, const Plan& p,
                                                  const TileBlock& blk) {
  const int64_t cols = 4 * p.tiles_w, lanes = kFull ? kLanes : n;
  for (int64_t a = 0; a < blk.rows; ++a)
    for (int64_t t = 0; t < p.tiles_w; ++t) {
      const T* g = gg + (4 * a * cols + 4 * t) * kLanes;
      T* et = e + (a * p.tiles_w + t) * nb;
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) {
        T r[4][6];  // A applied along each row of the tile
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const T* row = g + k * cols * kLanes + l;
          const T gk[4] = {row[0], row[kLanes], row[2 * kLanes], row[3 * kLanes]};
          a64(gk, r[k]);
        }
#pragma GCC unroll 6
        for (int j = 0; j < 6; ++j) {
          const T col[4] = {r[0][j], r[1][j], r[2][j], r[3][j]};
          T o[6];
          a64(col, o);
          for (int k = 0; k < 6; ++k) et[(6 * k + j) * ps + l] = o[k];
        }
      }
    }
}

template <typename T>
[[gnu::always_inline]] inline void gradient_group(const T* dy, T* gg, T* e, int64_t ps,
                                                  int64_t nb, int64_t n, const Conv2dDims& d,
                                                  const Plan& p, const TileBlock& blk) {
  gather_gradients(dy, gg, n, d, p, blk);
  if (n == kLanes)
    gradient_tiles<T, true>(gg, e, ps, nb, n, p, blk);
  else
    gradient_tiles<T, false>(gg, e, ps, nb, n, p, blk);
}

SDP_MULTIVERSION void gradient_group_f32(const float* dy, float* gg, float* e, int64_t ps,
                                         int64_t nb, int64_t n, const Conv2dDims& d,
                                         const Plan& p, const TileBlock& blk) {
  gradient_group(dy, gg, e, ps, nb, n, d, p, blk);
}

// dy's planes of the block, output channels [o0, o0 + nb) -> E [36, tiles, nb].
template <typename T>
void transform_gradients(const T* dy, T* gg, T* e, const Conv2dDims& d, const Plan& p,
                         const TileBlock& blk, int64_t o0, int64_t nb) {
  const int64_t nt = blk.images * blk.rows * p.tiles_w, ps = skewed(nb * nt);
  const int64_t plane = d.out_height * d.out_width, groups = groups_of(nb);
#pragma omp parallel for collapse(2) schedule(static) if (kPoints * ps >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * kLanes, n = std::min(kLanes, nb - c0);
      const T* in = dy + ((blk.image + i) * d.out_channels + o0 + c0) * plane;
      T* group = gg + (i * groups + g) * p.out_group();
      T* et = e + i * blk.rows * p.tiles_w * nb + c0;
      if constexpr (std::is_same_v<T, float>)
        gradient_group_f32(in, group, et, ps, nb, n, d, p, blk);
      else
        gradient_group(in, group, et, ps, nb, n, d, p, blk);
    }
}

// dw[oc][i0 .. i0 + n) += G^T dU G, n <= kLanes (du: dU's row at column
// i0, point 0; points ps apart), computed across lanes into r[tap][lane]
// and then added kernel by kernel.
template <typename T>
[[gnu::always_inline]] inline void weight_gradient_lanes(const T* du, int64_t ps, int64_t n,
                                                         T* dw) {
  T r[9][kLanes];
#pragma omp simd
  for (int64_t l = 0; l < n; ++l) {
    T q[3][6];  // G^T dU
    for (int j = 0; j < 6; ++j) {
      const T col[6] = {du[j * ps + l],        du[(6 + j) * ps + l],  du[(12 + j) * ps + l],
                        du[(18 + j) * ps + l], du[(24 + j) * ps + l], du[(30 + j) * ps + l]};
      T out[3];
      gt36(col, out);
      for (int kh = 0; kh < 3; ++kh) q[kh][j] = out[kh];
    }
    for (int kh = 0; kh < 3; ++kh) {  // (G^T dU) G
      T out[3];
      gt36(q[kh], out);
      for (int kw = 0; kw < 3; ++kw) r[kh * 3 + kw][l] = out[kw];
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
  T* og = m + kPoints * skewed(p.out_block * p.tiles());
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
        gemm(CblasNoTrans, CblasTrans, nt, nb, cin, T(1), v + xi * v_ps, cin, u + xi * u_ps,
             cin, T(0), m + xi * m_ps, nb);
      transform_outputs(m, og, y, d, p, blk, o0, nb, accumulate);
    }
  });
}

}  // namespace

bool winograd4_applies(const Conv2dDims& d) {
  return d.kernel == 3 && d.stride == 1 && d.padding <= 2 && d.out_height >= 8 &&
         d.out_width >= 8;
}

int64_t winograd4_workspace_elems(const Conv2dDims& d) {
  return std::max(forward_elems(d), forward_elems(transposed(d)));
}

template <typename T>
void winograd4_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                       bool accumulate) {
  forward(x, w, false, y, workspace, d, accumulate);
}

template <typename T>
void winograd4_backward_input(const T* dy, const T* w, T* dx, T* workspace,
                              const Conv2dDims& d, bool accumulate) {
  forward(dy, w, true, dx, workspace, transposed(d), accumulate);
}

template <typename T>
void winograd4_backward_weight(const T* dy, const T* x, T* dw, T* workspace,
                               const Conv2dDims& d) {
  const Plan p = plan_of(d);
  const int64_t cin = d.in_channels, cout = d.out_channels;
  T* pad = workspace;
  T* v = pad + pad_elems(d, p);
  T* du = v + kPoints * skewed(cin * p.tiles());
  T* e = du + kPoints * skewed(p.out_block * cin);
  T* gg = e + kPoints * skewed(p.out_block * p.tiles());
  for_tile_blocks(d, p, [&](const TileBlock& blk) {
    const int64_t nt = blk.images * blk.rows * p.tiles_w;
    transform_inputs(x, pad, v, d, p, blk);
    for (int64_t o0 = 0; o0 < cout; o0 += p.out_block) {
      const int64_t nb = std::min(p.out_block, cout - o0);
      transform_gradients(dy, gg, e, d, p, blk, o0, nb);
      const int64_t e_ps = skewed(nb * nt), v_ps = skewed(cin * nt), du_ps = skewed(nb * cin);
      for (int64_t xi = 0; xi < kPoints; ++xi)
        gemm(CblasTrans, CblasNoTrans, nb, cin, nt, T(1), e + xi * e_ps, nb, v + xi * v_ps,
             cin, T(0), du + xi * du_ps, cin);
      add_weight_gradients<kPoints, GradientLanes>(du, dw, d, o0, nb);
    }
  });
}

template void winograd4_forward<float>(const float*, const float*, float*, float*,
                                       const Conv2dDims&, bool);
template void winograd4_forward<double>(const double*, const double*, double*, double*,
                                        const Conv2dDims&, bool);
template void winograd4_backward_input<float>(const float*, const float*, float*, float*,
                                              const Conv2dDims&, bool);
template void winograd4_backward_input<double>(const double*, const double*, double*, double*,
                                               const Conv2dDims&, bool);
template void winograd4_backward_weight<float>(const float*, const float*, float*, float*,
                                               const Conv2dDims&);
template void winograd4_backward_weight<double>(const double*, const double*, double*, double*,
                                                const Conv2dDims&);

}  // namespace sdp::cpu
