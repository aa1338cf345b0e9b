#pragma once
// The sum of one value per thread over a whole block, returned to every
// thread. Every thread adds the warp sums in the same order, so all agree
// bit for bit and the result does not depend on scheduling. blockDim.x must
// be a multiple of 32, and every thread of the block must call it (it holds
// two barriers). Device code only.

namespace sdp::cuda {

template <typename T>
__device__ __forceinline__ T block_sum_all(T v) {
  __shared__ T warp_sums[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  T total = 0;
  const int warps = static_cast<int>(blockDim.x / 32);
  for (int w = 0; w < warps; ++w) total += warp_sums[w];
  __syncthreads();  // the next call rewrites warp_sums
  return total;
}

}  // namespace sdp::cuda
