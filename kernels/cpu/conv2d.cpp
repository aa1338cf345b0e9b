#include "kernels/cpu/conv2d.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/blas.h"

namespace sdp::cpu {

namespace {

// A chunk aims at this many GEMM columns (output pixels): enough for BLAS to
// run near its peak on the small channel counts of the CIFAR ResNets (64 x
// 576 weights against 1024 columns), few enough to stay in cache-sized panels.
constexpr int64_t kTargetColumns = 1024;
// col never holds more than this many elements (4 MiB of f32) unless one
// image alone needs more: deep layers (Cin k k = 4608) get fewer columns.
constexpr int64_t kColBudget = int64_t{1} << 20;
// Below this many elements in a loop one thread does it all: waking a team
// costs more than the copy.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// Output positions [lo, hi) along one axis whose tap at `offset` (kernel
// index minus padding) lands inside the input [0, in): o stride + offset in
// [0, in). The others read the zero padding.
struct Span {
  int64_t lo = 0, hi = 0;
};
Span inside(int64_t offset, int64_t in, int64_t stride, int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Unfolds tap (kh, kw) of one input plane [H, W] into dst [Ho, Wo].
template <typename T>
void unfold_tap(const T* plane, T* dst, const Conv2dDims& d, int64_t kh, int64_t kw) {
  const int64_t s = d.stride, W = d.width, Wo = d.out_width;
  const Span rows = inside(kh - d.padding, d.height, s, d.out_height);
  const Span cols = inside(kw - d.padding, W, s, Wo);
  std::fill(dst, dst + rows.lo * Wo, T(0));
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    T* out = dst + oh * Wo;
    const T* in = plane + (oh * s + kh - d.padding) * W;  // input row of this output row
    const int64_t shift = kw - d.padding;
    std::fill(out, out + cols.lo, T(0));
    if (s == 1) {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) out[ow] = in[ow + shift];
    } else {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) out[ow] = in[ow * s + shift];
    }
    std::fill(out + cols.hi, out + Wo, T(0));
  }
  std::fill(dst + rows.hi * Wo, dst + d.out_pixels(), T(0));
}

// Adds dst [Ho, Wo] of tap (kh, kw) back into the input plane [H, W] (the
// transpose of unfold_tap; padding taps are dropped).
template <typename T>
void fold_tap(const T* src, T* plane, const Conv2dDims& d, int64_t kh, int64_t kw) {
  const int64_t s = d.stride, W = d.width, Wo = d.out_width;
  const Span rows = inside(kh - d.padding, d.height, s, d.out_height);
  const Span cols = inside(kw - d.padding, W, s, Wo);
  const int64_t shift = kw - d.padding;
  for (int64_t oh = rows.lo; oh < rows.hi; ++oh) {
    const T* in = src + oh * Wo;
    T* out = plane + (oh * s + kh - d.padding) * W;
    if (s == 1) {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) out[ow + shift] += in[ow];
    } else {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) out[ow * s + shift] += in[ow];
    }
  }
}

// x [n, Cin, H, W] -> col [Cin k k, n Ho Wo]; row (c, kh, kw), column (image,
// oh, ow). Threads split (channel, image) pairs: disjoint rows of col.
template <typename T>
void im2col(const T* x, T* col, const Conv2dDims& d, int64_t n) {
  const int64_t k = d.kernel, P = d.out_pixels(), cols = n * P;
  const int64_t plane = d.height * d.width;
  const int64_t channels = d.in_channels;
#pragma omp parallel for collapse(2) schedule(static) if (d.patch() * cols >= kParallelMin)
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < n; ++i) {
      const T* in = x + (i * channels + c) * plane;
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw)
          unfold_tap(in, col + ((c * k + kh) * k + kw) * cols + i * P, d, kh, kw);
    }
}

// col [Cin k k, n Ho Wo] -> dx [n, Cin, H, W], summing the taps that meet on
// one input pixel; dx is overwritten unless `accumulate`. Threads split
// (image, channel) planes, so no two write one pixel.
template <typename T>
void col2im(const T* col, T* dx, const Conv2dDims& d, int64_t n, bool accumulate) {
  const int64_t k = d.kernel, P = d.out_pixels(), cols = n * P;
  const int64_t plane = d.height * d.width;
  const int64_t channels = d.in_channels;
#pragma omp parallel for collapse(2) schedule(static) if (d.patch() * cols >= kParallelMin)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      T* out = dx + (i * channels + c) * plane;
      if (!accumulate) std::fill(out, out + plane, T(0));
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw)
          fold_tap(col + ((c * k + kh) * k + kw) * cols + i * P, out, d, kh, kw);
    }
}

// staging [C, n P] <-> t [n, C, P]: the GEMM layout against the tensor layout.
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

// Where col and the staging area sit in the workspace.
template <typename T>
struct Buffers {
  T* col;
  T* staging;
  Buffers(T* workspace, const Conv2dDims& d, int64_t per_chunk)
      : col(workspace),
        staging(workspace + (d.pointwise() ? 0 : d.patch() * per_chunk * d.out_pixels())) {}
};

}  // namespace

int64_t conv2d_images_per_chunk(const Conv2dDims& d) {
  if (d.batch <= 0) return 0;
  if (d.pointwise()) return 1;  // x is its own col; one GEMM per image, no staging
  const int64_t P = std::max<int64_t>(d.out_pixels(), 1);
  const int64_t per_image = std::max<int64_t>(d.patch() * P, 1);
  int64_t n = (kTargetColumns + P - 1) / P;
  n = std::min(n, std::max<int64_t>(1, kColBudget / per_image));
  return std::min(n, d.batch);
}

int64_t conv2d_workspace_elems(const Conv2dDims& d) {
  const int64_t n = conv2d_images_per_chunk(d);
  const int64_t cols = n * d.out_pixels();
  const int64_t col = d.pointwise() ? 0 : d.patch() * cols;
  const int64_t staging = n > 1 ? d.out_channels * cols : 0;
  return col + staging;
}

template <typename T>
void conv2d_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                    bool accumulate) {
  const int64_t B = d.batch, Cout = d.out_channels, K = d.patch(), P = d.out_pixels();
  const int64_t x_image = d.in_channels * d.height * d.width, y_image = Cout * P;
  if (B == 0 || y_image == 0) return;
  if (K == 0) {  // an empty sum; BLAS may skip the beta = 0 store when k = 0
    if (!accumulate) std::fill(y, y + B * y_image, T(0));
    return;
  }
  const int64_t per_chunk = conv2d_images_per_chunk(d);
  const Buffers<T> buf(workspace, d, per_chunk);
  for (int64_t b0 = 0; b0 < B; b0 += per_chunk) {
    const int64_t n = std::min(per_chunk, B - b0), cols = n * P;
    const T* col = x + b0 * x_image;
    if (!d.pointwise()) {
      im2col(col, buf.col, d, n);
      col = buf.col;
    }
    T* y_chunk = y + b0 * y_image;
    if (per_chunk == 1) {
      gemm(CblasNoTrans, CblasNoTrans, Cout, P, K, T(1), w, K, col, P, T(accumulate ? 1 : 0),
           y_chunk, P);
    } else {
      gemm(CblasNoTrans, CblasNoTrans, Cout, cols, K, T(1), w, K, col, cols, T(0), buf.staging,
           cols);
      unstage(buf.staging, y_chunk, Cout, P, n, accumulate);
    }
  }
}

template <typename T>
void conv2d_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                           bool accumulate) {
  const int64_t B = d.batch, Cin = d.in_channels, Cout = d.out_channels, K = d.patch();
  const int64_t P = d.out_pixels();
  const int64_t x_image = Cin * d.height * d.width, y_image = Cout * P;
  if (B == 0 || x_image == 0) return;
  if (Cout == 0 || P == 0) {  // no output touches the input: its gradient is 0
    if (!accumulate) std::fill(dx, dx + B * x_image, T(0));
    return;
  }
  const int64_t per_chunk = conv2d_images_per_chunk(d);
  const Buffers<T> buf(workspace, d, per_chunk);
  for (int64_t b0 = 0; b0 < B; b0 += per_chunk) {
    const int64_t n = std::min(per_chunk, B - b0), cols = n * P;
    const T* dy_cols = dy + b0 * y_image;  // [Cout, n P]
    if (per_chunk > 1) {
      stage(dy_cols, buf.staging, Cout, P, n);
      dy_cols = buf.staging;
    }
    T* dx_chunk = dx + b0 * x_image;
    if (d.pointwise()) {
      gemm(CblasTrans, CblasNoTrans, Cin, P, Cout, T(1), w, Cin, dy_cols, P,
           T(accumulate ? 1 : 0), dx_chunk, P);
    } else {
      gemm(CblasTrans, CblasNoTrans, K, cols, Cout, T(1), w, K, dy_cols, cols, T(0), buf.col,
           cols);
      col2im(buf.col, dx_chunk, d, n, accumulate);
    }
  }
}

template <typename T>
void conv2d_backward_weight(const T* dy, const T* x, T* dw, T* workspace, const Conv2dDims& d) {
  const int64_t B = d.batch, Cout = d.out_channels, K = d.patch(), P = d.out_pixels();
  const int64_t x_image = d.in_channels * d.height * d.width, y_image = Cout * P;
  if (B == 0 || Cout == 0 || K == 0 || P == 0) return;  // nothing to add
  const int64_t per_chunk = conv2d_images_per_chunk(d);
  const Buffers<T> buf(workspace, d, per_chunk);
  for (int64_t b0 = 0; b0 < B; b0 += per_chunk) {
    const int64_t n = std::min(per_chunk, B - b0), cols = n * P;
    const T* dy_cols = dy + b0 * y_image;
    if (per_chunk > 1) {
      stage(dy_cols, buf.staging, Cout, P, n);
      dy_cols = buf.staging;
    }
    const T* col = x + b0 * x_image;
    if (!d.pointwise()) {
      im2col(col, buf.col, d, n);
      col = buf.col;
    }
    gemm(CblasNoTrans, CblasTrans, Cout, K, cols, T(1), dy_cols, cols, col, cols, T(1), dw, K);
  }
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
