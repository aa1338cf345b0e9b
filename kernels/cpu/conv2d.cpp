#include "kernels/cpu/conv2d.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/cpu/conv2d_winograd4.h"

namespace sdp::cpu {

namespace {

// GEMM columns a block aims at. OpenBLAS's sgemm runs at its peak from a few
// hundred columns on; more only makes col spill out of L2 (576 x 512 f32 =
// 1.2 MiB for the 64-channel layers).
constexpr int64_t kTargetColumns = 512;
// col never holds more than this many elements (8 MiB of f32) unless one
// output row needs more; the deepest strided conv of a CIFAR ResNet-18
// (Cin k k = 2304) still gets its 512 columns.
constexpr int64_t kColBudget = int64_t{1} << 21;
// Below this many elements in a loop one thread does it all: waking a team
// costs more than the copy.
constexpr int64_t kParallelMin = int64_t{1} << 15;

using Span = Conv2dSpan;

// One tap (kh, kw) of the kernel: where it reads, computed once per call
// rather than per plane (the deep layers have 4 x 4 planes).
struct Tap {
  int64_t row_shift, col_shift;  // kh - padding, kw - padding
  Span rows, cols;               // output rows / columns that read inside the input
};

std::vector<Tap> taps_of(const Conv2dDims& d) {
  std::vector<Tap> taps;
  for (int64_t kh = 0; kh < d.kernel; ++kh)
    for (int64_t kw = 0; kw < d.kernel; ++kw) {
      const int64_t rs = kh - d.padding, cs = kw - d.padding;
      taps.push_back({rs, cs, conv2d_inside(rs, d.height, d.stride, d.out_height),
                      conv2d_inside(cs, d.width, d.stride, d.out_width)});
    }
  return taps;
}

// Output rows [first, first + count) of one block, the part of a tap's rows
// inside them.
Span clip(Span s, int64_t first, int64_t count) {
  const int64_t lo = std::clamp(s.lo, first, first + count);
  return {lo, std::clamp(s.hi, lo, first + count)};
}

// Unfolds one tap of one input plane [H, W] over output rows
// [first, first + count) into dst [count, Wo]. A tap that reads padding
// zeroes its whole block first: one memset per tap, where per-row edge loops
// would each become a (far slower) memset call of one or two elements.
template <typename T>
void unfold_tap(const T* plane, T* dst, const Conv2dDims& d, const Tap& tap, int64_t first,
                int64_t count) {
  const int64_t s = d.stride, W = d.width, Wo = d.out_width;
  const Span rows = clip(tap.rows, first, count);
  const int64_t lo = tap.cols.lo, hi = tap.cols.hi;
  if (rows.lo > first || rows.hi < first + count || lo > 0 || hi < Wo)
    std::fill(dst, dst + count * Wo, T(0));
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    T* out = dst + (oh - first) * Wo;
    const T* in = plane + (oh * s + tap.row_shift) * W + tap.col_shift;
    if (s == 1) {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * s];
    }
  }
}

// Adds src [count, Wo] (one tap over output rows [first, first + count)) back
// into the input plane [H, W]: the transpose of unfold_tap, padding dropped.
template <typename T>
void fold_tap(const T* src, T* plane, const Conv2dDims& d, const Tap& tap, int64_t first,
              int64_t count) {
  const int64_t s = d.stride, W = d.width, Wo = d.out_width;
  const Span rows = clip(tap.rows, first, count);
  const int64_t lo = tap.cols.lo, hi = tap.cols.hi;
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    const T* in = src + (oh - first) * Wo;
    T* out = plane + (oh * s + tap.row_shift) * W + tap.col_shift;
    if (s == 1) {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] += in[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow * s] += in[ow];
    }
  }
}

// A block: images [image, image + images), output rows [first, first + rows)
// of each (all of them when images > 1).
struct Block {
  int64_t image, images, first, rows;
};

// Calls f(block) over the batch in order.
template <typename F>
void for_blocks(const Conv2dDims& d, const Conv2dBlocking& blocking, F&& f) {
  for (int64_t b = 0; b < d.batch; b += blocking.images)
    for (int64_t first = 0; first < d.out_height; first += blocking.rows)
      f(Block{b, std::min(blocking.images, d.batch - b), first,
              std::min(blocking.rows, d.out_height - first)});
}

// x's images of the block -> col [Cin k k, images rows Wo]: row (c, kh, kw),
// column (image, output row, output column). Threads split (channel, image)
// pairs: disjoint rows of col.
template <typename T>
void im2col(const T* x, T* col, const Conv2dDims& d, const std::vector<Tap>& taps,
            const Block& blk) {
  const int64_t block_pixels = blk.rows * d.out_width, cols = blk.images * block_pixels;
  const int64_t plane = d.height * d.width, channels = d.in_channels;
  const int64_t ntaps = static_cast<int64_t>(taps.size());
#pragma omp parallel for collapse(2) schedule(static) if (d.patch() * cols >= kParallelMin)
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < blk.images; ++i) {
      const T* in = x + ((blk.image + i) * channels + c) * plane;
      for (int64_t t = 0; t < ntaps; ++t)
        unfold_tap(in, col + (c * ntaps + t) * cols + i * block_pixels, d,
                   taps[static_cast<size_t>(t)], blk.first, blk.rows);
    }
}

// col of the block -> dx, adding the taps that meet on one input pixel; each
// plane is zeroed first when `zero_first`. Threads split (image, channel)
// planes, so no two write one pixel.
template <typename T>
void col2im(const T* col, T* dx, const Conv2dDims& d, const std::vector<Tap>& taps,
            const Block& blk, bool zero_first) {
  const int64_t block_pixels = blk.rows * d.out_width, cols = blk.images * block_pixels;
  const int64_t plane = d.height * d.width, channels = d.in_channels;
  const int64_t ntaps = static_cast<int64_t>(taps.size());
#pragma omp parallel for collapse(2) schedule(static) if (d.patch() * cols >= kParallelMin)
  for (int64_t i = 0; i < blk.images; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      T* out = dx + ((blk.image + i) * channels + c) * plane;
      if (zero_first) std::fill(out, out + plane, T(0));
      for (int64_t t = 0; t < ntaps; ++t)
        fold_tap(col + (c * ntaps + t) * cols + i * block_pixels, out, d,
                 taps[static_cast<size_t>(t)], blk.first, blk.rows);
    }
}

// staging [C, n P] <-> t [n, C, P]: the GEMM's layout against the tensor's.
template <typename T>
void unstage(const T* staging, T* t, int64_t channels, int64_t P, int64_t n, bool accumulate) {
  const int64_t cols = n * P;
#pragma omp parallel for collapse(2) schedule(static) if (channels * cols >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      const T* src = staging + c * cols + i * P;
      T* dst = t + (i * channels + c) * P;
      if (accumulate) {
        for (int64_t j = 0; j < P; ++j) dst[j] += src[j];
      } else {
        std::copy(src, src + P, dst);
      }
    }
}

template <typename T>
void stage(const T* t, T* staging, int64_t channels, int64_t P, int64_t n) {
  const int64_t cols = n * P;
#pragma omp parallel for collapse(2) schedule(static) if (channels * cols >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      const T* src = t + (i * channels + c) * P;
      std::copy(src, src + P, staging + c * cols + i * P);
    }
}

// The output side (y or dy, U = T or const T) of a block as a GEMM operand
// [Cout, columns]: the staging area when blocks hold several images, else in
// place (output rows of one image's [Cout, Ho Wo], leading dimension Ho Wo).
template <typename U>
struct OutputView {
  U* data;
  int64_t ld;
  bool staged;
};

template <typename U, typename T>
OutputView<U> output_view(U* out, T* staging, const Conv2dDims& d, const Block& blk) {
  if (staging != nullptr) return {staging, blk.images * blk.rows * d.out_width, true};
  const int64_t P = d.out_pixels();
  return {out + blk.image * d.out_channels * P + blk.first * d.out_width, P, false};
}

// Where col and the staging area sit in the workspace (staging: null when
// blocks hold one image).
template <typename T>
struct Buffers {
  T* col;
  T* staging;
  Buffers(T* workspace, const Conv2dDims& d, const Conv2dBlocking& blocking)
      : col(workspace),
        staging(blocking.images > 1
                    ? workspace + (d.pointwise() ? 0 : d.patch() * blocking.columns(d))
                    : nullptr) {}
};

}  // namespace

Conv2dSpan conv2d_inside(int64_t shift, int64_t in, int64_t stride, int64_t out) {
  int64_t lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  int64_t hi = in - 1 - shift < 0 ? 0 : (in - 1 - shift) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

Conv2dBlocking conv2d_blocking(const Conv2dDims& d) {
  const int64_t Ho = std::max<int64_t>(d.out_height, 1), Wo = std::max<int64_t>(d.out_width, 1);
  const int64_t P = Ho * Wo;
  // Pointwise convs need no col, so nothing bounds a block: whole images.
  if (d.pointwise() || d.batch <= 0) return {1, Ho};
  const int64_t budget_cols = std::max<int64_t>(kColBudget / std::max<int64_t>(d.patch(), 1), 1);
  const int64_t cols = std::min(kTargetColumns, budget_cols);
  if (P >= cols) return {1, std::clamp(cols / Wo, int64_t{1}, Ho)};
  return {std::clamp(cols / P, int64_t{1}, d.batch), Ho};
}

int64_t conv2d_workspace_elems(const Conv2dDims& d) {
  if (winograd4_applies(d)) return winograd4_workspace_elems(d);
  if (winograd_applies(d)) return winograd_workspace_elems(d);
  const Conv2dBlocking blocking = conv2d_blocking(d);
  const int64_t cols = blocking.columns(d);
  const int64_t col = d.pointwise() ? 0 : d.patch() * cols;
  const int64_t staging = blocking.images > 1 ? d.out_channels * cols : 0;
  return col + staging;
}

template <typename T>
void conv2d_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                    bool accumulate) {
  const int64_t Cout = d.out_channels, K = d.patch(), P = d.out_pixels();
  const int64_t x_image = d.in_channels * d.height * d.width;
  if (d.batch == 0 || Cout * P == 0) return;
  if (K == 0) {  // an empty sum; BLAS may skip the beta = 0 store when k = 0
    if (!accumulate) std::fill(y, y + d.batch * Cout * P, T(0));
    return;
  }
  if (winograd4_applies(d)) return winograd4_forward(x, w, y, workspace, d, accumulate);
  if (winograd_applies(d)) return winograd_forward(x, w, y, workspace, d, accumulate);
  const Conv2dBlocking blocking = conv2d_blocking(d);
  const Buffers<T> buf(workspace, d, blocking);
  const std::vector<Tap> taps = taps_of(d);
  for_blocks(d, blocking, [&](const Block& blk) {
    const int64_t cols = blk.images * blk.rows * d.out_width;
    const T* col = x + blk.image * x_image;  // pointwise: x's image is its own col
    int64_t ld_col = P;
    if (!d.pointwise()) {
      im2col(x, buf.col, d, taps, blk);
      col = buf.col;
      ld_col = cols;
    }
    const OutputView<T> out = output_view(y, buf.staging, d, blk);
    gemm(CblasNoTrans, CblasNoTrans, Cout, cols, K, T(1), w, K, col, ld_col,
         T(accumulate && !out.staged ? 1 : 0), out.data, out.ld);
    if (out.staged) unstage(buf.staging, y + blk.image * Cout * P, Cout, P, blk.images, accumulate);
  });
}

template <typename T>
void conv2d_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                           bool accumulate) {
  const int64_t Cin = d.in_channels, Cout = d.out_channels, K = d.patch(), P = d.out_pixels();
  const int64_t x_image = Cin * d.height * d.width;
  if (d.batch == 0 || x_image == 0) return;
  if (Cout == 0 || P == 0) {  // no output reads the input: its gradient is 0
    if (!accumulate) std::fill(dx, dx + d.batch * x_image, T(0));
    return;
  }
  if (winograd4_applies(d))
    return winograd4_backward_input(dy, w, dx, workspace, d, accumulate);
  if (winograd_applies(d)) return winograd_backward_input(dy, w, dx, workspace, d, accumulate);
  const Conv2dBlocking blocking = conv2d_blocking(d);
  const Buffers<T> buf(workspace, d, blocking);
  const std::vector<Tap> taps = taps_of(d);
  for_blocks(d, blocking, [&](const Block& blk) {
    const int64_t cols = blk.images * blk.rows * d.out_width;
    const OutputView<const T> g = output_view(dy, buf.staging, d, blk);
    if (g.staged) stage(dy + blk.image * Cout * P, buf.staging, Cout, P, blk.images);
    if (d.pointwise()) {  // whole images (rows = Ho): dx's image is the GEMM's output
      gemm(CblasTrans, CblasNoTrans, Cin, cols, Cout, T(1), w, Cin, g.data, g.ld,
           T(accumulate ? 1 : 0), dx + blk.image * x_image, P);
      return;
    }
    gemm(CblasTrans, CblasNoTrans, K, cols, Cout, T(1), w, K, g.data, g.ld, T(0), buf.col, cols);
    col2im(buf.col, dx, d, taps, blk, !accumulate && blk.first == 0);
  });
}

template <typename T>
void conv2d_backward_weight(const T* dy, const T* x, T* dw, T* workspace, const Conv2dDims& d) {
  const int64_t Cout = d.out_channels, K = d.patch(), P = d.out_pixels();
  const int64_t x_image = d.in_channels * d.height * d.width;
  if (d.batch == 0 || Cout == 0 || K == 0 || P == 0) return;  // nothing to add
  if (winograd4_applies(d)) return winograd4_backward_weight(dy, x, dw, workspace, d);
  if (winograd_applies(d)) return winograd_backward_weight(dy, x, dw, workspace, d);
  const Conv2dBlocking blocking = conv2d_blocking(d);
  const Buffers<T> buf(workspace, d, blocking);
  const std::vector<Tap> taps = taps_of(d);
  for_blocks(d, blocking, [&](const Block& blk) {
    const int64_t cols = blk.images * blk.rows * d.out_width;
    const OutputView<const T> g = output_view(dy, buf.staging, d, blk);
    if (g.staged) stage(dy + blk.image * Cout * P, buf.staging, Cout, P, blk.images);
    const T* col = x + blk.image * x_image;
    int64_t ld_col = P;
    if (!d.pointwise()) {
      im2col(x, buf.col, d, taps, blk);
      col = buf.col;
      ld_col = cols;
    }
    gemm(CblasNoTrans, CblasTrans, Cout, K, cols, T(1), g.data, g.ld, col, ld_col, T(1), dw, K);
  });
}

template void conv2d_forward<float>(const float*, const float*, float*, float*,
                                    const Conv2dDims&, bool);
template void conv2d_forward<double>(const double*, const double*, double*, double*,
                                     const Conv2dDims&, bool);
template void conv2d_backward_input<float>(const float*, const float*, float*, float*,
                                           const Conv2dDims&, bool);
template void conv2d_backward_input<double>(const double*, const double*, double*, double*,
                                            const Conv2dDims&, bool);
template void conv2d_backward_weight<float>(const float*, const float*, float*, float*,
                                            const Conv2dDims&);
template void conv2d_backward_weight<double>(const double*, const double*, double*, double*,
                                             const Conv2dDims&);

}  // namespace sdp::cpu
