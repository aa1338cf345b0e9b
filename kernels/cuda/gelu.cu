// CUDA GELU (erf form) and stochastic depth's per-sample scale: elementwise
// maps in f32, walking their tensors in 16-byte packs when the pointers
// (and, for the per-sample scale, the sample length) allow, element by
// element otherwise; every loop is grid-stride. erff and expf (not the fast
// intrinsics): GELU's derivative sits next to exact CPU references.
#include "kernels/cuda/gelu.h"

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/vec.cuh"

namespace sdp::cuda {
namespace {

using namespace vec;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x).
__device__ __forceinline__ float gelu_grad(float x) {
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

// y = gelu(x), in f32.
struct GeluOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T x) const {
    return from_f32<T>(gelu(to_f32(x)));
  }
};

// dx = dy gelu'(x), in f32 (map2 over dy, x; dx may alias dy).
struct GeluGradOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T dy, T x) const {
    return from_f32<T>(to_f32(dy) * gelu_grad(to_f32(x)));
  }
};

// y [samples, inner] = x * factors[sample], K elements per pack (inner % K
// == 0, so a pack never straddles two samples). y may alias x.
template <typename T, int K>
__global__ void scale_per_sample_kernel(const T* x, const float* factors, T* y, int64_t inner,
                                        int64_t packs) {
  using V = Vec<T, K>;
  const int64_t units = inner / K;  // packs per sample
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const float f = factors[i / units];
    const V v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>(to_f32(v.v[j]) * f);
    yv[i] = out;
  }
}

}  // namespace

void gelu_forward(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  on_cuda_float(x.dtype(), "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    launch_map(device_ptr<T>(x), device_ptr<T>(y), n, GeluOp{}, compute_stream());
    SDP_CUDA_LAUNCH_CHECK("gelu_forward");
  });
}

void gelu_backward_input(const Tensor& dy, const Tensor& x, Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  on_cuda_float(x.dtype(), "gelu_backward_input", [&](auto tag) {
    using T = decltype(tag);
    launch_map2(device_ptr<T>(dy), device_ptr<T>(x), device_ptr<T>(dx), n, GeluGradOp{},
                compute_stream());
    SDP_CUDA_LAUNCH_CHECK("gelu_backward_input");
  });
}

void scale_per_sample(const Tensor& x, const Tensor& factors, Tensor& y) {
  const int64_t n = x.numel(), samples = x.size(0);
  if (n == 0) return;
  const int64_t inner = n / samples;
  on_cuda_float(x.dtype(), "scale_per_sample", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    T* py = device_ptr<T>(y);
    const float* pf = factors.data<float>();
    cudaStream_t stream = compute_stream();
    if (inner % K == 0 && aligned16(px) && aligned16(py))
      launch<scale_per_sample_kernel<T, K>>(blocks_for(n / K), kThreads, 0, stream, px, pf, py,
          inner, n / K);
    else
      launch<scale_per_sample_kernel<T, 1>>(blocks_for(n), kThreads, 0, stream, px, pf, py, inner,
          n);
    SDP_CUDA_LAUNCH_CHECK("scale_per_sample_kernel");
  });
}

}  // namespace sdp::cuda
