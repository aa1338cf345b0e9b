// Dispatch for the NCHW convolution (ops.h "convolution"). x, w, y, dy, dx
// and the workspace hold the activation dtype; dw holds accum_dtype of it
// (f32 next to bf16). Every call counts 2 B Cout Ho Wo Cin k k FLOPs.
#include <algorithm>

#include "kernels/cpu/conv2d.h"
#include "kernels/dispatch.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/conv2d.h"
#endif

namespace sdp::ops {

namespace {

constexpr const char* kWorkspaceFn = "conv2d_workspace_elems";

void check_geometry(const Conv2dGeometry& g, const char* op) {
  if (g.kernel < 1) fail(op, ": geometry.kernel must be >= 1, got ", g.kernel);
  if (g.stride < 1) fail(op, ": geometry.stride must be >= 1, got ", g.stride);
  if (g.padding < 0) fail(op, ": geometry.padding must be >= 0, got ", g.padding);
}

// The dims of a conv from x's shape [B, Cin, H, W] and w's [Cout, Cin, k, k]
// (names `x_arg`, `w_arg` in messages), checked against each other and the
// geometry; the output must be at least 1 x 1.
cpu::Conv2dDims conv_dims(const Shape& x, const char* x_arg, const Shape& w, const char* w_arg,
                          const Conv2dGeometry& g, const char* op) {
  check_geometry(g, op);
  if (x.ndim() != 4) fail(op, ": ", x_arg, " must be [B, Cin, H, W], got ", x.str());
  if (w.ndim() != 4 || w[2] != g.kernel || w[3] != g.kernel)
    fail(op, ": ", w_arg, " must be [Cout, Cin, k, k] with k = geometry.kernel = ", g.kernel,
         ", got ", w.str());
  if (w[1] != x[1])
    fail(op, ": ", w_arg, " ", w.str(), " has Cin = ", w[1], " but ", x_arg, " ", x.str(),
         " has ", x[1], " channels");
  cpu::Conv2dDims d;
  d.batch = x[0];
  d.in_channels = x[1];
  d.height = x[2];
  d.width = x[3];
  d.out_channels = w[0];
  d.kernel = g.kernel;
  d.stride = g.stride;
  d.padding = g.padding;
  d.out_height = g.out_size(d.height);
  d.out_width = g.out_size(d.width);
  if (d.height + 2 * g.padding < g.kernel || d.width + 2 * g.padding < g.kernel)
    fail(op, ": ", x_arg, " ", x.str(), " is smaller than the kernel (k = ", g.kernel,
         ", padding = ", g.padding, "): no output pixel");
  return d;
}

// The cuda formula (ops.h): the first `algo` elements are what cuDNN may use,
// capped at 64 MiB (at most one im2col of the whole batch, which bounds every
// algorithm that unfolds the input); bf16 runs add `staging` elements after
// them, a bf16 copy of the weight gradient that is then added into the f32
// dw. The CUDA kernels rely on exactly this layout and size.
int64_t cuda_workspace_elems(const cpu::Conv2dDims& d, DType dtype) {
  constexpr int64_t kAlgoBytes = int64_t{64} << 20;
  const int64_t unfolded = d.batch * d.patch() * d.out_pixels();
  const int64_t algo = std::min(unfolded, kAlgoBytes / static_cast<int64_t>(dtype_size(dtype)));
  const int64_t staging = dtype == DType::bf16 ? d.out_channels * d.patch() : 0;
  return algo + staging;
}

// The activation `act` [B, Cin, H, W] (x or dx), the weight-shaped `w`
// [Cout, Cin, k, k] (w, or the gradient dw in the accum dtype), the output
// side `out` [B, Cout, Ho, Wo] (y or dy) and the workspace. Returns the dims.
cpu::Conv2dDims check_conv(const Tensor& act, const char* act_arg, const Tensor& w,
                           const char* w_arg, bool w_is_gradient, const Tensor& out,
                           const char* out_arg, const Conv2dGeometry& g, const Tensor& workspace,
                           const char* op) {
  detail::expect_float(act, op, act_arg);
  expect_contiguous(act, op, act_arg);
  expect_same_device(w, act, op);
  expect_dtype(w, w_is_gradient ? accum_dtype(act.dtype()) : act.dtype(), op, w_arg);
  expect_contiguous(w, op, w_arg);
  const cpu::Conv2dDims d = conv_dims(act.shape(), act_arg, w.shape(), w_arg, g, op);
  detail::expect_like(out, act, op, out_arg);
  expect_shape(out, Shape{d.batch, d.out_channels, d.out_height, d.out_width}, op, out_arg);

  expect_same_device(workspace, act, op);
  expect_dtype(workspace, act.dtype(), op, "workspace");
  expect_contiguous(workspace, op, "workspace");
  // A meta tensor cannot tell which device its dry run mirrors (the caller
  // sized the workspace for that device), so its size is checked on real
  // devices only.
  if (act.device() != Device::meta) {
    const int64_t need =
        conv2d_workspace_elems(act.shape(), w.shape(), g, act.dtype(), act.device());
    if (workspace.numel() < need)
      fail(op, ": workspace has ", workspace.numel(), " elements, needs at least ", need, " (",
           kWorkspaceFn, " for ", device_name(act.device()), ")");
  }
  // BLAS takes int dimensions: the GEMMs' rows, columns and depths.
  detail::blas_dim(d.patch(), op);
  detail::blas_dim(d.out_channels, op);
  detail::blas_dim(cpu::conv2d_blocking(d).columns(d), op);
  detail::blas_dim(d.height * d.width, op);
  return d;
}

double conv_flops(const cpu::Conv2dDims& d) {
  return 2.0 * static_cast<double>(d.batch) * static_cast<double>(d.out_channels) *
         static_cast<double>(d.out_pixels()) * static_cast<double>(d.patch());
}

}  // namespace

// cpu : im2col chunks plus GEMM staging (kernels/cpu/conv2d.h); a function
//       of the shapes alone.
// cuda: cuda_workspace_elems above.
// meta: the larger of the two, enough wherever the run is mirrored; dry runs
//       should pass the device they mirror instead.
int64_t conv2d_workspace_elems(const Shape& x, const Shape& w, const Conv2dGeometry& geometry,
                               DType dtype, Device device) {
  const cpu::Conv2dDims d = conv_dims(x, "x", w, "w", geometry, kWorkspaceFn);
  switch (device) {
    case Device::cpu: return cpu::conv2d_workspace_elems(d);
    case Device::cuda: return cuda_workspace_elems(d, dtype);
    case Device::meta:
      return std::max(cpu::conv2d_workspace_elems(d), cuda_workspace_elems(d, dtype));
  }
  return 0;
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Conv2dGeometry& geometry, Tensor& y,
                    Tensor& workspace, bool accumulate) {
  constexpr const char* op = "conv2d_forward";
  const cpu::Conv2dDims d = check_conv(x, "x", w, "w", false, y, "y", geometry, workspace, op);
  count_flops(conv_flops(d));
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::conv2d_forward(x, w, geometry, y, workspace, accumulate));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::conv2d_forward<T>(x.data<T>(), w.data<T>(), y.data<T>(), workspace.data<T>(), d,
                           accumulate);
  });
}

void conv2d_backward_input(const Tensor& dy, const Tensor& w, const Conv2dGeometry& geometry,
                           Tensor& dx, Tensor& workspace, bool accumulate) {
  constexpr const char* op = "conv2d_backward_input";
  const cpu::Conv2dDims d =
      check_conv(dx, "dx", w, "w", false, dy, "dy", geometry, workspace, op);
  count_flops(conv_flops(d));
  switch (detail::backend_of(dx, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::conv2d_backward_input(dy, w, geometry, dx, workspace, accumulate));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::conv2d_backward_input<T>(dy.data<T>(), w.data<T>(), dx.data<T>(), workspace.data<T>(),
                                  d, accumulate);
  });
}

void conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Conv2dGeometry& geometry,
                            Tensor& dw, Tensor& workspace) {
  constexpr const char* op = "conv2d_backward_weight";
  const cpu::Conv2dDims d = check_conv(x, "x", dw, "dw", true, dy, "dy", geometry, workspace, op);
  count_flops(conv_flops(d));
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::conv2d_backward_weight(dy, x, geometry, dw, workspace));
      return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activations' own dtype, so all match.
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::conv2d_backward_weight<T>(dy.data<T>(), x.data<T>(), dw.data<T>(), workspace.data<T>(),
                                   d);
  });
}

}  // namespace sdp::ops
