// Dispatch for GELU (erf form) and stochastic depth's per-sample scale
// (ops.h). Activations hold one float dtype; the scale factors hold
// accum_dtype of it (f32 next to bf16). Elementwise work: no FLOPs counted.
#include "kernels/cpu/gelu.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/gelu.h"
#endif

namespace sdp::ops {

void gelu_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "gelu_forward";
  detail::expect_float_contiguous(x, op, "x");
  detail::expect_like_shaped(y, x, op, "y");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::gelu_forward(x, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::gelu_forward<T>(x.data<T>(), y.data<T>(), x.numel());
  });
}

void gelu_backward_input(const Tensor& dy, const Tensor& x, Tensor& dx) {
  constexpr const char* op = "gelu_backward_input";
  detail::expect_float_contiguous(x, op, "x");
  detail::expect_like_shaped(dy, x, op, "dy");
  detail::expect_like_shaped(dx, x, op, "dx");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::gelu_backward_input(dy, x, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::gelu_backward_input<T>(dy.data<T>(), x.data<T>(), dx.data<T>(), x.numel());
  });
}

void scale_per_sample(const Tensor& x, const Tensor& factors, Tensor& y) {
  constexpr const char* op = "scale_per_sample";
  detail::expect_float_contiguous(x, op, "x");
  if (x.ndim() < 1) fail(op, ": x must be [B, ...], got ", x.describe());
  detail::expect_like_shaped(y, x, op, "y");
  expect_same_device(factors, x, op);
  detail::expect_accum(factors, x.dtype(), op, "factors");
  expect_contiguous(factors, op, "factors");
  expect_shape(factors, Shape{x.size(0)}, op, "factors");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::scale_per_sample(x, factors, y)); return;
    case detail::Backend::cpu: break;
  }
  const int64_t samples = x.size(0), inner = samples == 0 ? 0 : x.numel() / samples;
  // On the CPU accum_dtype is x's own dtype.
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::scale_per_sample<T>(x.data<T>(), factors.data<T>(), y.data<T>(), samples, inner);
  });
}

}  // namespace sdp::ops
