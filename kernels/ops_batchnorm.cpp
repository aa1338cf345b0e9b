// Dispatch for batch normalization (ops.h). x, y, dy, dx [B, C, H, W] and
// weight, bias [C] hold the activation dtype; save_mean, save_invstd,
// running_mean, running_var, dweight and dbias [C] hold accum_dtype of it
// (f32 next to bf16). Elementwise work: no FLOPs counted.
#include "kernels/cpu/batchnorm.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/batchnorm.h"
#endif

namespace sdp::ops {

namespace {

// Checks x [B, C, H, W]; returns its dims as [B, C, H W].
cpu::BatchNormDims check_input(const Tensor& x, const char* op) {
  detail::expect_float(x, op, "x");
  expect_contiguous(x, op, "x");
  if (x.ndim() != 4) fail(op, ": x must be [B, C, H, W], got ", x.describe());
  return {x.size(0), x.size(1), x.size(2) * x.size(3)};
}

// A parameter (weight, bias) [C] in x's dtype.
void check_param(const Tensor& t, const Tensor& x, const char* op, const char* arg) {
  detail::expect_like(t, x, op, arg);
  expect_shape(t, Shape{x.size(1)}, op, arg);
}

// A statistic or parameter gradient [C] in accum_dtype(x).
void check_accum(const Tensor& t, const Tensor& x, const char* op, const char* arg) {
  expect_same_device(t, x, op);
  detail::expect_accum(t, x.dtype(), op, arg);
  expect_contiguous(t, op, arg);
  expect_shape(t, Shape{x.size(1)}, op, arg);
}

void check_eps(double eps, const char* op) {
  if (!(eps >= 0)) fail(op, ": eps must be >= 0, got ", eps);
}

}  // namespace

void batchnorm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             double eps, double momentum, Tensor& y, Tensor& save_mean,
                             Tensor& save_invstd, Tensor& running_mean, Tensor& running_var) {
  constexpr const char* op = "batchnorm_forward_train";
  const cpu::BatchNormDims d = check_input(x, op);
  check_param(weight, x, op, "weight");
  check_param(bias, x, op, "bias");
  detail::expect_like_shaped(y, x, op, "y");
  check_accum(save_mean, x, op, "save_mean");
  check_accum(save_invstd, x, op, "save_invstd");
  check_accum(running_mean, x, op, "running_mean");
  check_accum(running_var, x, op, "running_var");
  check_eps(eps, op);
  if (!(momentum >= 0 && momentum <= 1))
    fail(op, ": momentum must be in [0, 1], got ", momentum);
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::batchnorm_forward_train(x, weight, bias, eps, momentum, y, save_mean,
                                                save_invstd, running_mean, running_var));
      return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activation dtype itself: one T throughout.
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::batchnorm_forward_train<T>(x.data<T>(), weight.data<T>(), bias.data<T>(), eps,
                                    momentum, y.data<T>(), save_mean.data<T>(),
                                    save_invstd.data<T>(), running_mean.data<T>(),
                                    running_var.data<T>(), d);
  });
}

void batchnorm_forward_batch_stats(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   double eps, Tensor& y, Tensor& save_mean,
                                   Tensor& save_invstd) {
  constexpr const char* op = "batchnorm_forward_batch_stats";
  const cpu::BatchNormDims d = check_input(x, op);
  check_param(weight, x, op, "weight");
  check_param(bias, x, op, "bias");
  detail::expect_like_shaped(y, x, op, "y");
  check_accum(save_mean, x, op, "save_mean");
  check_accum(save_invstd, x, op, "save_invstd");
  check_eps(eps, op);
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::batchnorm_forward_batch_stats(x, weight, bias, eps, y, save_mean,
                                                      save_invstd));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    // Null running statistics: the training kernel computes and writes the
    // same batch statistics and output, and nothing else.
    cpu::batchnorm_forward_train<T>(x.data<T>(), weight.data<T>(), bias.data<T>(), eps,
                                    /*momentum=*/0.0, y.data<T>(), save_mean.data<T>(),
                                    save_invstd.data<T>(), nullptr, nullptr, d);
  });
}

void batchnorm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps,
                            Tensor& y) {
  constexpr const char* op = "batchnorm_forward_eval";
  const cpu::BatchNormDims d = check_input(x, op);
  check_param(weight, x, op, "weight");
  check_param(bias, x, op, "bias");
  check_accum(running_mean, x, op, "running_mean");
  check_accum(running_var, x, op, "running_var");
  detail::expect_like_shaped(y, x, op, "y");
  check_eps(eps, op);
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::batchnorm_forward_eval(x, weight, bias, running_mean, running_var, eps,
                                               y));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::batchnorm_forward_eval<T>(x.data<T>(), weight.data<T>(), bias.data<T>(),
                                   running_mean.data<T>(), running_var.data<T>(), eps,
                                   y.data<T>(), d);
  });
}

void batchnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx) {
  constexpr const char* op = "batchnorm_backward_input";
  const cpu::BatchNormDims d = check_input(x, op);
  detail::expect_like_shaped(dy, x, op, "dy");
  check_param(weight, x, op, "weight");
  check_accum(save_mean, x, op, "save_mean");
  check_accum(save_invstd, x, op, "save_invstd");
  detail::expect_like_shaped(dx, x, op, "dx");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::batchnorm_backward_input(dy, x, weight, save_mean, save_invstd, dx));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::batchnorm_backward_input<T>(dy.data<T>(), x.data<T>(), weight.data<T>(),
                                     save_mean.data<T>(), save_invstd.data<T>(), dx.data<T>(),
                                     d);
  });
}

void batchnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                               const Tensor& save_invstd, Tensor& dweight, Tensor& dbias) {
  constexpr const char* op = "batchnorm_backward_weight";
  const cpu::BatchNormDims d = check_input(x, op);
  detail::expect_like_shaped(dy, x, op, "dy");
  check_accum(save_mean, x, op, "save_mean");
  check_accum(save_invstd, x, op, "save_invstd");
  check_accum(dweight, x, op, "dweight");
  check_accum(dbias, x, op, "dbias");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::batchnorm_backward_weight(dy, x, save_mean, save_invstd, dweight, dbias));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::batchnorm_backward_weight<T>(dy.data<T>(), x.data<T>(), save_mean.data<T>(),
                                      save_invstd.data<T>(), dweight.data<T>(), dbias.data<T>(),
                                      d);
  });
}

}  // namespace sdp::ops
