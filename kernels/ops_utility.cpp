// Dispatch for the utility ops: fill, copy, add, accumulate, scale,
// sum_squares, item.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/elementwise.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/ops_validate.h"

namespace sdp::ops {

void fill(Tensor& x, double value) {
  constexpr const char* op = "fill";
  expect_contiguous(x, op, "x");
  if (x.dtype() == DType::i32) {
    // Silent truncation of 2.5 into an integer tensor would hide a bug.
    if (!(value == std::floor(value) && value >= std::numeric_limits<int32_t>::min() &&
          value <= std::numeric_limits<int32_t>::max()))
      fail(op, ": value ", value, " is not representable in an i32 tensor");
    if (!detail::runs_on_cpu(x, op)) return;
    cpu::fill<int32_t>(x.data<int32_t>(), x.numel(), static_cast<int32_t>(value));
    return;
  }
  detail::expect_float(x, op, "x");
  if (!detail::runs_on_cpu(x, op)) return;
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
  const DType dt = src.dtype();
  if (dt != DType::f32 && dt != DType::f64 && dt != DType::i32)
    fail(op, ": unsupported dtype ", dtype_name(dt), " on the CPU (valid: f32, f64, i32)");
  if (!detail::runs_on_cpu(src, op)) return;
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
  if (dt == DType::i32)
    strided(int32_t{});
  else
    detail::on_float_dtype(dt, op, strided);
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  constexpr const char* op = "add";
  expect_contiguous(a, op, "a");
  detail::expect_like(b, a, op, "b");
  detail::expect_like(out, a, op, "out");
  expect_shape(b, a.shape(), op, "b");
  expect_shape(out, a.shape(), op, "out");
  detail::expect_float(a, op, "a");
  if (!detail::runs_on_cpu(a, op)) return;
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
  if (!detail::runs_on_cpu(acc, op)) return;
  detail::on_float_dtype(acc.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::accumulate<T>(acc.data<T>(), x.data<T>(), acc.numel());
  });
}

void scale(Tensor& x, double alpha) {
  constexpr const char* op = "scale";
  expect_contiguous(x, op, "x");
  detail::expect_float(x, op, "x");
  if (!detail::runs_on_cpu(x, op)) return;
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    cpu::scale<T>(x.data<T>(), x.numel(), static_cast<T>(alpha));
  });
}

double sum_squares(const Tensor& x) {
  constexpr const char* op = "sum_squares";
  expect_contiguous(x, op, "x");
  detail::expect_float(x, op, "x");
  if (!detail::runs_on_cpu(x, op)) return 0.0;
  double result = 0.0;
  detail::on_float_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    result = cpu::sum_squares<T>(x.data<T>(), x.numel());
  });
  return result;
}

double item(const Tensor& x, int64_t index) {
  constexpr const char* op = "item";
  if (index < 0 || index >= x.numel())
    fail(op, ": index ", index, " out of range for ", x.describe(), " (valid: 0 to ",
         x.numel() - 1, ")");
  if (!detail::runs_on_cpu(x, op)) return std::numeric_limits<double>::quiet_NaN();
  // `index` counts elements in row-major order of the view, whatever its strides.
  int64_t offset = 0, rest = index;
  for (int d = x.ndim() - 1; d >= 0; --d) {
    offset += (rest % x.size(d)) * x.stride(d);
    rest /= x.size(d);
  }
  switch (x.dtype()) {
    case DType::f32: return static_cast<const float*>(x.raw())[offset];
    case DType::f64: return static_cast<const double*>(x.raw())[offset];
    case DType::i32: return static_cast<const int32_t*>(x.raw())[offset];
    case DType::u16: return static_cast<const uint16_t*>(x.raw())[offset];
    case DType::bf16: return static_cast<const bf16*>(x.raw())[offset].to_float();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace sdp::ops
