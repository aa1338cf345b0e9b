// Rotary position embedding: shape checks, then device and dtype dispatch.
// Dtypes: x and y hold the activation dtype; the cos/sin tables hold
// accum_dtype of it (f32 next to bf16).
#include <vector>

#include "kernels/cpu/rope.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/rope.h"
#endif

namespace sdp::ops {
namespace {

// x, y [B, T, H, Dh] against cos, sin [T, Dh/2].
void check_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& y,
                const char* op, const char* xname, const char* yname) {
  if (x.ndim() != 4)
    fail(op, ": ", xname, " must be [B, T, H, Dh], got ", x.shape().str());
  detail::expect_float(x, op, xname);
  const int64_t T = x.size(1), Dh = x.size(3);
  if (Dh % 2 != 0) fail(op, ": head dim Dh = ", Dh, " must be even (rotate-half pairs)");
  expect_shape(y, x.shape(), op, yname);
  expect_shape(cos, {T, Dh / 2}, op, "cos");
  expect_shape(sin, {T, Dh / 2}, op, "sin");
  for (const Tensor* t : {&cos, &sin, &y}) expect_same_device(x, *t, op);
  expect_dtype(y, x.dtype(), op, yname);
  detail::expect_accum(cos, x.dtype(), op, "cos");
  detail::expect_accum(sin, x.dtype(), op, "sin");
  expect_contiguous(x, op, xname);
  expect_contiguous(y, op, yname);
  expect_contiguous(cos, op, "cos");
  expect_contiguous(sin, op, "sin");
}

void rope_dispatch(const Tensor& x, const Tensor& cos, const Tensor& sin, Tensor& y,
                   const char* op, int sign) {
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::rope_apply(x, cos, sin, y, sign)); return;
    case detail::Backend::cpu: break;
  }
  // On the CPU accum_dtype is the activation dtype itself: one T throughout.
  detail::on_float_dtype(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_apply<T>(x.data<T>(), cos.data<T>(), sin.data<T>(), y.data<T>(), x.size(0),
                       x.size(1), x.size(2), x.size(3), sign);
  });
}

// The tables are accum dtypes: f32 or f64 on the CPU, f32 on CUDA (the
// accum_dtype of both f32 and bf16), either on meta.
void expect_table_dtype(const Tensor& t, const char* op, const char* arg) {
  const DType d = t.dtype();
  if (t.device() == Device::cuda) {
    if (d != DType::f32)
      fail(op, ": ", arg, " has dtype ", dtype_name(d),
           " (valid on CUDA: f32, the accum dtype of f32 and bf16 activations)");
    return;
  }
  if (d != DType::f32 && d != DType::f64)
    fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid: f32, f64)");
}

}  // namespace

void rope_tables(double theta, Tensor& cos, Tensor& sin) {
  constexpr const char* op = "rope_tables";
  if (!(theta > 0)) fail(op, ": theta must be > 0, got ", theta);
  if (cos.ndim() != 2) fail(op, ": cos must be [T, Dh/2], got ", cos.shape().str());
  expect_shape(sin, cos.shape(), op, "sin");
  expect_same_device(cos, sin, op);
  expect_table_dtype(cos, op, "cos");
  expect_dtype(sin, cos.dtype(), op, "sin");
  expect_contiguous(cos, op, "cos");
  expect_contiguous(sin, op, "sin");
  switch (detail::backend_of(cos, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: {
      // Computed on the host exactly as for a CPU run, then uploaded: the
      // tables are made once per run, and both devices then agree bit for bit.
      const int64_t n = cos.numel();
      std::vector<float> host_cos(static_cast<size_t>(n)), host_sin(static_cast<size_t>(n));
      cpu::rope_tables<float>(theta, cos.size(0), 2 * cos.size(1), host_cos.data(),
                              host_sin.data());
      transfer(Tensor(host_cos.data(), cos.shape(), DType::f32, Device::cpu), cos);
      transfer(Tensor(host_sin.data(), sin.shape(), DType::f32, Device::cpu), sin);
      return;
    }
    case detail::Backend::cpu: break;
  }
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
