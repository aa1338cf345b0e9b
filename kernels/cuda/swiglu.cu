// CUDA SwiGLU: elementwise, computed in f32, in 16-byte packs when every
// pointer is 16-byte aligned (element by element otherwise), grid-stride.
#include "kernels/cuda/swiglu.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

// K consecutive elements moved by one load or store (16 bytes when packed).
template <typename T, int K>
struct alignas(sizeof(T) * K) Vec {
  T v[K];
};

template <typename T>
constexpr int kPack = static_cast<int>(16 / sizeof(T));

// expf(-g) overflows to inf below g ~ -88, giving exactly 0: the right limit.
__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// Vectors of K elements cover [0, n - n % K); the tail (only when K > 1) is
// done element by element by the first threads of the grid.
template <typename T, int K>
__global__ void swiglu_forward_kernel(const T* gate, const T* up, T* out, int64_t n) {
  using V = Vec<T, K>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t units = n / K;
  for (int64_t k = first; k < units; k += stride) {
    const V g = reinterpret_cast<const V*>(gate)[k], u = reinterpret_cast<const V*>(up)[k];
    V o;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const float gf = to_f32(g.v[j]);
      o.v[j] = from_f32<T>(gf * sigmoid(gf) * to_f32(u.v[j]));
    }
    reinterpret_cast<V*>(out)[k] = o;
  }
  for (int64_t i = units * K + first; i < n; i += stride) {
    const float gf = to_f32(gate[i]);
    out[i] = from_f32<T>(gf * sigmoid(gf) * to_f32(up[i]));
  }
}

// d out / d gate = up * s * (1 + g (1 - s)), d out / d up = g s, s = sigmoid(g).
__device__ __forceinline__ void swiglu_grad(float d, float g, float u, float& dg, float& du) {
  const float s = sigmoid(g);
  const float ds = d * s;
  dg = ds * u * (1.0f + g * (1.0f - s));
  du = ds * g;
}

template <typename T, int K>
__global__ void swiglu_backward_kernel(const T* dout, const T* gate, const T* up, T* dgate,
                                       T* dup, int64_t n) {
  using V = Vec<T, K>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t units = n / K;
  for (int64_t k = first; k < units; k += stride) {
    const V d = reinterpret_cast<const V*>(dout)[k];
    const V g = reinterpret_cast<const V*>(gate)[k];
    const V u = reinterpret_cast<const V*>(up)[k];
    V dg, du;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      float a, b;
      swiglu_grad(to_f32(d.v[j]), to_f32(g.v[j]), to_f32(u.v[j]), a, b);
      dg.v[j] = from_f32<T>(a);
      du.v[j] = from_f32<T>(b);
    }
    reinterpret_cast<V*>(dgate)[k] = dg;
    reinterpret_cast<V*>(dup)[k] = du;
  }
  for (int64_t i = units * K + first; i < n; i += stride) {
    float a, b;
    swiglu_grad(to_f32(dout[i]), to_f32(gate[i]), to_f32(up[i]), a, b);
    dgate[i] = from_f32<T>(a);
    dup[i] = from_f32<T>(b);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int blocks_for(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

}  // namespace

void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  on_cuda_float(gate.dtype(), "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* g = device_ptr<T>(gate);
    const T* u = device_ptr<T>(up);
    T* o = device_ptr<T>(out);
    cudaStream_t stream = compute_stream();
    if (aligned16(g) && aligned16(u) && aligned16(o)) {
      launch<swiglu_forward_kernel<T, K>>(blocks_for(n / K + 1), kThreads, 0, stream, g, u, o, n);
    } else {
      launch<swiglu_forward_kernel<T, 1>>(blocks_for(n), kThreads, 0, stream, g, u, o, n);
    }
    SDP_CUDA_LAUNCH_CHECK("swiglu_forward_kernel");
  });
}

void swiglu_backward_input(const Tensor& dout, const Tensor& gate, const Tensor& up,
                           Tensor& dgate, Tensor& dup) {
  const int64_t n = gate.numel();
  if (n == 0) return;
  on_cuda_float(gate.dtype(), "swiglu_backward_input", [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* d = device_ptr<T>(dout);
    const T* g = device_ptr<T>(gate);
    const T* u = device_ptr<T>(up);
    T* dg = device_ptr<T>(dgate);
    T* du = device_ptr<T>(dup);
    cudaStream_t stream = compute_stream();
    if (aligned16(d) && aligned16(g) && aligned16(u) && aligned16(dg) && aligned16(du)) {
      launch<swiglu_backward_kernel<T, K>>(blocks_for(n / K + 1), kThreads, 0, stream, d, g, u, dg,
          du, n);
    } else {
      launch<swiglu_backward_kernel<T, 1>>(blocks_for(n), kThreads, 0, stream, d, g, u, dg, du, n);
    }
    SDP_CUDA_LAUNCH_CHECK("swiglu_backward_kernel");
  });
}

}  // namespace sdp::cuda
