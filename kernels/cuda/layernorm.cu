// CUDA LayerNorm. Forward and backward_input: one block per row
// (grid-stride over rows), block-wide sums through warp shuffles in a fixed
// order, rows read in 16-byte packs when D and the pointers allow. The
// variance is the mean of squared deviations from the mean, summed in a
// second pass over the row (not E[x^2] - mean^2, which cancels when |mean|
// >> std).
//
// backward_weight: each block owns a few columns and every row (no
// atomics, and no cross-block partials: they would need scratch memory,
// which these ops are not given), row lanes side by side whose sums are
// added in lane order; so the bits never depend on scheduling. The price
// is parallelism: D / 8 blocks in f32, D / 16 in bf16 (12 and 6 at Swin's
// C = 96), each streaming its columns of every row.
#include "kernels/cuda/layernorm.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/vec.cuh"

namespace sdp::cuda {
namespace {

using vec::aligned16;
using vec::kPack;
using vec::row_blocks;
using vec::row_threads;
using vec::Vec;

// x, y [n, d], weight, bias [d], mean, rstd [n]; K elements per load (d % K == 0).
template <typename T, int K>
__global__ void layernorm_forward_kernel(const T* x, const T* weight, const T* bias, float eps,
                                         T* y, float* mean, float* rstd, int64_t n, int64_t d) {
  using V = Vec<T, K>;
  const int64_t units = d / K;
  const V* w = reinterpret_cast<const V*>(weight);
  const V* bv = reinterpret_cast<const V*>(bias);
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {  // uniform over the block
    const V* xr = reinterpret_cast<const V*>(x + row * d);
    V* yr = reinterpret_cast<V*>(y + row * d);
    float s = 0;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V xv = xr[k];
#pragma unroll
      for (int j = 0; j < K; ++j) s += to_f32(xv.v[j]);
    }
    const float mu = block_sum_all(s) * inv_d;
    float ss = 0;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V xv = xr[k];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const float c = to_f32(xv.v[j]) - mu;
        ss += c * c;
      }
    }
    const float r = 1.0f / sqrtf(block_sum_all(ss) * inv_d + eps);
    if (threadIdx.x == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V xv = xr[k], wv = w[k], b = bv[k];
      V out;
#pragma unroll
      for (int j = 0; j < K; ++j)
        out.v[j] = from_f32<T>((to_f32(xv.v[j]) - mu) * r * to_f32(wv.v[j]) + to_f32(b.v[j]));
      yr[k] = out;
    }
  }
}

// With xhat = (x - mean) rstd and g = dy w, per row:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)).
// Every element of dy and x is read before the block sums and again by the
// same thread just before it writes dx there, so dx may alias dy.
template <typename T, int K>
__global__ void layernorm_backward_input_kernel(const T* dy, const T* x, const T* weight,
                                                const float* mean, const float* rstd, T* dx,
                                                int64_t n, int64_t d) {
  using V = Vec<T, K>;
  const int64_t units = d / K;
  const V* w = reinterpret_cast<const V*>(weight);
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {  // uniform over the block
    const V* dyr = reinterpret_cast<const V*>(dy + row * d);
    const V* xr = reinterpret_cast<const V*>(x + row * d);
    V* dxr = reinterpret_cast<V*>(dx + row * d);
    const float mu = mean[row], r = rstd[row];
    float sg = 0, sgx = 0;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V dyv = dyr[k], xv = xr[k], wv = w[k];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const float g = to_f32(dyv.v[j]) * to_f32(wv.v[j]);
        sg += g;
        sgx += g * (to_f32(xv.v[j]) - mu) * r;
      }
    }
    const float mean_g = block_sum_all(sg) * inv_d;
    const float mean_gx = block_sum_all(sgx) * inv_d;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V dyv = dyr[k], xv = xr[k], wv = w[k];
      V out;
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const float g = to_f32(dyv.v[j]) * to_f32(wv.v[j]);
        const float xhat = (to_f32(xv.v[j]) - mu) * r;
        out.v[j] = from_f32<T>(r * (g - mean_g - xhat * mean_gx));
      }
      dxr[k] = out;
    }
  }
}

// backward_weight's tile: 32 bytes of columns (one memory sector per row:
// 8 f32 or 16 bf16 columns) by enough row lanes for 1024 threads. Narrow
// tiles give D / 8 (f32) or D / 16 (bf16) blocks instead of D / 32.
constexpr int kWeightThreads = 1024;
template <typename T>
constexpr int kWeightCols = static_cast<int>(32 / sizeof(T));
template <typename T>
constexpr int kWeightLanes = kWeightThreads / kWeightCols<T>;

// dweight[col] += sum over rows of dy xhat, dbias[col] += sum of dy. Block
// (kWeightCols, kWeightLanes) owns its columns: lane y walks rows y, y +
// lanes, ...; the lane sums are then added in lane order by one thread per
// column. 1024 threads a block: registers capped to fit (__launch_bounds__).
template <typename T>
__global__ void __launch_bounds__(kWeightThreads)
    layernorm_backward_weight_kernel(const T* dy, const T* x, const float* mean,
                                     const float* rstd, float* dweight, float* dbias, int64_t n,
                                     int64_t d) {
  SDP_LAUNCH_BOUNDS_CHECK(kWeightThreads);
  constexpr int kCols = kWeightCols<T>, kLanes = kWeightLanes<T>;
  __shared__ float w_sums[kLanes][kCols];
  __shared__ float b_sums[kLanes][kCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float aw = 0, ab = 0;
  if (col < d) {
#pragma unroll 4
    for (int64_t row = threadIdx.y; row < n; row += kLanes) {
      const float g = to_f32(dy[row * d + col]);
      aw += g * (to_f32(x[row * d + col]) - mean[row]) * rstd[row];
      ab += g;
    }
  }
  w_sums[threadIdx.y][threadIdx.x] = aw;
  b_sums[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    float tw = 0, tb = 0;
    for (int lane = 0; lane < kLanes; ++lane) {
      tw += w_sums[lane][threadIdx.x];
      tb += b_sums[lane][threadIdx.x];
    }
    dweight[col] += tw;
    dbias[col] += tb;
  }
}

int64_t rows_of(const Tensor& x) {
  const int64_t d = x.size(-1);
  return d == 0 ? 0 : x.numel() / d;
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t d = x.size(-1), n = rows_of(x);
  if (n == 0) return;
  on_cuda_float(x.dtype(), "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    const T* pw = device_ptr<T>(weight);
    const T* pb = device_ptr<T>(bias);
    T* py = device_ptr<T>(y);
    const bool packed =
        d % K == 0 && aligned16(px) && aligned16(pw) && aligned16(pb) && aligned16(py);
    const float e = static_cast<float>(eps);
    cudaStream_t stream = compute_stream();
    if (packed) {
      launch<layernorm_forward_kernel<T, K>>(row_blocks(n), row_threads(d / K), 0, stream,
          px, pw, pb, e, py, mean.data<float>(), rstd.data<float>(), n, d);
    } else {
      launch<layernorm_forward_kernel<T, 1>>(row_blocks(n), row_threads(d), 0, stream,
          px, pw, pb, e, py, mean.data<float>(), rstd.data<float>(), n, d);
    }
    SDP_CUDA_LAUNCH_CHECK("layernorm_forward_kernel");
  });
}

void layernorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor& dx) {
  const int64_t d = x.size(-1), n = rows_of(x);
  if (n == 0) return;
  on_cuda_float(x.dtype(), "layernorm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    const T* px = device_ptr<T>(x);
    const T* pw = device_ptr<T>(weight);
    T* pdx = device_ptr<T>(dx);
    const bool packed =
        d % K == 0 && aligned16(pdy) && aligned16(px) && aligned16(pw) && aligned16(pdx);
    cudaStream_t stream = compute_stream();
    if (packed) {
      launch<layernorm_backward_input_kernel<T, K>>(row_blocks(n), row_threads(d / K), 0, stream,
          pdy, px, pw, mean.data<float>(), rstd.data<float>(), pdx, n, d);
    } else {
      launch<layernorm_backward_input_kernel<T, 1>>(row_blocks(n), row_threads(d), 0, stream,
          pdy, px, pw, mean.data<float>(), rstd.data<float>(), pdx, n, d);
    }
    SDP_CUDA_LAUNCH_CHECK("layernorm_backward_input_kernel");
  });
}

void layernorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& dweight, Tensor& dbias) {
  const int64_t d = x.size(-1), n = rows_of(x);
  if (n == 0) return;
  on_cuda_float(x.dtype(), "layernorm_backward_weight", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kCols = kWeightCols<T>;
    const dim3 grid(static_cast<unsigned>((d + kCols - 1) / kCols));
    const dim3 block(kCols, kWeightLanes<T>);
    launch<layernorm_backward_weight_kernel<T>>(grid, block, 0, compute_stream(),
        device_ptr<T>(dy), device_ptr<T>(x), mean.data<float>(), rstd.data<float>(),
        dweight.data<float>(), dbias.data<float>(), n, d);
    SDP_CUDA_LAUNCH_CHECK("layernorm_backward_weight_kernel");
  });
}

}  // namespace sdp::cuda
