// CUDA rotary position embedding, rotate-half convention. Each thread owns
// whole pairs (i, i + Dh/2): it reads both before writing either, so y may
// alias x.
#include "kernels/cuda/rope.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int kPairLanes = 32;  // threadIdx.x: pairs of one head, coalesced
constexpr int kHeadRows = 8;    // threadIdx.y: heads side by side per block
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// A head row is one (b, t, h): rows = B * T * H, each of 2 * half elements.
template <typename T>
__global__ void rope_kernel(const T* x, const float* cos, const float* sin, T* y, int64_t rows,
                            int64_t seq, int64_t heads, int64_t half, float sign) {
  const int64_t row_step = static_cast<int64_t>(gridDim.x) * kHeadRows;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kHeadRows + threadIdx.y; row < rows;
       row += row_step) {
    const int64_t t = (row / heads) % seq;
    const T* xr = x + row * 2 * half;
    T* yr = y + row * 2 * half;
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (int64_t i = threadIdx.x; i < half; i += kPairLanes) {
      const float lo = to_f32(xr[i]), hi = to_f32(xr[i + half]);
      const float cs = c[i], sn = sign * s[i];
      yr[i] = from_f32<T>(lo * cs - hi * sn);
      yr[i + half] = from_f32<T>(hi * cs + lo * sn);
    }
  }
}

}  // namespace

void rope_apply(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y, int sign) {
  const int64_t seq = x.size(1), heads = x.size(2), half = x.size(3) / 2;
  const int64_t rows = x.size(0) * seq * heads;
  if (rows == 0 || half == 0) return;
  const int blocks =
      static_cast<int>(std::min(kMaxBlocks, (rows + kHeadRows - 1) / kHeadRows));
  on_cuda_float(x.dtype(), sign > 0 ? "rope_forward" : "rope_backward_input", [&](auto tag) {
    using T = decltype(tag);
    launch<rope_kernel<T>>(blocks, dim3(kPairLanes, kHeadRows), 0, compute_stream(),
        device_ptr<T>(x), cos.data<float>(), sin.data<float>(), device_ptr<T>(y), rows, seq,
        heads, half, static_cast<float>(sign));
    SDP_CUDA_LAUNCH_CHECK("rope_kernel");
  });
}

}  // namespace sdp::cuda
