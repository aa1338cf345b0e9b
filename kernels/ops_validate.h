#pragma once
// Argument checks shared by the dispatch files kernels/ops_*.cpp (this
// group's ops). Row-wise ops accept any leading shape: a tensor [..., D] is
// treated as [N, D] with N the product of the leading dims, so callers need
// not flatten [B, T, D] activations themselves.
#include <cstdint>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace sdp::ops::detail {

// `t` must sit on `ref`'s device, hold `ref`'s dtype, and be contiguous:
// every CPU kernel here walks plain row-major pointers.
inline void expect_like(const Tensor& t, const Tensor& ref, const char* op, const char* arg) {
  expect_same_device(t, ref, op);
  expect_dtype(t, ref.dtype(), op, arg);
  expect_contiguous(t, op, arg);
}

// Floating dtypes an op accepts for activations and parameters: f32 and f64
// on the CPU, f32 and bf16 on CUDA, any of the three on meta (a dry run may
// mirror either device). Checked before the meta exit so a meta run rejects
// what no device would run.
inline void expect_float(const Tensor& t, const char* op, const char* arg) {
  const DType d = t.dtype();
  switch (t.device()) {
    case Device::cpu:
      if (d != DType::f32 && d != DType::f64)
        fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid on the CPU: f32, f64)");
      return;
    case Device::cuda:
      if (d != DType::f32 && d != DType::bf16)
        fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid on CUDA: f32, bf16)");
      return;
    case Device::meta:
      if (d != DType::f32 && d != DType::f64 && d != DType::bf16)
        fail(op, ": ", arg, " has dtype ", dtype_name(d), " (valid: f32, f64, bf16)");
      return;
  }
}

// A float tensor (expect_float) that is contiguous.
inline void expect_float_contiguous(const Tensor& t, const char* op, const char* arg) {
  expect_float(t, op, arg);
  expect_contiguous(t, op, arg);
}

// `t` of `shape`, on ref's device, in ref's dtype, contiguous.
inline void expect_like_shaped(const Tensor& t, const Tensor& ref, const Shape& shape,
                               const char* op, const char* arg) {
  expect_like(t, ref, op, arg);
  expect_shape(t, shape, op, arg);
}

// `t` shaped and typed like `ref`, contiguous.
inline void expect_like_shaped(const Tensor& t, const Tensor& ref, const char* op,
                               const char* arg) {
  expect_like_shaped(t, ref, ref.shape(), op, arg);
}

// `t` must hold accum_dtype(activation): the dtype of statistics (rstd, lse,
// losses) and of weight gradients next to activations of dtype `activation`.
inline void expect_accum(const Tensor& t, DType activation, const char* op, const char* arg) {
  expect_dtype(t, accum_dtype(activation), op, arg);
}

// Rows of a [..., D] tensor; at least 1-D.
inline int64_t leading_rows(const Tensor& t, const char* op, const char* arg) {
  if (t.ndim() < 1) fail(op, ": ", arg, " must have at least one dimension, got ", t.describe());
  const int64_t last = t.size(-1);
  return last == 0 ? 0 : t.numel() / last;
}

// `t`'s leading dims followed by `last`: the shape of a row-wise result.
inline Shape with_last_dim(const Tensor& t, int64_t last) {
  Shape s(t.shape().begin(), t.shape().end() - 1);
  s.push_back(last);
  return s;
}

// `t`'s leading dims only: the shape of a per-row statistic such as rstd.
inline Shape without_last_dim(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 1);
}

// BLAS takes int dimensions; larger matrices must be split by the caller.
inline int blas_dim(int64_t n, const char* op) {
  if (n > INT32_MAX) fail(op, ": dimension ", n, " exceeds the BLAS limit of ", INT32_MAX);
  return static_cast<int>(n);
}

// An output that must not share memory with an input: the op reads that
// input after it has written some of the output, so it cannot run in place.
inline void expect_disjoint(const Tensor& in, const Tensor& out, const char* op,
                            const char* in_arg, const char* out_arg) {
  const auto a = reinterpret_cast<uintptr_t>(in.raw()), b = reinterpret_cast<uintptr_t>(out.raw());
  if (in.bytes() > 0 && out.bytes() > 0 && a < b + out.bytes() && b < a + in.bytes())
    fail(op, ": ", out_arg, " overlaps ", in_arg, " (this op cannot run in place)");
}

}  // namespace sdp::ops::detail
