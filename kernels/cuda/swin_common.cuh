#pragma once
// Pieces shared by the Swin Transformer's CUDA kernels (layernorm.cu,
// gelu.cu, window_layout.cu, window_attention.cu): the 16-byte pack moved by
// one load or store, and grid-stride indexing. Device and host code.
#include <algorithm>
#include <cstdint>

namespace sdp::cuda::swin_detail {

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

}  // namespace sdp::cuda::swin_detail
