// Dispatch for RMSNorm. x may be [..., D]; rstd is then [...] (x's leading
// dims), so [B, T, D] activations need no flattening. Dtypes: x, weight, y,
// dy, dx hold the activation dtype; rstd (a statistic) and dweight (a weight
// gradient) hold accum_dtype of it (f32 next to bf16).
#include "kernels/cpu/rmsnorm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/rmsnorm.h"
#endif

namespace sdp::ops {

namespace {

// Checks x [..., D] and rstd [...]; returns D.
int64_t check_rmsnorm(const Tensor& x, const Tensor& rstd, const char* op) {
  detail::expect_float(x, op, "x");
  expect_contiguous(x, op, "x");
  detail::leading_rows(x, op, "x");
  expect_same_device(rstd, x, op);
  detail::expect_accum(rstd, x.dtype(), op, "rstd");
  expect_contiguous(rstd, op, "rstd");
  expect_shape(rstd, detail::without_last_dim(x), op, "rstd");
  return x.size(-1);
}

// weight [D] in x's dtype.
void check_weight(const Tensor& weight, const Tensor& x, int64_t d, const char* op) {
  detail::expect_like(weight, x, op, "weight");
  expect_shape(weight, Shape{d}, op, "weight");
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, Tensor& y,
                     Tensor& rstd) {
  constexpr const char* op = "rmsnorm_forward";
  const int64_t d = check_rmsnorm(x, rstd, op);
  check_weight(weight, x, d, op);
  detail::expect_like_shaped(y, x, op, "y");
  if (!(eps >= 0)) fail(op, ": eps must be >= 0, got ", eps);
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::rmsnorm_forward(x, weight, eps, y, rstd)); return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activation dtype itself: one T throughout.
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_forward<T>(x.data<T>(), weight.data<T>(), eps, y.data<T>(), rstd.data<T>(),
                            detail::leading_rows(x, op, "x"), d);
  });
}

void rmsnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                            const Tensor& rstd, Tensor& dx) {
  constexpr const char* op = "rmsnorm_backward_input";
  const int64_t d = check_rmsnorm(x, rstd, op);
  check_weight(weight, x, d, op);
  detail::expect_like_shaped(dy, x, op, "dy");
  detail::expect_like_shaped(dx, x, op, "dx");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::rmsnorm_backward_input(dy, x, weight, rstd, dx));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_backward_input<T>(dy.data<T>(), x.data<T>(), weight.data<T>(), rstd.data<T>(),
                                   dx.data<T>(), detail::leading_rows(x, op, "x"), d);
  });
}

void rmsnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& rstd,
                             Tensor& dweight) {
  constexpr const char* op = "rmsnorm_backward_weight";
  const int64_t d = check_rmsnorm(x, rstd, op);
  detail::expect_like_shaped(dy, x, op, "dy");
  expect_same_device(dweight, x, op);
  detail::expect_accum(dweight, x.dtype(), op, "dweight");
  expect_contiguous(dweight, op, "dweight");
  expect_shape(dweight, Shape{d}, op, "dweight");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::rmsnorm_backward_weight(dy, x, rstd, dweight));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::rmsnorm_backward_weight<T>(dy.data<T>(), x.data<T>(), rstd.data<T>(),
                                    dweight.data<T>(), detail::leading_rows(x, op, "x"), d);
  });
}

}  // namespace sdp::ops
