#pragma once
// Device and dtype dispatch shared by every op in kernels/ops_*.cpp.
//
// Each op checks its arguments once, for every device, then asks where to
// compute:
//   switch (detail::backend_of(t, op)) {
//     case detail::Backend::meta: return;            // shapes checked, nothing computed
//     case detail::Backend::cuda: SDP_ON_CUDA(cuda::the_op(...)); return;
//     case detail::Backend::cpu: break;              // the host kernels below
//   }
// backend_of fails with a clear message for cuda tensors in a build without
// the CUDA kernels, so SDP_ON_CUDA may expand to nothing there.
#include "engine/core/error.h"
#include "engine/core/tensor.h"

#ifdef SDP_HAVE_CUDA
#define SDP_ON_CUDA(...) \
  do {                   \
    __VA_ARGS__;         \
  } while (0)
#else
#define SDP_ON_CUDA(...) \
  do {                   \
  } while (0)
#endif

namespace sdp::ops::detail {

enum class Backend { cpu, cuda, meta };

inline Backend backend_of(const Tensor& t, [[maybe_unused]] const char* op) {
  switch (t.device()) {
    case Device::cpu: return Backend::cpu;
    case Device::meta: return Backend::meta;
    case Device::cuda:
#ifdef SDP_HAVE_CUDA
      return Backend::cuda;
#else
      fail(op, ": this build has no CUDA kernels (no toolkit was found when it was "
           "configured); use --device cpu or meta");
#endif
  }
  return Backend::meta;
}

// True when the op must compute on the host (the form the ops used before
// the CUDA backend; ops with a CUDA twin use backend_of).
inline bool runs_on_cpu(const Tensor& t, const char* op) {
  switch (t.device()) {
    case Device::cpu: return true;
    case Device::meta: return false;
    case Device::cuda:
      fail(op, ": no CUDA kernel for this op in this build; use --device cpu or meta");
  }
  return false;
}

// Calls f(T{}) with T = float or double according to dtype (the CPU kernels).
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
