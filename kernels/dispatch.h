#pragma once
// Device and dtype dispatch shared by every op in kernels/ops_*.cpp.
#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace sdp::ops::detail {

// True when the op must compute on the host. Meta tensors compute nothing;
// CUDA tensors are routed by the caller to kernels/cuda when that backend is
// built (SDP_HAS_CUDA_KERNELS), and are an error otherwise.
inline bool runs_on_cpu(const Tensor& t, const char* op) {
  switch (t.device()) {
    case Device::cpu: return true;
    case Device::meta: return false;
    case Device::cuda:
      fail(op, ": no CUDA kernel for this op in this build; use --device cpu or meta");
  }
  return false;
}

// Calls f(T{}) with T = float or double according to dtype.
template <typename F>
void on_float_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    default:
      fail(op, ": unsupported dtype ", dtype_name(dtype), " on the CPU (valid: f32, f64)");
  }
}

}  // namespace sdp::ops::detail
