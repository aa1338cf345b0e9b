// Dispatch for ReLU, global average pooling and the bias of a linear layer
// (ops.h). Activations and the bias hold one float dtype; dbias holds
// accum_dtype of it (f32 next to bf16). Elementwise work: no FLOPs counted.
#include "kernels/cpu/activation.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/activation.h"
#endif

namespace sdp::ops {

namespace {

// x [B, C, H, W] with at least one pixel per plane (a mean over none is undefined).
void check_pool_input(const Tensor& x, const char* op, const char* arg) {
  if (x.ndim() != 4) fail(op, ": ", arg, " must be [B, C, H, W], got ", x.describe());
  if (x.size(2) < 1 || x.size(3) < 1)
    fail(op, ": ", arg, " ", x.shape().str(), " has no pixels to average (H, W must be >= 1)");
}

}  // namespace

void relu_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "relu_forward";
  detail::expect_float_contiguous(x, op, "x");
  detail::expect_like_shaped(y, x, op, "y");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::relu_forward(x, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::relu_forward<T>(x.data<T>(), y.data<T>(), x.numel());
  });
}

void relu_backward_input(const Tensor& dy, const Tensor& y, Tensor& dx) {
  constexpr const char* op = "relu_backward_input";
  detail::expect_float_contiguous(y, op, "y");
  detail::expect_like_shaped(dy, y, op, "dy");
  detail::expect_like_shaped(dx, y, op, "dx");
  switch (detail::backend_of(y, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::relu_backward_input(dy, y, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::relu_backward_input<T>(dy.data<T>(), y.data<T>(), dx.data<T>(), y.numel());
  });
}

void global_avg_pool_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "global_avg_pool_forward";
  detail::expect_float_contiguous(x, op, "x");
  check_pool_input(x, op, "x");
  detail::expect_like(y, x, op, "y");
  expect_shape(y, Shape{x.size(0), x.size(1)}, op, "y");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::global_avg_pool_forward(x, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::global_avg_pool_forward<T>(x.data<T>(), y.data<T>(), x.size(0) * x.size(1),
                                    x.size(2) * x.size(3));
  });
}

void global_avg_pool_backward_input(const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "global_avg_pool_backward_input";
  detail::expect_float_contiguous(dx, op, "dx");
  check_pool_input(dx, op, "dx");
  detail::expect_like(dy, dx, op, "dy");
  expect_shape(dy, Shape{dx.size(0), dx.size(1)}, op, "dy");
  switch (detail::backend_of(dx, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::global_avg_pool_backward_input(dy, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::global_avg_pool_backward_input<T>(dy.data<T>(), dx.data<T>(), dx.size(0) * dx.size(1),
                                           dx.size(2) * dx.size(3));
  });
}

void bias_add_forward(Tensor& y, const Tensor& bias) {
  constexpr const char* op = "bias_add_forward";
  detail::expect_float_contiguous(y, op, "y");
  const int64_t rows = detail::leading_rows(y, op, "y");
  detail::expect_like(bias, y, op, "bias");
  expect_shape(bias, Shape{y.size(-1)}, op, "bias");
  switch (detail::backend_of(y, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::bias_add_forward(y, bias)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::bias_add_forward<T>(y.data<T>(), bias.data<T>(), rows, y.size(-1));
  });
}

void bias_backward_weight(const Tensor& dy, Tensor& dbias) {
  constexpr const char* op = "bias_backward_weight";
  detail::expect_float_contiguous(dy, op, "dy");
  const int64_t rows = detail::leading_rows(dy, op, "dy");
  expect_same_device(dbias, dy, op);
  detail::expect_accum(dbias, dy.dtype(), op, "dbias");
  expect_contiguous(dbias, op, "dbias");
  expect_shape(dbias, Shape{dy.size(-1)}, op, "dbias");
  switch (detail::backend_of(dy, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::bias_backward_weight(dy, dbias)); return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is dy's own dtype.
  detail::on_float_dtype(dy.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::bias_backward_weight<T>(dy.data<T>(), dbias.data<T>(), rows, dy.size(-1));
  });
}

}  // namespace sdp::ops
