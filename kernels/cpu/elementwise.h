#pragma once
// Elementwise utilities over flat contiguous buffers (and one strided copy).
#include <cstdint>

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

}  // namespace sdp::cpu
