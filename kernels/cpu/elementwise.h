#pragma once
// Elementwise utilities over flat contiguous buffers (and one strided copy).
#include <cstdint>

#include "engine/core/dtype.h"

namespace sdp::cpu {

// x [n] = value
template <typename T>
void fill(T* x, int64_t n, T value);

// dst = src, walking both views by their own strides (elements); `ndim`
// dims of `shape` are shared (ndim <= 8; tensors have at most kMaxDims = 6).
// Contiguous pairs should use memcpy instead.
template <typename T>
void copy_strided(const T* src, const int64_t* src_strides, T* dst, const int64_t* dst_strides,
                  const int64_t* shape, int ndim);

// out [n] = a + b; out may alias a or b.
template <typename T>
void add(const T* a, const T* b, T* out, int64_t n);

// acc [n] += x
template <typename T>
void accumulate(T* acc, const T* x, int64_t n);

// x [n] *= alpha
template <typename T>
void scale(T* x, int64_t n, T alpha);

// sum x^2 in double. Partial sums run over fixed blocks and are added in
// block order, so the result does not depend on the thread count.
template <typename T>
double sum_squares(const T* x, int64_t n);

// sum x in double, over the same fixed blocks as sum_squares.
template <typename T>
double sum(const T* x, int64_t n);

// Elements of x [n] that are >= 0.
int64_t count_nonnegative(const int32_t* x, int64_t n);

// dst [n] = src [n] converted; From, To in {float, double, bf16}. Into bf16
// through f32 (bf16::from_float, nearest even): a double is rounded twice,
// which can differ from one direct rounding in the last bf16 bit only when
// the first rounding lands exactly halfway.
template <typename From, typename To>
void convert(const From* src, To* dst, int64_t n);

}  // namespace sdp::cpu
