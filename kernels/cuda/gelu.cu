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
#include "kernels/cuda/stream.h"
#include "kernels/cuda/swin_common.cuh"

namespace sdp::cuda {
namespace {

using namespace swin_detail;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x).
__device__ __forceinline__ float gelu_grad(float x) {
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

// y = gelu(x): packs [0, n / K), then the n % K < K elements left over, one
// per thread of the first warp.
template <typename T, int K>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n) {
  using V = Vec<T, K>;
  const int64_t packs = n / K;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const V v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>(gelu(to_f32(v.v[j])));
    yv[i] = out;
  }
  const int64_t rest = packs * K + first_index();
  if (rest < n) y[rest] = from_f32<T>(gelu(to_f32(x[rest])));
}

// dx = dy gelu'(x); dx may alias dy (each element read before the same
// thread writes it).
template <typename T, int K>
__global__ void gelu_backward_input_kernel(const T* dy, const T* x, T* dx, int64_t n) {
  using V = Vec<T, K>;
  const int64_t packs = n / K;
  const V* dyv = reinterpret_cast<const V*>(dy);
  const V* xv = reinterpret_cast<const V*>(x);
  V* dxv = reinterpret_cast<V*>(dx);
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const V g = dyv[i], v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j)
      out.v[j] = from_f32<T>(to_f32(g.v[j]) * gelu_grad(to_f32(v.v[j])));
    dxv[i] = out;
  }
  const int64_t rest = packs * K + first_index();
  if (rest < n) dx[rest] = from_f32<T>(to_f32(dy[rest]) * gelu_grad(to_f32(x[rest])));
}

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
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    T* py = device_ptr<T>(y);
    cudaStream_t stream = compute_stream();
    if (aligned16(px) && aligned16(py))
      gelu_forward_kernel<T, K><<<blocks_for(n / K + 1), kThreads, 0, stream>>>(px, py, n);
    else
      gelu_forward_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(px, py, n);
    SDP_CUDA_LAUNCH_CHECK("gelu_forward_kernel");
  });
}

void gelu_backward_input(const Tensor& dy, const Tensor& x, Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  on_cuda_float(x.dtype(), "gelu_backward_input", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    const T* px = device_ptr<T>(x);
    T* pdx = device_ptr<T>(dx);
    cudaStream_t stream = compute_stream();
    if (aligned16(pdy) && aligned16(px) && aligned16(pdx))
      gelu_backward_input_kernel<T, K>
          <<<blocks_for(n / K + 1), kThreads, 0, stream>>>(pdy, px, pdx, n);
    else
      gelu_backward_input_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(pdy, px, pdx, n);
    SDP_CUDA_LAUNCH_CHECK("gelu_backward_input_kernel");
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
      scale_per_sample_kernel<T, K>
          <<<blocks_for(n / K), kThreads, 0, stream>>>(px, pf, py, inner, n / K);
    else
      scale_per_sample_kernel<T, 1><<<blocks_for(n), kThreads, 0, stream>>>(px, pf, py, inner, n);
    SDP_CUDA_LAUNCH_CHECK("scale_per_sample_kernel");
  });
}

}  // namespace sdp::cuda
