// dst (f32) += src (bf16): a grid-stride loop, one element per thread per
// step. Weight gradients are small (a conv's is at most a few million
// elements), so packing the loads would buy nothing worth its code.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/accumulate_widening.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

__global__ void accumulate_bf16_into_f32_kernel(const __nv_bfloat16* src, float* dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] += to_f32(src[i]);
}

}  // namespace

void accumulate_bf16_into_f32(const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype() != DType::bf16 || dst.dtype() != DType::f32 || src.numel() != n)
    fail(
        "accumulate_bf16_into_f32: expected a bf16 source and an f32 destination of one size, "
        "got ",
        src.describe(), " and ", dst.describe());
  const int blocks =
      static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
  launch<accumulate_bf16_into_f32_kernel>(blocks, kThreads, 0, compute_stream(),
      device_ptr<__nv_bfloat16>(src), dst.data<float>(), n);
  SDP_CUDA_LAUNCH_CHECK("accumulate_bf16_into_f32_kernel");
}

}  // namespace sdp::cuda
