// CUDA RMSNorm. Forward and backward_input: one block per row (grid-stride
// over rows), a block-wide sum through warp shuffles, rows read in 16-byte
// packs when D and the pointers allow. backward_weight: blocks of 32 columns
// x a chunk of rows, each block sums its chunk in a fixed order and adds it
// to dweight with one atomic per column.
#include "kernels/cuda/rmsnorm.h"

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

// x, y [n, d], weight [d], rstd [n]; K elements per load (d % K == 0).
template <typename T, int K>
__global__ void rmsnorm_forward_kernel(const T* x, const T* weight, float eps, T* y, float* rstd,
                                       int64_t n, int64_t d) {
  using V = Vec<T, K>;
  const int64_t units = d / K;
  const V* w = reinterpret_cast<const V*>(weight);
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {  // uniform over the block
    const V* xr = reinterpret_cast<const V*>(x + row * d);
    V* yr = reinterpret_cast<V*>(y + row * d);
    float ss = 0;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V xv = xr[k];
#pragma unroll
      for (int j = 0; j < K; ++j) {
        const float f = to_f32(xv.v[j]);
        ss += f * f;
      }
    }
    const float r = 1.0f / sqrtf(block_sum_all(ss) / static_cast<float>(d) + eps);
    if (threadIdx.x == 0) rstd[row] = r;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V xv = xr[k], wv = w[k];
      V out;
#pragma unroll
      for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>(to_f32(xv.v[j]) * r * to_f32(wv.v[j]));
      yr[k] = out;
    }
  }
}

// dx = rstd * dy * w - (rstd^3 * sum(dy * w * x) / d) * x, per row. Every
// element of dy and x is read before the block sum and again by the same
// thread just before it writes dx there, so dx may alias dy or x.
template <typename T, int K>
__global__ void rmsnorm_backward_input_kernel(const T* dy, const T* x, const T* weight,
                                              const float* rstd, T* dx, int64_t n, int64_t d) {
  using V = Vec<T, K>;
  const int64_t units = d / K;
  const V* w = reinterpret_cast<const V*>(weight);
  for (int64_t row = blockIdx.x; row < n; row += gridDim.x) {  // uniform over the block
    const V* dyr = reinterpret_cast<const V*>(dy + row * d);
    const V* xr = reinterpret_cast<const V*>(x + row * d);
    V* dxr = reinterpret_cast<V*>(dx + row * d);
    float dot = 0;
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V dyv = dyr[k], xv = xr[k], wv = w[k];
#pragma unroll
      for (int j = 0; j < K; ++j) dot += to_f32(dyv.v[j]) * to_f32(wv.v[j]) * to_f32(xv.v[j]);
    }
    dot = block_sum_all(dot);
    const float r = rstd[row];
    const float b = r * r * r * dot / static_cast<float>(d);
    for (int64_t k = threadIdx.x; k < units; k += blockDim.x) {
      const V dyv = dyr[k], xv = xr[k], wv = w[k];
      V out;
#pragma unroll
      for (int j = 0; j < K; ++j)
        out.v[j] = from_f32<T>(r * to_f32(dyv.v[j]) * to_f32(wv.v[j]) - b * to_f32(xv.v[j]));
      dxr[k] = out;
    }
  }
}

constexpr int kWeightCols = 32;    // columns per block: one warp-wide, coalesced row segment
constexpr int kWeightLanes = 8;    // rows read side by side per block
constexpr int kWeightTargetBlocks = 2048;
constexpr int64_t kWeightMinChunkRows = 64;  // bounds the atomics at one per column per 64 rows

// dweight[col] += sum over rows [chunk * rows_per_chunk, ...) of dy * x * rstd.
// Block (kWeightCols, kWeightLanes): lane y walks rows y, y + 8, ... of the
// chunk; the 8 lane sums are added in order and then once into dweight.
template <typename T>
__global__ void rmsnorm_backward_weight_kernel(const T* dy, const T* x, const float* rstd,
                                               float* dweight, int64_t n, int64_t d,
                                               int64_t rows_per_chunk) {
  __shared__ float lane_sums[kWeightLanes][kWeightCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWeightCols + threadIdx.x;
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t row_end = min(n, row_begin + rows_per_chunk);
  float acc = 0;
  if (col < d) {
    for (int64_t row = row_begin + threadIdx.y; row < row_end; row += kWeightLanes)
      acc += to_f32(dy[row * d + col]) * to_f32(x[row * d + col]) * rstd[row];
  }
  lane_sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    float total = 0;
#pragma unroll
    for (int lane = 0; lane < kWeightLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    atomicAdd(dweight + col, total);
  }
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& y, Tensor& rstd) {
  const int64_t d = x.size(-1);
  const int64_t n = d == 0 ? 0 : x.numel() / d;
  if (n == 0) return;
  on_cuda_float(x.dtype(), "rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    const T* pw = device_ptr<T>(weight);
    T* py = device_ptr<T>(y);
    const bool packed = d % K == 0 && aligned16(px) && aligned16(pw) && aligned16(py);
    cudaStream_t stream = compute_stream();
    if (packed) {
      launch<rmsnorm_forward_kernel<T, K>>(row_blocks(n), row_threads(d / K), 0, stream,
          px, pw, static_cast<float>(eps), py, rstd.data<float>(), n, d);
    } else {
      launch<rmsnorm_forward_kernel<T, 1>>(row_blocks(n), row_threads(d), 0, stream,
          px, pw, static_cast<float>(eps), py, rstd.data<float>(), n, d);
    }
    SDP_CUDA_LAUNCH_CHECK("rmsnorm_forward_kernel");
  });
}

void rmsnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx) {
  const int64_t d = x.size(-1);
  const int64_t n = d == 0 ? 0 : x.numel() / d;
  if (n == 0) return;
  on_cuda_float(x.dtype(), "rmsnorm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    const T* px = device_ptr<T>(x);
    const T* pw = device_ptr<T>(weight);
    T* pdx = device_ptr<T>(dx);
    const bool packed = d % K == 0 && aligned16(pdy) && aligned16(px) && aligned16(pw) &&
                        aligned16(pdx);
    cudaStream_t stream = compute_stream();
    if (packed) {
      launch<rmsnorm_backward_input_kernel<T, K>>(row_blocks(n), row_threads(d / K), 0, stream,
          pdy, px, pw, rstd.data<float>(), pdx, n, d);
    } else {
      launch<rmsnorm_backward_input_kernel<T, 1>>(row_blocks(n), row_threads(d), 0, stream,
          pdy, px, pw, rstd.data<float>(), pdx, n, d);
    }
    SDP_CUDA_LAUNCH_CHECK("rmsnorm_backward_input_kernel");
  });
}

void rmsnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                             Tensor& dweight) {
  const int64_t d = x.size(-1);
  const int64_t n = d == 0 ? 0 : x.numel() / d;
  if (n == 0) return;
  // Enough row chunks to give the GPU ~kWeightTargetBlocks blocks, each chunk
  // at least kWeightMinChunkRows rows; gridDim.y stays within its 65535 limit.
  const int64_t col_blocks = (d + kWeightCols - 1) / kWeightCols;
  const int64_t max_chunks =
      std::min<int64_t>(65535, (n + kWeightMinChunkRows - 1) / kWeightMinChunkRows);
  const int64_t wanted = std::clamp<int64_t>(kWeightTargetBlocks / col_blocks, 1, max_chunks);
  const int64_t rows_per_chunk = (n + wanted - 1) / wanted;
  const int64_t chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  const dim3 block(kWeightCols, kWeightLanes);
  on_cuda_float(x.dtype(), "rmsnorm_backward_weight", [&](auto tag) {
    using T = decltype(tag);
    launch<rmsnorm_backward_weight_kernel<T>>(grid, block, 0, compute_stream(),
        device_ptr<T>(dy), device_ptr<T>(x), rstd.data<float>(), dweight.data<float>(), n, d,
        rows_per_chunk);
    SDP_CUDA_LAUNCH_CHECK("rmsnorm_backward_weight_kernel");
  });
}

}  // namespace sdp::cuda
