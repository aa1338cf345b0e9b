// Dispatch for LayerNorm. x may be [..., D]; mean and rstd are then [...]
// (x's leading dims), so [B, H, W, C] tokens need no flattening. Dtypes: x,
// weight, bias, y, dy, dx hold the activation dtype; mean, rstd (statistics)
// and dweight, dbias (weight gradients) hold accum_dtype of it (f32 next to
// bf16). Normalization is not a matmul: no FLOPs counted.
#include "kernels/cpu/layernorm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/layernorm.h"
#endif

namespace sdp::ops {

namespace {

// Checks x [..., D] and its statistics mean, rstd [...]; returns D.
int64_t check_layernorm(const Tensor& x, const Tensor& mean, const Tensor& rstd,
                        const char* op) {
  detail::expect_float(x, op, "x");
  expect_contiguous(x, op, "x");
  detail::leading_rows(x, op, "x");
  for (const Tensor* s : {&mean, &rstd}) {
    const char* arg = s == &mean ? "mean" : "rstd";
    expect_same_device(*s, x, op);
    detail::expect_accum(*s, x.dtype(), op, arg);
    expect_contiguous(*s, op, arg);
    expect_shape(*s, detail::without_last_dim(x), op, arg);
  }
  return x.size(-1);
}

// A parameter [D] in x's dtype (weight, bias).
void check_param(const Tensor& p, const Tensor& x, int64_t d, const char* op, const char* arg) {
  detail::expect_like(p, x, op, arg);
  expect_shape(p, Shape{d}, op, arg);
}

// A weight gradient [D] in the accum dtype (dweight, dbias).
void check_param_grad(const Tensor& g, const Tensor& x, int64_t d, const char* op,
                      const char* arg) {
  expect_same_device(g, x, op);
  detail::expect_accum(g, x.dtype(), op, arg);
  expect_contiguous(g, op, arg);
  expect_shape(g, Shape{d}, op, arg);
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                       Tensor& y, Tensor& mean, Tensor& rstd) {
  constexpr const char* op = "layernorm_forward";
  const int64_t d = check_layernorm(x, mean, rstd, op);
  check_param(weight, x, d, op, "weight");
  check_param(bias, x, d, op, "bias");
  detail::expect_like_shaped(y, x, op, "y");
  if (!(eps >= 0)) fail(op, ": eps must be >= 0, got ", eps);
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::layernorm_forward(x, weight, bias, eps, y, mean, rstd));
      return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activation dtype itself: one T throughout.
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::layernorm_forward<T>(x.data<T>(), weight.data<T>(), bias.data<T>(), eps, y.data<T>(),
                              mean.data<T>(), rstd.data<T>(), detail::leading_rows(x, op, "x"),
                              d);
  });
}

void layernorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& mean, const Tensor& rstd, Tensor& dx) {
  constexpr const char* op = "layernorm_backward_input";
  const int64_t d = check_layernorm(x, mean, rstd, op);
  check_param(weight, x, d, op, "weight");
  detail::expect_like_shaped(dy, x, op, "dy");
  detail::expect_like_shaped(dx, x, op, "dx");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::layernorm_backward_input(dy, x, weight, mean, rstd, dx));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::layernorm_backward_input<T>(dy.data<T>(), x.data<T>(), weight.data<T>(),
                                     mean.data<T>(), rstd.data<T>(), dx.data<T>(),
                                     detail::leading_rows(x, op, "x"), d);
  });
}

void layernorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& mean,
                               const Tensor& rstd, Tensor& dweight, Tensor& dbias) {
  constexpr const char* op = "layernorm_backward_weight";
  const int64_t d = check_layernorm(x, mean, rstd, op);
  detail::expect_like_shaped(dy, x, op, "dy");
  check_param_grad(dweight, x, d, op, "dweight");
  check_param_grad(dbias, x, d, op, "dbias");
  if (dweight.raw() != nullptr && dweight.raw() == dbias.raw())
    fail(op, ": dweight and dbias must be distinct tensors (both are accumulated)");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::layernorm_backward_weight(dy, x, mean, rstd, dweight, dbias));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::layernorm_backward_weight<T>(dy.data<T>(), x.data<T>(), mean.data<T>(), rstd.data<T>(),
                                      dweight.data<T>(), dbias.data<T>(),
                                      detail::leading_rows(x, op, "x"), d);
  });
}

}  // namespace sdp::ops
