// Dispatch for the Swin Transformer's index maps (ops.h): patchify, shifted
// window partition / merge, patch merging, and the mean over tokens. Every
// tensor holds one float dtype and is channels-last ([B, H, W, C]; images
// [B, C, H, W]). Data movement and a mean: no FLOPs counted.
#include <cstdint>

#include "kernels/cpu/window_layout.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/window_layout.h"
#endif

namespace sdp::ops {

namespace {

// x [B, H, W, C] with at least one channel.
void check_tokens(const Tensor& x, const char* op, const char* arg) {
  detail::expect_float_contiguous(x, op, arg);
  if (x.ndim() != 4) fail(op, ": ", arg, " must be [B, H, W, C], got ", x.describe());
  if (x.size(3) < 1) fail(op, ": ", arg, " ", x.shape().str(), " has no channels");
}

// The window geometry of x [B, H, W, C] (the un-windowed side of either op);
// returns the windows' shape [B nH nW, w w, C].
Shape check_windows(const Tensor& x, int64_t window, int64_t shift, const char* op,
                    const char* arg) {
  check_tokens(x, op, arg);
  const int64_t H = x.size(1), W = x.size(2);
  if (window < 1) fail(op, ": window must be >= 1, got ", window);
  if (H % window != 0 || W % window != 0)
    fail(op, ": ", arg, " ", x.shape().str(), ": H = ", H, " and W = ", W,
         " must be multiples of the window ", window);
  if (shift < 0 || shift >= window)
    fail(op, ": shift = ", shift, " is invalid (valid: 0 to window - 1 = ", window - 1, ")");
  return Shape{x.size(0) * (H / window) * (W / window), window * window, x.size(3)};
}

// Patch merging's input x [B, H, W, C] (H, W even); returns y's shape
// [B, H/2, W/2, 4C].
Shape check_patch_merge(const Tensor& x, const char* op, const char* arg) {
  check_tokens(x, op, arg);
  if (x.size(1) % 2 != 0 || x.size(2) % 2 != 0)
    fail(op, ": ", arg, " ", x.shape().str(), ": H and W must be even");
  return Shape{x.size(0), x.size(1) / 2, x.size(2) / 2, 4 * x.size(3)};
}

// token_mean's x [B, L, C] or [B, H, W, C] with at least one token; returns L.
int64_t check_token_mean(const Tensor& x, const char* op, const char* arg) {
  detail::expect_float_contiguous(x, op, arg);
  if (x.ndim() != 3 && x.ndim() != 4)
    fail(op, ": ", arg, " must be [B, L, C] or [B, H, W, C], got ", x.describe());
  const int64_t l = x.ndim() == 3 ? x.size(1) : x.size(1) * x.size(2);
  if (l < 1) fail(op, ": ", arg, " ", x.shape().str(), " has no tokens to average");
  return l;
}

cpu::WindowGeometry geometry_of(const Tensor& x, int64_t window, int64_t shift) {
  return {x.size(0), x.size(1), x.size(2), x.size(3), window, shift};
}

}  // namespace

void patchify(const Tensor& images, int64_t patch, Tensor& patches) {
  constexpr const char* op = "patchify";
  detail::expect_float_contiguous(images, op, "images");
  if (images.ndim() != 4) fail(op, ": images must be [B, C, H, W], got ", images.describe());
  if (patch < 1) fail(op, ": patch must be >= 1, got ", patch);
  const int64_t B = images.size(0), C = images.size(1), H = images.size(2), W = images.size(3);
  if (H % patch != 0 || W % patch != 0)
    fail(op, ": images ", images.shape().str(), ": H = ", H, " and W = ", W,
         " must be multiples of the patch ", patch);
  detail::expect_like_shaped(patches, images, Shape{B, H / patch, W / patch, C * patch * patch}, op, "patches");
  detail::expect_disjoint(images, patches, op, "images", "patches");
  switch (detail::backend_of(images, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::patchify(images, patch, patches)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(images.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::patchify<T>(images.data<T>(), patches.data<T>(), B, C, H, W, patch);
  });
}

void window_partition(const Tensor& x, int64_t window, int64_t shift, Tensor& windows) {
  constexpr const char* op = "window_partition";
  const Shape shape = check_windows(x, window, shift, op, "x");
  detail::expect_like_shaped(windows, x, shape, op, "windows");
  detail::expect_disjoint(x, windows, op, "x", "windows");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda:
      SDP_ON_CUDA(cuda::window_partition(x, window, shift, windows));
      return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::window_partition<T>(x.data<T>(), windows.data<T>(), geometry_of(x, window, shift));
  });
}

void window_merge(const Tensor& windows, int64_t window, int64_t shift, Tensor& x) {
  constexpr const char* op = "window_merge";
  const Shape shape = check_windows(x, window, shift, op, "x");
  detail::expect_like_shaped(windows, x, shape, op, "windows");
  detail::expect_disjoint(windows, x, op, "windows", "x");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::window_merge(windows, window, shift, x)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::window_merge<T>(windows.data<T>(), x.data<T>(), geometry_of(x, window, shift));
  });
}

void patch_merge_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "patch_merge_forward";
  const Shape shape = check_patch_merge(x, op, "x");
  detail::expect_like_shaped(y, x, shape, op, "y");
  detail::expect_disjoint(x, y, op, "x", "y");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::patch_merge_forward(x, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::patch_merge_forward<T>(x.data<T>(), y.data<T>(), x.size(0), x.size(1), x.size(2),
                                x.size(3));
  });
}

void patch_merge_backward_input(const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "patch_merge_backward_input";
  const Shape shape = check_patch_merge(dx, op, "dx");
  detail::expect_like_shaped(dy, dx, shape, op, "dy");
  detail::expect_disjoint(dy, dx, op, "dy", "dx");
  switch (detail::backend_of(dx, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::patch_merge_backward_input(dy, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::patch_merge_backward_input<T>(dy.data<T>(), dx.data<T>(), dx.size(0), dx.size(1),
                                       dx.size(2), dx.size(3));
  });
}

void token_mean_forward(const Tensor& x, Tensor& y) {
  constexpr const char* op = "token_mean_forward";
  const int64_t l = check_token_mean(x, op, "x");
  detail::expect_like_shaped(y, x, Shape{x.size(0), x.size(-1)}, op, "y");
  detail::expect_disjoint(x, y, op, "x", "y");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::token_mean_forward(x, y)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::token_mean_forward<T>(x.data<T>(), y.data<T>(), x.size(0), l, x.size(-1));
  });
}

void token_mean_backward_input(const Tensor& dy, Tensor& dx) {
  constexpr const char* op = "token_mean_backward_input";
  const int64_t l = check_token_mean(dx, op, "dx");
  detail::expect_like_shaped(dy, dx, Shape{dx.size(0), dx.size(-1)}, op, "dy");
  detail::expect_disjoint(dy, dx, op, "dy", "dx");
  switch (detail::backend_of(dx, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::token_mean_backward_input(dy, dx)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::token_mean_backward_input<T>(dy.data<T>(), dx.data<T>(), dx.size(0), l, dx.size(-1));
  });
}

}  // namespace sdp::ops
