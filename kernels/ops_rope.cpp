// Rotary position embedding: shape checks, then device and dtype dispatch.
#include "kernels/cpu/rope.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace sdp::ops {
namespace {

// x, y [B, T, H, Dh] against cos, sin [T, Dh/2].
void check_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& y,
                const char* op, const char* xname, const char* yname) {
  if (x.ndim() != 4)
    fail(op, ": ", xname, " must be [B, T, H, Dh], got ", x.shape().str());
  const int64_t T = x.size(1), Dh = x.size(3);
  if (Dh % 2 != 0) fail(op, ": head dim Dh = ", Dh, " must be even (rotate-half pairs)");
  expect_shape(y, x.shape(), op, yname);
  expect_shape(cos, {T, Dh / 2}, op, "cos");
  expect_shape(sin, {T, Dh / 2}, op, "sin");
  for (const Tensor* t : {&cos, &sin, &y}) {
    expect_same_device(x, *t, op);
    expect_dtype(*t, x.dtype(), op, t == &y ? yname : (t == &cos ? "cos" : "sin"));
  }
  expect_contiguous(x, op, xname);
  expect_contiguous(y, op, yname);
  expect_contiguous(cos, op, "cos");
  expect_contiguous(sin, op, "sin");
}

void rope_dispatch(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y,
                   const char* op, int sign) {
  if (!detail::runs_on_cpu(x, op)) return;
  detail::on_float_dtype(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_apply<T>(x.data<T>(), cos.data<T>(), sin.data<T>(), y.data<T>(), x.size(0),
                       x.size(1), x.size(2), x.size(3), sign);
  });
}

}  // namespace

void rope_tables(double theta, Tensor& cos, Tensor& sin) {
  constexpr const char* op = "rope_tables";
  if (!(theta > 0)) fail(op, ": theta must be > 0, got ", theta);
  if (cos.ndim() != 2) fail(op, ": cos must be [T, Dh/2], got ", cos.shape().str());
  expect_shape(sin, cos.shape(), op, "sin");
  expect_same_device(cos, sin, op);
  expect_dtype(sin, cos.dtype(), op, "sin");
  expect_contiguous(cos, op, "cos");
  expect_contiguous(sin, op, "sin");
  if (!detail::runs_on_cpu(cos, op)) return;
  detail::on_float_dtype(cos.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_tables<T>(theta, cos.size(0), 2 * cos.size(1), cos.data<T>(), sin.data<T>());
  });
}

void rope_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y) {
  check_rope(x, cos, sin, y, "rope_forward", "x", "y");
  rope_dispatch(x, cos, sin, y, "rope_forward", +1);
}

void rope_backward_input(const Tensor& dy, const Tensor& cos, const Tensor& sin, Tensor& dx) {
  check_rope(dy, cos, sin, dx, "rope_backward_input", "dy", "dx");
  rope_dispatch(dy, cos, sin, dx, "rope_backward_input", -1);
}

}  // namespace sdp::ops
