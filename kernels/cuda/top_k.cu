// Top-k correct counts (see top_k.h).
#include "kernels/cuda/top_k.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {

namespace {

constexpr int kThreads = 128;  // per block; a multiple of 32 (block_sum_all needs it)
constexpr int kMaxBlocks = 64;  // a grid-stride loop covers more rows
constexpr int kMaxK = kTopKLimit;

// NaN is the one value unequal to itself.
__device__ __forceinline__ bool is_nan(float x) { return x != x; }

struct TopK {
  int k[kMaxK];
  int count;
};

// Each launch's per-block counts; guarded by count_mutex() from the launch
// until the host has read them.
__device__ double g_top_k_counts[kMaxBlocks * kMaxK];

std::mutex& count_mutex() {
  static std::mutex m;
  return m;
}

// Thread by thread over the rows (grid-stride); each block's counts go to
// g_top_k_counts[block * kMaxK + i].
template <typename T>
__global__ void count_top_k_kernel(const T* logits, const int32_t* targets, int64_t n, int64_t v,
                                   TopK ks) {
  double correct[kMaxK] = {};
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < n;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t t = targets[row];
    if (t < 0 || t >= v) continue;  // ignored; out of range counts as wrong
    const T* x = logits + row * v;
    const float mine = to_f32(x[t]);
    bool nan = is_nan(mine);
    int64_t rank = 0;  // classes ranked before the target
    for (int64_t j = 0; j < v && !nan; ++j) {
      const float xj = to_f32(x[j]);
      nan = is_nan(xj);
      rank += xj > mine || (xj == mine && j < t);
    }
    if (nan) continue;
#pragma unroll
    for (int i = 0; i < kMaxK; ++i)
      if (i < ks.count && rank < ks.k[i]) correct[i] += 1;
  }
#pragma unroll
  for (int i = 0; i < kMaxK; ++i) {
    const double total = block_sum_all(correct[i]);
    if (threadIdx.x == 0) g_top_k_counts[blockIdx.x * kMaxK + i] = total;
  }
}

}  // namespace

void count_top_k(const Tensor& logits, const Tensor& targets, const int* ks, int nk,
                 int64_t* correct) {
  constexpr const char* op = "count_top_k";
  const int64_t n = targets.numel(), v = logits.size(-1);
  std::fill(correct, correct + nk, 0);
  if (n == 0) return;
  TopK arg{};
  arg.count = nk;
  std::copy(ks, ks + nk, arg.k);
  const int blocks =
      static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
  std::lock_guard<std::mutex> lock(count_mutex());
  cudaStream_t stream = compute_stream();
  on_cuda_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    launch<count_top_k_kernel<T>>(blocks, kThreads, 0, stream, device_ptr<T>(logits),
        targets.data<int32_t>(), n, v, arg);
    SDP_CUDA_LAUNCH_CHECK("count_top_k_kernel");
  });
  double counts[kMaxBlocks * kMaxK];
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(counts, g_top_k_counts,
                                       sizeof(double) * static_cast<size_t>(blocks) * kMaxK, 0,
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  // Per-block counts are whole numbers far below 2^53: exact in double.
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < nk; ++i) correct[i] += static_cast<int64_t>(counts[b * kMaxK + i]);
}

}  // namespace sdp::cuda
