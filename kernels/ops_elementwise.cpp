// Dispatch for the utility ops: fill, copy, add, accumulate, scale,
// sum_squares, sum, count_nonnegative, transfer, convert, item.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/elementwise.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

#ifdef SDP_HAVE_CUDA
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/transfer.h"
#endif

namespace sdp::ops {

namespace {

// copy moves i32 tensors (tokens, targets) as well as the device's floating
// dtypes.
void expect_copy_dtype(const Tensor& t, const char* op) {
  const DType d = t.dtype();
  const Device dev = t.device();
  const bool ok = d == DType::i32 || d == DType::f32 ||
                  (d == DType::f64 && dev != Device::cuda) ||
                  (d == DType::bf16 && dev != Device::cpu);
  if (ok) return;
  switch (dev) {
    case Device::cpu:
      fail(op, ": unsupported dtype ", dtype_name(d), " on the CPU (valid: f32, f64, i32)");
    case Device::cuda:
      fail(op, ": unsupported dtype ", dtype_name(d), " on CUDA (valid: f32, bf16, i32)");
    case Device::meta:
      fail(op, ": unsupported dtype ", dtype_name(d), " (valid: f32, f64, bf16, i32)");
  }
}

// convert reaches bf16 on the host as well (it is how bf16 data gets in and
// out of a CPU run); CUDA kernels have no f64.
void expect_convert_dtype(const Tensor& t, const char* op, const char* arg) {
  const DType d = t.dtype();
  if (t.device() == Device::cuda) {
    if (d != DType::f32 && d != DType::bf16)
      fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid on CUDA: f32, bf16)");
    return;
  }
  if (d != DType::f32 && d != DType::f64 && d != DType::bf16)
    fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid: f32, f64, bf16)");
}

// Calls f(T{}) with T = float, double or bf16 (the host's convert dtypes).
template <typename F>
void on_convert_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::bf16: f(bf16{}); return;
    default: fail("convert: unsupported dtype ", dtype_name(dtype));
  }
}

}  // namespace

void fill(Tensor& x, double value) {
  constexpr const char* op = "fill";
  expect_contiguous(x, op, "x");
  if (x.dtype() == DType::i32) {
    // Silent truncation of 2.5 into an integer tensor would hide a bug.
    if (!(value == std::floor(value) && value >= std::numeric_limits<int32_t>::min() &&
          value <= std::numeric_limits<int32_t>::max()))
      fail(op, ": value ", value, " is not representable in an i32 tensor");
  } else {
    detail::expect_float(x, op, "x");
  }
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::fill(x, value)); return;
    case detail::Backend::cpu: break;
  }
  if (x.dtype() == DType::i32) {
    cpu::fill<int32_t>(x.data<int32_t>(), x.numel(), static_cast<int32_t>(value));
    return;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::fill<T>(x.data<T>(), x.numel(), static_cast<T>(value));
  });
}

void copy(const Tensor& src, Tensor& dst) {
  constexpr const char* op = "copy";
  expect_same_device(src, dst, op);
  expect_dtype(dst, src.dtype(), op, "dst");
  expect_shape(dst, src.shape(), op, "dst");
  expect_copy_dtype(src, op);
  switch (detail::backend_of(src, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::copy(src, dst)); return;
    case detail::Backend::cpu: break;
  }
  if (src.numel() == 0 || src.raw() == dst.raw()) return;
  if (src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.raw(), src.raw(), src.bytes());
    return;
  }
  // Strided views (narrow) are copied element by element.
  auto strided = [&](auto tag) {
    using T = decltype(tag);
    cpu::copy_strided<T>(static_cast<const T*>(src.raw()), src.strides().begin(),
                         static_cast<T*>(dst.raw()), dst.strides().begin(),
                         src.shape().begin(), src.ndim());
  };
  if (src.dtype() == DType::i32)
    strided(int32_t{});
  else
    detail::on_float_dtype(src.dtype(), op, strided);
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr const char* op = "add";
  expect_contiguous(a, op, "a");
  detail::expect_like(b, a, op, "b");
  detail::expect_like(out, a, op, "out");
  expect_shape(b, a.shape(), op, "b");
  expect_shape(out, a.shape(), op, "out");
  detail::expect_float(a, op, "a");
  switch (detail::backend_of(a, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::add(a, b, out)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::add<T>(a.data<T>(), b.data<T>(), out.data<T>(), a.numel());
  });
}

void accumulate(Tensor& acc, const Tensor& x) {
  constexpr const char* op = "accumulate";
  expect_contiguous(acc, op, "acc");
  detail::expect_like(x, acc, op, "x");
  expect_shape(x, acc.shape(), op, "x");
  detail::expect_float(acc, op, "acc");
  switch (detail::backend_of(acc, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::accumulate(acc, x)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(acc.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::accumulate<T>(acc.data<T>(), x.data<T>(), acc.numel());
  });
}

void scale(Tensor& x, double alpha) {
  constexpr const char* op = "scale";
  expect_contiguous(x, op, "x");
  detail::expect_float(x, op, "x");
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::scale(x, alpha)); return;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::scale<T>(x.data<T>(), x.numel(), static_cast<T>(alpha));
  });
}

double sum_squares(const Tensor& x) {
  constexpr const char* op = "sum_squares";
  expect_contiguous(x, op, "x");
  detail::expect_float(x, op, "x");
  double result = 0.0;
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return 0.0;
    case detail::Backend::cuda: SDP_ON_CUDA(result = cuda::sum_squares(x)); return result;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    result = cpu::sum_squares<T>(x.data<T>(), x.numel());
  });
  return result;
}

double sum(const Tensor& x) {
  constexpr const char* op = "sum";
  expect_contiguous(x, op, "x");
  detail::expect_float(x, op, "x");
  double result = 0.0;
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return 0.0;
    case detail::Backend::cuda: SDP_ON_CUDA(result = cuda::sum(x)); return result;
    case detail::Backend::cpu: break;
  }
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    result = cpu::sum<T>(x.data<T>(), x.numel());
  });
  return result;
}

int64_t count_nonnegative(const Tensor& x) {
  constexpr const char* op = "count_nonnegative";
  expect_dtype(x, DType::i32, op, "x");
  expect_contiguous(x, op, "x");
  int64_t result = 0;
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return x.numel();
    case detail::Backend::cuda: SDP_ON_CUDA(result = cuda::count_nonnegative(x)); return result;
    case detail::Backend::cpu: break;
  }
  return cpu::count_nonnegative(x.data<int32_t>(), x.numel());
}

void transfer(const Tensor& src, Tensor& dst) {
  constexpr const char* op = "transfer";
  expect_dtype(dst, src.dtype(), op, "dst");
  expect_shape(dst, src.shape(), op, "dst");
  expect_contiguous(src, op, "src");
  expect_contiguous(dst, op, "dst");
  if (src.device() == Device::meta || dst.device() == Device::meta) return;
  if (src.device() == Device::cpu && dst.device() == Device::cpu) {
    if (src.bytes() != 0 && src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.bytes());
    return;
  }
  // A CUDA side in a build without CUDA kernels fails here with a clear message.
  detail::backend_of(src.device() == Device::cuda ? src : dst, op);
  SDP_ON_CUDA(cuda::transfer(src, dst));
}

void convert(const Tensor& src, Tensor& dst) {
  constexpr const char* op = "convert";
  expect_same_device(src, dst, op);
  expect_shape(dst, src.shape(), op, "dst");
  expect_contiguous(src, op, "src");
  expect_contiguous(dst, op, "dst");
  expect_convert_dtype(src, op, "src");
  expect_convert_dtype(dst, op, "dst");
  switch (detail::backend_of(src, op)) {
    case detail::Backend::meta: return;
    case detail::Backend::cuda: SDP_ON_CUDA(cuda::convert(src, dst)); return;
    case detail::Backend::cpu: break;
  }
  if (src.numel() == 0 || src.raw() == dst.raw()) return;
  if (src.dtype() == dst.dtype()) {
    std::memcpy(dst.raw(), src.raw(), src.bytes());
    return;
  }
  on_convert_dtype(src.dtype(), [&](auto from_tag) {
    on_convert_dtype(dst.dtype(), [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      cpu::convert<From, To>(static_cast<const From*>(src.raw()), static_cast<To*>(dst.raw()),
                             src.numel());
    });
  });
}

double item(const Tensor& x, int64_t index) {
  constexpr const char* op = "item";
  if (index < 0 || index >= x.numel())
    fail(op, ": index ", index, " out of range for ", x.describe(), " (valid: 0 to ",
         x.numel() - 1, ")");
  // `index` counts elements in row-major order of the view, whatever its strides.
  int64_t offset = 0, rest = index;
  for (int d = x.ndim() - 1; d >= 0; --d) {
    offset += (rest % x.size(d)) * x.stride(d);
    rest /= x.size(d);
  }
  double result = std::numeric_limits<double>::quiet_NaN();
  switch (detail::backend_of(x, op)) {
    case detail::Backend::meta: return result;
    case detail::Backend::cuda: SDP_ON_CUDA(result = cuda::item(x, offset)); return result;
    case detail::Backend::cpu: break;
  }
  switch (x.dtype()) {
    case DType::f32: return static_cast<const float*>(x.raw())[offset];
    case DType::f64: return static_cast<const double*>(x.raw())[offset];
    case DType::i32: return static_cast<const int32_t*>(x.raw())[offset];
    case DType::u16: return static_cast<const uint16_t*>(x.raw())[offset];
    case DType::bf16: return static_cast<const bf16*>(x.raw())[offset].to_float();
  }
  return result;
}

}  // namespace sdp::ops
