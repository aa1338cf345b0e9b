// im2col + sgemm convolutions for the emulated cuDNN. Per image:
//   forward:         y[n]  (k x P)   = W (k x CRS) * cols(x[n]) (CRS x P)
//   backward data:   cols (CRS x P)  = W^T * dy[n] (k x P), dx[n] = col2im(cols)
//   backward filter: dW (k x CRS)   += dy[n] (k x P) * cols(x[n])^T
// with P = out_h * out_w and CRS = c * r * s. Sums are f32 (OpenBLAS sgemm);
// bf16 operands are widened exactly, and each output element is rounded once.
#include "cuda_emulator/cudnn/conv_compute.h"

#include <cblas.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sdp::emu::cudnn {
namespace {

inline float widen(float v) { return v; }
inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
T narrow(float v);
template <>
inline float narrow<float>(float v) {
  return v;
}
template <>
inline __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);  // round to nearest, ties to even
}

// `count` values as f32: the data itself when it is f32, else a widened copy
// in `scratch`.
const float* as_f32(const float* data, int64_t /*count*/, std::vector<float>& /*scratch*/) {
  return data;
}
const float* as_f32(const __nv_bfloat16* data, int64_t count, std::vector<float>& scratch) {
  scratch.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) scratch[static_cast<size_t>(i)] = widen(data[i]);
  return scratch.data();
}

// out[i] = alpha * acc[i] + beta * out[i], out not read when beta == 0 (it
// may hold anything, NaN included, as in cuDNN).
template <typename T>
void blend_store(const float* acc, T* out, int64_t count, float alpha, float beta) {
  if (beta == 0.0f) {
    for (int64_t i = 0; i < count; ++i) out[i] = narrow<T>(alpha * acc[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = narrow<T>(alpha * acc[i] + beta * widen(out[i]));
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The output columns [begin, end) whose input column ow * stride + offset
// lies inside [0, width); the others read the zero padding.
struct ColumnRange {
  int64_t begin = 0, end = 0;
};
ColumnRange valid_columns(int64_t offset, int64_t stride, int64_t width, int64_t out_width) {
  ColumnRange range;
  range.begin = offset >= 0 ? 0 : std::min(out_width, ceil_div(-offset, stride));
  range.end = width - offset <= 0 ? 0 : std::min(out_width, ceil_div(width - offset, stride));
  range.end = std::max(range.end, range.begin);
  return range;
}

// columns [c * r * s, out_h * out_w] from one image [c, h, w]: row
// (ci, ri, si) holds the input value each output position sees through that
// filter tap, 0 where it falls in the padding.
template <typename T>
void im2col(const ConvShape& p, const T* image, float* columns) {
  const int64_t plane = p.out_h * p.out_w;
  for (int64_t ci = 0; ci < p.c; ++ci)
    for (int64_t ri = 0; ri < p.r; ++ri)
      for (int64_t si = 0; si < p.s; ++si) {
        float* row = columns + ((ci * p.r + ri) * p.s + si) * plane;
        const int64_t col_offset = si * p.dilation_w - p.pad_w;
        const ColumnRange cols = valid_columns(col_offset, p.stride_w, p.w, p.out_w);
        for (int64_t oh = 0; oh < p.out_h; ++oh) {
          float* dst = row + oh * p.out_w;
          const int64_t ih = oh * p.stride_h - p.pad_h + ri * p.dilation_h;
          if (ih < 0 || ih >= p.h) {
            std::fill(dst, dst + p.out_w, 0.0f);
            continue;
          }
          const T* src = image + (ci * p.h + ih) * p.w;  // input row ih
          std::fill(dst, dst + cols.begin, 0.0f);
          for (int64_t ow = cols.begin; ow < cols.end; ++ow)
            dst[ow] = widen(src[ow * p.stride_w + col_offset]);
          std::fill(dst + cols.end, dst + p.out_w, 0.0f);
        }
      }
}

// The adjoint of im2col: adds each column entry into the image [c, h, w]
// position it was read from (padding entries are dropped).
void col2im_add(const ConvShape& p, const float* columns, float* image) {
  const int64_t plane = p.out_h * p.out_w;
  for (int64_t ci = 0; ci < p.c; ++ci)
    for (int64_t ri = 0; ri < p.r; ++ri)
      for (int64_t si = 0; si < p.s; ++si) {
        const float* row = columns + ((ci * p.r + ri) * p.s + si) * plane;
        const int64_t col_offset = si * p.dilation_w - p.pad_w;
        const ColumnRange cols = valid_columns(col_offset, p.stride_w, p.w, p.out_w);
        for (int64_t oh = 0; oh < p.out_h; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + ri * p.dilation_h;
          if (ih < 0 || ih >= p.h) continue;
          const float* src = row + oh * p.out_w;
          float* dst = image + (ci * p.h + ih) * p.w;  // input row ih
          for (int64_t ow = cols.begin; ow < cols.end; ++ow)
            dst[ow * p.stride_w + col_offset] += src[ow];
        }
      }
}

// BLAS takes int extents; each one here is bounded by a tensor's element
// count, which the descriptors keep within INT_MAX.
int blas_int(int64_t v) { return static_cast<int>(v); }

float* columns_or_own(const ConvShape& p, float* columns, std::vector<float>& own) {
  if (columns != nullptr) return columns;
  own.resize(static_cast<size_t>(p.column_elements()));
  return own.data();
}

template <typename T>
void forward_typed(const ConvShape& p, const T* x, const T* w, T* y, float alpha, float beta,
                   float* columns_in) {
  const int64_t crs = p.c * p.r * p.s, plane = p.out_h * p.out_w;
  std::vector<float> own_columns, w_scratch;
  float* columns = columns_or_own(p, columns_in, own_columns);  // [crs, plane]
  const float* w32 = as_f32(w, p.k * crs, w_scratch);           // [k, crs]
  std::vector<float> acc(static_cast<size_t>(p.k * plane));     // [k, plane]
  for (int64_t img = 0; img < p.n; ++img) {
    im2col(p, x + img * p.c * p.h * p.w, columns);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_int(p.k), blas_int(plane),
                blas_int(crs), 1.0f, w32, blas_int(crs), columns, blas_int(plane), 0.0f, acc.data(),
                blas_int(plane));
    blend_store(acc.data(), y + img * p.k * plane, p.k * plane, alpha, beta);
  }
}

template <typename T>
void backward_data_typed(const ConvShape& p, const T* w, const T* dy, T* dx, float alpha,
                         float beta, float* columns_in) {
  const int64_t crs = p.c * p.r * p.s, plane = p.out_h * p.out_w, image = p.c * p.h * p.w;
  std::vector<float> own_columns, w_scratch, dy_scratch;
  float* columns = columns_or_own(p, columns_in, own_columns);  // [crs, plane]
  const float* w32 = as_f32(w, p.k * crs, w_scratch);           // [k, crs]
  std::vector<float> acc(static_cast<size_t>(image));           // [c, h, w]
  for (int64_t img = 0; img < p.n; ++img) {
    const float* dy32 = as_f32(dy + img * p.k * plane, p.k * plane, dy_scratch);  // [k, plane]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, blas_int(crs), blas_int(plane),
                blas_int(p.k), 1.0f, w32, blas_int(crs), dy32, blas_int(plane), 0.0f, columns,
                blas_int(plane));
    std::fill(acc.begin(), acc.end(), 0.0f);
    col2im_add(p, columns, acc.data());
    blend_store(acc.data(), dx + img * image, image, alpha, beta);
  }
}

template <typename T>
void backward_filter_typed(const ConvShape& p, const T* x, const T* dy, T* dw, float alpha,
                           float beta, float* columns_in) {
  const int64_t crs = p.c * p.r * p.s, plane = p.out_h * p.out_w;
  std::vector<float> own_columns, dy_scratch;
  float* columns = columns_or_own(p, columns_in, own_columns);  // [crs, plane]
  std::vector<float> acc(static_cast<size_t>(p.k * crs));       // [k, crs], summed over images
  for (int64_t img = 0; img < p.n; ++img) {
    im2col(p, x + img * p.c * p.h * p.w, columns);
    const float* dy32 = as_f32(dy + img * p.k * plane, p.k * plane, dy_scratch);  // [k, plane]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(p.k), blas_int(crs),
                blas_int(plane), 1.0f, dy32, blas_int(plane), columns, blas_int(plane), 1.0f,
                acc.data(), blas_int(crs));
  }
  blend_store(acc.data(), dw, p.k * crs, alpha, beta);
}

}  // namespace

void conv_forward(const ConvShape& p, const void* x, const void* w, void* y, float alpha,
                  float beta, float* columns) {
  if (p.type == CUDNN_DATA_BFLOAT16)
    forward_typed(p, static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                  static_cast<__nv_bfloat16*>(y), alpha, beta, columns);
  else
    forward_typed(p, static_cast<const float*>(x), static_cast<const float*>(w),
                  static_cast<float*>(y), alpha, beta, columns);
}

void conv_backward_data(const ConvShape& p, const void* w, const void* dy, void* dx, float alpha,
                        float beta, float* columns) {
  if (p.type == CUDNN_DATA_BFLOAT16)
    backward_data_typed(p, static_cast<const __nv_bfloat16*>(w),
                        static_cast<const __nv_bfloat16*>(dy), static_cast<__nv_bfloat16*>(dx),
                        alpha, beta, columns);
  else
    backward_data_typed(p, static_cast<const float*>(w), static_cast<const float*>(dy),
                        static_cast<float*>(dx), alpha, beta, columns);
}

void conv_backward_filter(const ConvShape& p, const void* x, const void* dy, void* dw, float alpha,
                          float beta, float* columns) {
  if (p.type == CUDNN_DATA_BFLOAT16)
    backward_filter_typed(p, static_cast<const __nv_bfloat16*>(x),
                          static_cast<const __nv_bfloat16*>(dy), static_cast<__nv_bfloat16*>(dw),
                          alpha, beta, columns);
  else
    backward_filter_typed(p, static_cast<const float*>(x), static_cast<const float*>(dy),
                          static_cast<float*>(dw), alpha, beta, columns);
}

}  // namespace sdp::emu::cudnn
