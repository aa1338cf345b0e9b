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

// Floating dtypes the CPU kernels support; checked before the meta exit so
// a meta run rejects what a CPU run would.
inline void expect_float(const Tensor& t, const char* op, const char* arg) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
    fail(op, ": ", arg, " has dtype ", dtype_name(t.dtype()), " (valid: f32, f64)");
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

}  // namespace sdp::ops::detail
