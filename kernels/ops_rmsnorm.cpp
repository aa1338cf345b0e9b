// Dispatch for RMSNorm. x may be [..., D]; rstd is then [...] (x's leading
// dims), so [B, T, D] activations need no flattening.
#include "kernels/cpu/rmsnorm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

namespace sdp::ops {

namespace {

// Checks x [..., D], weight [D], rstd [...]; returns D.
int64_t check_rmsnorm(const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const char* op, const char* weight_arg) {
  detail::expect_float(x, op, "x");
  expect_contiguous(x, op, "x");
  detail::leading_rows(x, op, "x");
  const int64_t d = x.size(-1);
  detail::expect_like(weight, x, op, weight_arg);
  expect_shape(weight, Shape{d}, op, weight_arg);
  detail::expect_like(rstd, x, op, "rstd");
  expect_shape(rstd, detail::without_last_dim(x), op, "rstd");
  return d;
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& y,
                     Tensor& rstd) {
  constexpr const char* op = "rmsnorm_forward";
  const int64_t d = check_rmsnorm(x, weight, rstd, op, "weight");
  detail::expect_like(y, x, op, "y");
  expect_shape(y, x.shape(), op, "y");
  if (!(eps >= 0)) fail(op, ": eps must be >= 0, got ", eps);
  if (!detail::runs_on_cpu(x, op)) return;
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_forward<T>(x.data<T>(), weight.data<T>(), eps, y.data<T>(), rstd.data<T>(),
                            detail::leading_rows(x, op, "x"), d);
  });
}

void rmsnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx) {
  constexpr const char* op = "rmsnorm_backward_input";
  const int64_t d = check_rmsnorm(x, weight, rstd, op, "weight");
  detail::expect_like(dy, x, op, "dy");
  expect_shape(dy, x.shape(), op, "dy");
  detail::expect_like(dx, x, op, "dx");
  expect_shape(dx, x.shape(), op, "dx");
  if (!detail::runs_on_cpu(x, op)) return;
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_backward_input<T>(dy.data<T>(), x.data<T>(), weight.data<T>(), rstd.data<T>(),
                                   dx.data<T>(), detail::leading_rows(x, op, "x"), d);
  });
}

void rmsnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                             Tensor& dweight) {
  constexpr const char* op = "rmsnorm_backward_weight";
  const int64_t d = check_rmsnorm(x, dweight, rstd, op, "dweight");
  detail::expect_like(dy, x, op, "dy");
  expect_shape(dy, x.shape(), op, "dy");
  if (!detail::runs_on_cpu(x, op)) return;
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_backward_weight<T>(dy.data<T>(), x.data<T>(), rstd.data<T>(),
                                    dweight.data<T>(), detail::leading_rows(x, op, "x"), d);
  });
}

}  // namespace sdp::ops
