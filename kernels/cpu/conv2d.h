#pragma once
// 2-D convolution (NCHW, square kernel, equal stride and zero padding on both
// axes, no bias) as im2col + one BLAS GEMM per chunk of images.
//
// A chunk of n images is unfolded into col [Cin k k, n Ho Wo] (column = one
// output pixel of one image), so each chunk is a single large GEMM with
// w [Cout, Cin k k]. Its result [Cout, n Ho Wo] is not y's layout
// [n, Cout, Ho Wo] once n > 1, so it lands in a staging area and is copied
// out (a copy per output element against 2 Cin k k flops: noise). Images
// with enough pixels for an efficient GEMM (n = 1) multiply straight into y.
// Pointwise convs (k 1, stride 1, padding 0) read x in place: x's image
// [Cin, H W] already is its col.
//
// The chunk depends on the shapes only (never on the thread count), so the
// workspace size and every sum's order are the same on every machine.
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

// Images unfolded together (>= 1 unless the batch is empty).
int64_t conv2d_images_per_chunk(const Conv2dDims& d);
// Elements of the workspace the three kernels below need: col
// [Cin k k, n Ho Wo] (none for pointwise convs), then, when n > 1, the
// staging area [Cout, n Ho Wo].
int64_t conv2d_workspace_elems(const Conv2dDims& d);

// x [B, Cin, H, W], w [Cout, Cin, k, k], y [B, Cout, Ho, Wo]: y = conv(x, w),
// or y += conv(x, w) with accumulate.
template <typename T>
void conv2d_forward(const T* x, const T* w, T* y, T* workspace, const Conv2dDims& d,
                    bool accumulate);

// dx [B, Cin, H, W] = conv_transpose(dy, w) (or += with accumulate):
// dcol = w^T dy per chunk, then col2im adds overlapping taps.
template <typename T>
void conv2d_backward_input(const T* dy, const T* w, T* dx, T* workspace, const Conv2dDims& d,
                           bool accumulate);

// dw [Cout, Cin, k, k] += dy [Cout, n Ho Wo] col^T, summed over the chunks
// in batch order.
template <typename T>
void conv2d_backward_weight(const T* dy, const T* x, T* dw, T* workspace, const Conv2dDims& d);

}  // namespace sdp::cpu
