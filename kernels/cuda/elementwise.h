#pragma once
// CUDA twins of the utility ops (kernels/ops.h). Arguments are checked by
// kernels/ops_elementwise.cpp before these run; every launch is queued on
// compute_stream(). Ops that return a number to the host (sum_squares, sum,
// count_nonnegative, item) wait for the stream.
#include <cstdint>

#include "engine/core/tensor.h"

namespace sdp::cuda {

// x: contiguous f32, bf16 or i32.
void fill(Tensor& x, double value);
// Same shape and dtype (f32, bf16 or i32); either side may be a strided view.
void copy(const Tensor& src, Tensor& dst);
// Contiguous, same shape, f32 or bf16; out may alias a or b.
void add(const Tensor& a, const Tensor& b, Tensor& out);
void accumulate(Tensor& acc, const Tensor& x);
void scale(Tensor& x, double alpha);
// Deterministic: the same tensor gives the same bits on every call.
double sum_squares(const Tensor& x);
double sum(const Tensor& x);
// x: contiguous i32.
int64_t count_nonnegative(const Tensor& x);
// Contiguous, same shape; f32 <-> bf16 (or a plain copy for equal dtypes).
void convert(const Tensor& src, Tensor& dst);
// The element `offset` elements past x.raw(), as double.
double item(const Tensor& x, int64_t offset);

}  // namespace sdp::cuda
