// Dispatch for the bias-free linear layer. x may be [..., in]; y is then
// [..., out] with the same leading dims (viewed as [N, in] x [in, out]).
#include "kernels/cpu/linear.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif

namespace sdp::ops {

namespace {

// Checks the activation `act` [..., in], the other activation `other`
// [..., out] (same leading dims, device and dtype) and the weight-shaped
// `w` [out, in]. `w` holds the activations' dtype, except a weight gradient
// (`w_is_gradient`), which holds accum_dtype of it: f32 next to bf16.
void check_linear(const Tensor& act, const char* act_arg, const Tensor& w, const char* w_arg,
                  bool w_is_gradient, const Tensor& other, const char* other_arg,
                  const char* op) {
  detail::expect_float(act, op, act_arg);
  expect_contiguous(act, op, act_arg);
  detail::leading_rows(act, op, act_arg);
  detail::expect_like(other, act, op, other_arg);
  expect_same_device(w, act, op);
  expect_dtype(w, w_is_gradient ? accum_dtype(act.dtype()) : act.dtype(), op, w_arg);
  expect_contiguous(w, op, w_arg);
  if (w.ndim() != 2) fail(op, ": ", w_arg, " must be [out, in], got ", w.describe());
  if (act.size(-1) != w.size(1))
    fail(op, ": ", act_arg, " has shape ", act.shape().str(), ", its last dim must equal ",
         w_arg, "'s in = ", w.size(1), " (", w_arg, " is ", w.shape().str(), ")");
  expect_shape(other, detail::with_last_dim(act, w.size(0)), op, other_arg);
  detail::blas_dim(detail::leading_rows(act, op, act_arg), op);
  detail::blas_dim(w.size(0), op);
  detail::blas_dim(w.size(1), op);
}

// N of an activation [..., features]; check_linear has bounded it to int.
int rows(const Tensor& act) {
  return static_cast<int>(act.size(-1) == 0 ? 0 : act.numel() / act.size(-1));
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& w, Tensor& y) {
  constexpr const char* op = "linear_forward";
  check_linear(x, "x", w, "w", false, y, "y", op);
  count_flops(2.0 * rows(x) * static_cast<double>(w.numel()));
  switch (detail::backend_of(w, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::linear_forward(x, w, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(w.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_forward<T>(x.data<T>(), w.data<T>(), y.data<T>(), rows(x),
                           static_cast<int>(w.size(1)), static_cast<int>(w.size(0)));
  });
}

void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx) {
  constexpr const char* op = "linear_backward_input";
  check_linear(dx, "dx", w, "w", false, dy, "dy", op);
  count_flops(2.0 * rows(dx) * static_cast<double>(w.numel()));
  switch (detail::backend_of(w, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::linear_backward_input(dy, w, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(w.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_backward_input<T>(dy.data<T>(), w.data<T>(), dx.data<T>(), rows(dx),
                                  static_cast<int>(w.size(1)), static_cast<int>(w.size(0)));
  });
}

void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw) {
  constexpr const char* op = "linear_backward_weight";
  check_linear(x, "x", dw, "dw", true, dy, "dy", op);
  count_flops(2.0 * rows(x) * static_cast<double>(dw.numel()));
  switch (detail::backend_of(dw, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::linear_backward_weight(dy, x, dw)); return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activations' own dtype, so all three match.
  detail::on_float_dtype(dw.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_backward_weight<T>(dy.data<T>(), x.data<T>(), dw.data<T>(), rows(x),
                                   static_cast<int>(dw.size(1)), static_cast<int>(dw.size(0)));
  });
}

}  // namespace sdp::ops
