#pragma once
// Loads and stores between storage types (float, __nv_bfloat16) and the f32
// every kernel computes in, plus the mapping from sdp's host-side bf16 type
// to CUDA's. Device code only.
#include <cuda_bf16.h>

#include "engine/core/tensor.h"

namespace sdp::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);  // round to nearest even, as the host's bf16::from_float
}

// Device pointer of a tensor holding T (float or __nv_bfloat16). sdp::bf16
// and __nv_bfloat16 are both 16-bit bit patterns of the same format.
template <typename T>
T* device_ptr(const Tensor& t);
template <>
inline float* device_ptr<float>(const Tensor& t) { return t.data<float>(); }
template <>
inline __nv_bfloat16* device_ptr<__nv_bfloat16>(const Tensor& t) {
  return reinterpret_cast<__nv_bfloat16*>(t.data<bf16>());
}

// Calls f(T{}) with T = float or __nv_bfloat16 according to dtype; other
// dtypes are an error naming the op (host code).
template <typename F>
void on_cuda_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
    default:
      fail(op, ": unsupported dtype ", dtype_name(dtype), " on CUDA (valid: f32, bf16)");
  }
}

}  // namespace sdp::cuda
