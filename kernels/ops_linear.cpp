// Dispatch for the bias-free linear layer. x may be [..., in]; y is then
// [..., out] with the same leading dims (viewed as [N, in] x [in, out]).
#include "kernels/cpu/linear.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

namespace sdp::ops {

namespace {

// Checks w [out, in] against the activation `act` [..., in] and the other
// activation `other` [..., out], both with the same leading dims.
void check_linear(const Tensor& act, const char* act_arg, const Tensor& w, const char* w_arg,
                  const Tensor& other, const char* other_arg, const char* op) {
  detail::expect_float(w, op, w_arg);
  expect_contiguous(w, op, w_arg);
  if (w.ndim() != 2) fail(op, ": ", w_arg, " must be [out, in], got ", w.describe());
  detail::expect_like(act, w, op, act_arg);
  detail::leading_rows(act, op, act_arg);
  if (act.size(-1) != w.size(1))
    fail(op, ": ", act_arg, " has shape ", act.shape().str(), ", its last dim must equal ",
         w_arg, "'s in = ", w.size(1), " (", w_arg, " is ", w.shape().str(), ")");
  detail::expect_like(other, w, op, other_arg);
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
  check_linear(x, "x", w, "w", y, "y", op);
  count_flops(2.0 * rows(x) * static_cast<double>(w.numel()));
  if (!detail::runs_on_cpu(w, op)) return;
  detail::on_float_dtype(w.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_forward<T>(x.data<T>(), w.data<T>(), y.data<T>(), rows(x),
                           static_cast<int>(w.size(1)), static_cast<int>(w.size(0)));
  });
}

void linear_backward_input(const Tensor& dy, const Tensor& w, Tensor& dx) {
  constexpr const char* op = "linear_backward_input";
  check_linear(dx, "dx", w, "w", dy, "dy", op);
  count_flops(2.0 * rows(dx) * static_cast<double>(w.numel()));
  if (!detail::runs_on_cpu(w, op)) return;
  detail::on_float_dtype(w.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_backward_input<T>(dy.data<T>(), w.data<T>(), dx.data<T>(), rows(dx),
                                  static_cast<int>(w.size(1)), static_cast<int>(w.size(0)));
  });
}

void linear_backward_weight(const Tensor& dy, const Tensor& x, Tensor& dw) {
  constexpr const char* op = "linear_backward_weight";
  check_linear(x, "x", dw, "dw", dy, "dy", op);
  count_flops(2.0 * rows(x) * static_cast<double>(dw.numel()));
  if (!detail::runs_on_cpu(dw, op)) return;
  detail::on_float_dtype(dw.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::linear_backward_weight<T>(dy.data<T>(), x.data<T>(), dw.data<T>(), rows(x),
                                   static_cast<int>(dw.size(1)), static_cast<int>(dw.size(0)));
  });
}

}  // namespace sdp::ops
