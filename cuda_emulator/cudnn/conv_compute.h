#pragma once
// The arithmetic of the emulated cuDNN convolutions, apart from the C API:
// im2col + OpenBLAS sgemm in f32, one image at a time, then
// out = alpha * result + beta * out in f32 and one rounding to the storage
// type (round-to-nearest-even for bf16). Runs in stream order, on memory the
// caller validated.
#include <cudnn.h>

#include <cstdint>

namespace sdp::emu::cudnn {

// Every extent of one 2-d cross-correlation, NCHW:
// x (dx) [n, c, h, w], w (dw) [k, c, r, s], y (dy) [n, k, out_h, out_w],
// out_h = (h + 2 pad_h - dilation_h (r - 1) - 1) / stride_h + 1 (same for w).
struct ConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 0, r = 0, s = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;  // storage of x, w, y; compute is f32

  int64_t x_elements() const { return n * c * h * w; }
  int64_t w_elements() const { return k * c * r * s; }
  int64_t y_elements() const { return n * k * out_h * out_w; }
  // One image's column matrix: [c * r * s, out_h * out_w] floats.
  int64_t column_elements() const { return c * r * s * out_h * out_w; }
};

// `columns`: scratch for one image's column matrix (column_elements()
// floats: the caller's workspace), or nullptr for a buffer of its own. Data
// pointers are of the storage type; beta == 0 never reads the output.
void conv_forward(const ConvShape& p, const void* x, const void* w, void* y, float alpha,
                  float beta, float* columns);
void conv_backward_data(const ConvShape& p, const void* w, const void* dy, void* dx, float alpha,
                        float beta, float* columns);
void conv_backward_filter(const ConvShape& p, const void* x, const void* dy, void* dw, float alpha,
                          float beta, float* columns);

}  // namespace sdp::emu::cudnn
