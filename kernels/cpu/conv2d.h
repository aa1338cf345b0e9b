#pragma once
// 2-D convolution (NCHW, square kernel, equal stride and zero padding on both
// axes, no bias). 3 x 3 stride-1 convs (nearly all of a CIFAR ResNet's work)
// run as Winograd F(4 x 4, 3 x 3), 4x fewer multiplies, on outputs of at
// least 8 x 8 (conv2d_winograd4.h), as F(2 x 2, 3 x 3), 2.25x fewer, on
// smaller ones (conv2d_winograd.h); all others as im2col + BLAS GEMMs,
// described here.
//
// The batch is walked in blocks of GEMM columns (output pixels), a few
// hundred each: enough for BLAS to run near its peak, few enough that a
// block's col [Cin k k, columns] stays small (in L2 for the shallow layers)
// between im2col writing it and the GEMM reading it. Large images are cut into blocks of output rows;
// the GEMM then reads and writes y (or dy) in place, with y's image as a
// [Cout, Ho Wo] matrix of leading dimension Ho Wo. Small images are grouped,
// n per block; their GEMM result [Cout, n Ho Wo] is not y's layout
// [n, Cout, Ho Wo], so it goes through a staging area (a copy per output
// element against 2 Cin k k flops: noise). Pointwise convs (k 1, stride 1,
// padding 0) read x in place: x's image [Cin, H W] already is its col.
//
// The blocking depends on the shapes only (never on the thread count), so
// the workspace size and every sum's order are the same on every machine.
#include <cstdint>

namespace sdp::cpu {

struct Conv2dDims {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t height = 0, width = 0;
  int64_t out_channels = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
  int64_t out_height = 0, out_width = 0;

  int64_t patch() const { return in_channels * kernel * kernel; }     // rows of col
  int64_t out_pixels() const { return out_height * out_width; }      // columns per image
  bool pointwise() const { return kernel == 1 && stride == 1 && padding == 0; }
};

// Positions o in [0, out) along one axis with o stride + shift in [0, in):
// the outputs whose tap at `shift` (kernel index minus padding) reads the
// input rather than the zero padding, a range [lo, hi).
struct Conv2dSpan {
  int64_t lo = 0, hi = 0;
};
Conv2dSpan conv2d_inside(int64_t shift, int64_t in, int64_t stride, int64_t out);

// One block: `images` whole images (> 1 only for small images, with rows =
// Ho), or `rows` output rows of one image.
struct Conv2dBlocking {
  int64_t images = 1;
  int64_t rows = 1;
  int64_t columns(const Conv2dDims& d) const { return images * rows * d.out_width; }
};
Conv2dBlocking conv2d_blocking(const Conv2dDims& d);

// Elements of the workspace the three kernels below need. im2col: col
// [Cin k k, columns] (none for pointwise convs), then, when a block holds
// several images, the staging area [Cout, columns]; Winograd: its own.
int64_t conv2d_workspace_elems(const Conv2dDims& d);

// x [B, Cin, H, W], w [Cout, Cin, k, k], y [B, Cout, Ho, Wo]: y = conv(x, w),
// or y += conv(x, w) with accumulate.
template <typename T>
void conv2d_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                    bool accumulate);

// dx [B, Cin, H, W] = conv_transpose(dy, w) (or += with accumulate):
// dcol = w^T dy per block, then col2im adds the taps that overlap.
template <typename T>
void conv2d_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                           bool accumulate);

// dw [Cout, Cin, k, k] += dy [Cout, columns] col^T, summed over the blocks
// in batch order.
template <typename T>
void conv2d_backward_weight(const T* dy, const T* x, T* dw, T* workspace, const Conv2dDims& d);

}  // namespace sdp::cpu
