#pragma once
// Pieces shared by the CUDA elementwise and layout kernels (activation.cu,
// gelu.cu, layernorm.cu, rmsnorm.cu, window_layout.cu): the 16-byte pack moved by one
// load or store, grid-stride indexing, and the packed elementwise maps.
// Device and host code.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace sdp::cuda::vec {

inline constexpr int kThreads = 256;       // elementwise maps
inline constexpr int64_t kMaxBlocks = 8192;  // grid-stride beyond

// K consecutive elements moved by one load or store (16 bytes when packed).
template <typename T, int K>
struct alignas(sizeof(T) * K) Vec {
  T v[K];
};

// Elements per 16-byte pack.
template <typename T>
inline constexpr int kPack = static_cast<int>(16 / sizeof(T));

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks of kThreads covering `items` work items, at most kMaxBlocks.
inline int blocks_for(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// Row kernels (one block per row, grid-stride beyond kMaxRowBlocks rows).
inline constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;
inline constexpr int kMaxRowThreads = 512;

// Whole warps, one per 32 work items of a row, at most kMaxRowThreads.
inline int row_threads(int64_t units) {
  return static_cast<int>(std::clamp<int64_t>((units + 31) / 32 * 32, 32, kMaxRowThreads));
}
inline int row_blocks(int64_t rows) { return static_cast<int>(std::min(rows, kMaxRowBlocks)); }

// y = op(x) over n elements: packs [0, n / K), then the n % K < K elements
// left over, one per thread of the first warp. y may alias x: each element
// is read before the same thread writes it.
template <typename T, int K, typename Op>
__global__ void map_kernel(const T* x, T* y, int64_t n, Op op) {
  using V = Vec<T, K>;
  const int64_t packs = n / K;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const V v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = op(v.v[j]);
    yv[i] = out;
  }
  const int64_t rest = packs * K + first_index();
  if (rest < n) y[rest] = op(x[rest]);
}

// y = op(a, b) elementwise, walked as map_kernel; y may alias a or b.
template <typename T, int K, typename Op>
__global__ void map2_kernel(const T* a, const T* b, T* y, int64_t n, Op op) {
  using V = Vec<T, K>;
  const int64_t packs = n / K;
  const V* av = reinterpret_cast<const V*>(a);
  const V* bv = reinterpret_cast<const V*>(b);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const V u = av[i], v = bv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = op(u.v[j], v.v[j]);
    yv[i] = out;
  }
  const int64_t rest = packs * K + first_index();
  if (rest < n) y[rest] = op(a[rest], b[rest]);
}

// Launches map_kernel, packed when both pointers are 16-byte aligned (the
// caller checks the launch).
template <typename T, typename Op>
void launch_map(const T* x, T* y, int64_t n, Op op, cudaStream_t stream) {
  constexpr int K = kPack<T>;
  if (aligned16(x) && aligned16(y))
    launch<map_kernel<T, K, Op>>(blocks_for(n / K + 1), kThreads, 0, stream, x, y, n, op);
  else
    launch<map_kernel<T, 1, Op>>(blocks_for(n), kThreads, 0, stream, x, y, n, op);
}

// Launches map2_kernel, packed when all three pointers are 16-byte aligned.
template <typename T, typename Op>
void launch_map2(const T* a, const T* b, T* y, int64_t n, Op op, cudaStream_t stream) {
  constexpr int K = kPack<T>;
  if (aligned16(a) && aligned16(b) && aligned16(y))
    launch<map2_kernel<T, K, Op>>(blocks_for(n / K + 1), kThreads, 0, stream, a, b, y, n, op);
  else
    launch<map2_kernel<T, 1, Op>>(blocks_for(n), kThreads, 0, stream, a, b, y, n, op);
}

}  // namespace sdp::cuda::vec
