// CUDA ReLU, global average pooling and bias. The maps walk their tensors in
// 16-byte packs when the pointers (and, where a pack must not straddle a row,
// the row length) allow, element by element otherwise; every loop is
// grid-stride, so any size runs on a bounded grid. The two sums (pooling,
// dbias) give each output to one warp or one block and add in a fixed order.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/vec.cuh"

namespace sdp::cuda {
namespace {

using namespace vec;

template <typename T>
__device__ __forceinline__ T relu(T v) {
  return to_f32(v) > 0.0f ? v : from_f32<T>(0.0f);
}

// ---- ReLU ---------------------------------------------------------------------
// y = relu(x), in T (exact: a sign test and a copy).
struct ReluOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const {
    return relu(x);
  }
};

// dx = dy where y > 0, else 0 (map2 over dy, y; dx may alias dy).
struct ReluGradOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T dy, T y) const {
    return to_f32(y) > 0.0f ? dy : from_f32<T>(0.0f);
  }
};

// ---- global average pooling ------------------------------------------------------
constexpr int kPoolWarps = kThreads / 32;

// x [rows, hw] -> y [rows]: one warp per row, lanes striding the row
// (coalesced), then a shuffle tree. The row loop is uniform over each warp,
// so every lane takes part in every shuffle.
template <typename T>
__global__ void global_avg_pool_forward_kernel(const T* x, T* y, int64_t rows, int64_t hw) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kPoolWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kPoolWarps + threadIdx.x / 32; row < rows;
       row += warps) {
    const T* xr = x + row * hw;
    float s = 0;
    for (int64_t k = lane; k < hw; k += 32) s += to_f32(xr[k]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) y[row] = from_f32<T>(s / static_cast<float>(hw));
  }
}

// dx [rows, hw] = dy [rows] / hw, K elements per pack (hw % K == 0, so a
// pack never straddles two rows).
template <typename T, int K>
__global__ void global_avg_pool_backward_kernel(const T* dy, T* dx, int64_t rows, int64_t hw) {
  using V = Vec<T, K>;
  const int64_t units = hw / K;
  const int64_t packs = rows * units;
  V* dxv = reinterpret_cast<V*>(dx);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const T g = from_f32<T>(to_f32(dy[i / units]) / static_cast<float>(hw));
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = g;
    dxv[i] = out;
  }
}

// ---- bias -----------------------------------------------------------------------
// y [rows, cols] += bias [cols], K elements per pack (cols % K == 0).
template <typename T, int K>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t packs, int64_t col_packs) {
  using V = Vec<T, K>;
  V* yv = reinterpret_cast<V*>(y);
  const V* bv = reinterpret_cast<const V*>(bias);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const V v = yv[i], b = bv[i % col_packs];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>(to_f32(v.v[j]) + to_f32(b.v[j]));
    yv[i] = out;
  }
}

constexpr int kBiasCols = 32;   // one warp across 32 adjacent columns: coalesced rows
constexpr int kBiasLanes = 16;  // rows read side by side

// dbias [cols] += column sums of dy [rows, cols]. Block (kBiasCols,
// kBiasLanes) owns 32 columns and every row: lane y sums rows y, y + 16, ...
// and the 16 lane sums are added in order. No atomics: each dbias element
// is written by one thread.
template <typename T>
__global__ void bias_backward_weight_kernel(const T* dy, float* dbias, int64_t rows, int64_t cols) {
  __shared__ float lane_sums[kBiasLanes][kBiasCols];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kBiasCols + threadIdx.x;
  float acc = 0;
  if (col < cols)
    for (int64_t row = threadIdx.y; row < rows; row += kBiasLanes)
      acc += to_f32(dy[row * cols + col]);
  lane_sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0;
#pragma unroll
    for (int lane = 0; lane < kBiasLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    dbias[col] += total;
  }
}

// [rows, last] reading of a tensor whose last dimension is `last`.
int64_t rows_of(const Tensor& t, int64_t last) { return last == 0 ? 0 : t.numel() / last; }

}  // namespace

void relu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  on_cuda_float(x.dtype(), "relu_forward", [&](auto tag) {
    using T = decltype(tag);
    launch_map(device_ptr<T>(x), device_ptr<T>(y), n, ReluOp{}, compute_stream());
    SDP_CUDA_LAUNCH_CHECK("relu_forward");
  });
}

void relu_backward_input(const Tensor& dy, const Tensor& y, Tensor& dx) {
  const int64_t n = dy.numel();
  if (n == 0) return;
  on_cuda_float(dy.dtype(), "relu_backward_input", [&](auto tag) {
    using T = decltype(tag);
    launch_map2(device_ptr<T>(dy), device_ptr<T>(y), device_ptr<T>(dx), n, ReluGradOp{},
                compute_stream());
    SDP_CUDA_LAUNCH_CHECK("relu_backward_input");
  });
}

void global_avg_pool_forward(const Tensor& x, Tensor& y) {
  const int64_t rows = y.numel();
  if (rows == 0) return;
  const int64_t hw = x.numel() / rows;  // 0 gives 0 / 0 = NaN, the mean of nothing
  on_cuda_float(x.dtype(), "global_avg_pool_forward", [&](auto tag) {
    using T = decltype(tag);
    const int blocks =
        static_cast<int>(std::clamp<int64_t>((rows + kPoolWarps - 1) / kPoolWarps, 1, kMaxBlocks));
    launch<global_avg_pool_forward_kernel<T>>(blocks, kThreads, 0, compute_stream(),
        device_ptr<T>(x), device_ptr<T>(y), rows, hw);
    SDP_CUDA_LAUNCH_CHECK("global_avg_pool_forward_kernel");
  });
}

void global_avg_pool_backward_input(const Tensor& dy, Tensor& dx) {
  const int64_t rows = dy.numel();
  if (rows == 0 || dx.numel() == 0) return;
  const int64_t hw = dx.numel() / rows;
  on_cuda_float(dy.dtype(), "global_avg_pool_backward_input", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    T* pdx = device_ptr<T>(dx);
    cudaStream_t stream = compute_stream();
    if (hw % K == 0 && aligned16(pdx))
      launch<global_avg_pool_backward_kernel<T, K>>(blocks_for(rows * (hw / K)), kThreads, 0,
          stream, pdy, pdx, rows, hw);
    else
      launch<global_avg_pool_backward_kernel<T, 1>>(blocks_for(rows * hw), kThreads, 0, stream, pdy,
          pdx, rows, hw);
    SDP_CUDA_LAUNCH_CHECK("global_avg_pool_backward_kernel");
  });
}

void bias_add_forward(Tensor& y, const Tensor& bias) {
  const int64_t cols = bias.numel();
  const int64_t rows = rows_of(y, cols);
  if (rows == 0 || cols == 0) return;
  on_cuda_float(y.dtype(), "bias_add_forward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    T* py = device_ptr<T>(y);
    const T* pb = device_ptr<T>(bias);
    cudaStream_t stream = compute_stream();
    const auto launch_packed = [&](auto pack) {
      constexpr int P = decltype(pack)::value;
      const int64_t packs = rows * (cols / P);
      launch<bias_add_kernel<T, P>>(blocks_for(packs), kThreads, 0, stream, py, pb, packs,
          cols / P);
    };
    if (cols % K == 0 && aligned16(py) && aligned16(pb))
      launch_packed(std::integral_constant<int, K>{});
    else
      launch_packed(std::integral_constant<int, 1>{});
    SDP_CUDA_LAUNCH_CHECK("bias_add_kernel");
  });
}

void bias_backward_weight(const Tensor& dy, Tensor& dbias) {
  const int64_t cols = dbias.numel();
  const int64_t rows = rows_of(dy, cols);
  if (rows == 0 || cols == 0) return;
  on_cuda_float(dy.dtype(), "bias_backward_weight", [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>((cols + kBiasCols - 1) / kBiasCols));
    const dim3 block(kBiasCols, kBiasLanes);
    launch<bias_backward_weight_kernel<T>>(grid, block, 0, compute_stream(), device_ptr<T>(dy),
        dbias.data<float>(), rows, cols);
    SDP_CUDA_LAUNCH_CHECK("bias_backward_weight_kernel");
  });
}

}  // namespace sdp::cuda
