// Fused softmax cross-entropy kernels (see cross_entropy.h).
#include "kernels/cuda/cross_entropy.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {

namespace {

constexpr int kThreads = 256;  // per block (one block per row); a multiple of 32
constexpr int kWarps = kThreads / 32;

// Conversions between one 16-byte load (int4) and the f32 values of the
// elements it holds. Little-endian: element 0 is the low bits of .x.
template <typename T>
struct Pack;

template <>
struct Pack<float> {
  static constexpr int kSize = 4;
  __device__ __forceinline__ static void unpack(const int4& raw, float* out) {
    out[0] = __int_as_float(raw.x);
    out[1] = __int_as_float(raw.y);
    out[2] = __int_as_float(raw.z);
    out[3] = __int_as_float(raw.w);
  }
  __device__ __forceinline__ static int4 pack(const float* in) {
    return make_int4(__float_as_int(in[0]), __float_as_int(in[1]), __float_as_int(in[2]),
                     __float_as_int(in[3]));
  }
};

template <>
struct Pack<__nv_bfloat16> {
  static constexpr int kSize = 8;
  // A bf16 is the top half of an f32, so widening is a shift.
  __device__ __forceinline__ static void unpack(const int4& raw, float* out) {
    const unsigned words[4] = {static_cast<unsigned>(raw.x), static_cast<unsigned>(raw.y),
                               static_cast<unsigned>(raw.z), static_cast<unsigned>(raw.w)};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
  __device__ __forceinline__ static unsigned bits(float f) {
    return __bfloat16_as_ushort(from_f32<__nv_bfloat16>(f));
  }
  __device__ __forceinline__ static int4 pack(const float* in) {
    unsigned words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) words[i] = bits(in[2 * i]) | (bits(in[2 * i + 1]) << 16);
    return make_int4(static_cast<int>(words[0]), static_cast<int>(words[1]),
                     static_cast<int>(words[2]), static_cast<int>(words[3]));
  }
};

// A row of v elements cut into a scalar head (up to the first 16-byte
// boundary), whole 16-byte chunks, and a scalar tail starting at `tail`.
// Rows of a [N, V] tensor start at varying alignments when V is odd
// (GPT-2's 50257), so the cut is made per row.
struct RowSplit {
  int64_t head, chunks, tail;
};

template <typename T>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t v) {
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) & 15);
  int64_t head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int64_t>(sizeof(T));
  if (head > v) head = v;
  const int64_t chunks = (v - head) / Pack<T>::kSize;
  return {head, chunks, head + chunks * Pack<T>::kSize};
}

// Folds `count` values into a running max m and the sum s of exp(x - m).
// -inf logits (masked classes) add nothing; a NaN logit makes s NaN, as on
// the CPU. m itself is never NaN (comparisons with NaN are false).
template <int kCount>
__device__ __forceinline__ void fold(const float* e, float& m, float& s) {
  float chunk_max = e[0];
#pragma unroll
  for (int i = 1; i < kCount; ++i) chunk_max = fmaxf(chunk_max, e[i]);
  if (chunk_max > m) {
    s *= expf(m - chunk_max);  // exp(-inf) = 0 on the first fold
    m = chunk_max;
  }
#pragma unroll
  for (int i = 0; i < kCount; ++i) s += e[i] == -INFINITY ? 0.0f : expf(e[i] - m);
}

// Merges the partial (m2, s2) into (m, s).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) {  // both parts saw only -inf: s, s2 are 0 (or NaN)
    s += s2;
    return;
  }
  s = s * expf(m - top) + s2 * expf(m2 - top);
  m = top;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    merge(m, s, m2, s2);
  }
}

// One block per row: lse = max + log(sum exp(x - max)), loss = lse - x[target].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_forward_kernel(const T* __restrict__ logits,
                                 const int32_t* __restrict__ targets,
                                 float* __restrict__ losses, float* __restrict__ lse, int64_t v) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  const int64_t row = blockIdx.x;
  const T* x = logits + row * v;  // [V]
  const RowSplit split = split_row(x, v);
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < split.head; j += kThreads) {
    const float e = to_f32(x[j]);
    fold<1>(&e, m, s);
  }
  const int4* body = reinterpret_cast<const int4*>(x + split.head);
  for (int64_t c = threadIdx.x; c < split.chunks; c += kThreads) {
    float e[Pack<T>::kSize];
    Pack<T>::unpack(body[c], e);
    fold<Pack<T>::kSize>(e, m, s);
  }
  for (int64_t j = split.tail + threadIdx.x; j < v; j += kThreads) {
    const float e = to_f32(x[j]);
    fold<1>(&e, m, s);
  }

  __shared__ float warp_m[kWarps], warp_s[kWarps];
  warp_merge(m, s);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kWarps ? warp_m[lane] : -INFINITY;
    s = lane < kWarps ? warp_s[lane] : 0.0f;
    warp_merge(m, s);
    if (lane == 0) {
      const float row_lse = m + logf(s);
      lse[row] = row_lse;
      const int32_t t = targets[row];
      losses[row] = t < 0 ? 0.0f : t >= v ? __int_as_float(0x7fc00000) : row_lse - to_f32(x[t]);
    }
  }
}

// One block per row: d = (exp(x - lse) - [j == target]) * grad_scale. Each
// element is read and then written by the same thread, so `dlogits` may
// alias `logits` (hence no __restrict__ on either).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_backward_kernel(const T* logits, const int32_t* __restrict__ targets,
                                  const float* __restrict__ lse, float grad_scale, T* dlogits,
                                  int64_t v) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  const int64_t row = blockIdx.x;
  const T* x = logits + row * v;  // [V]
  T* out = dlogits + row * v;     // [V]
  const int64_t t = targets[row];
  const float row_lse = lse[row];
  // Row-uniform cases: an ignored row gets zeros, an out-of-range target NaN.
  const float fixed = t < 0 ? 0.0f : __int_as_float(0x7fc00000);
  const bool computed = t >= 0 && t < v;
  auto grad = [&](float xj, int64_t j) {
    if (!computed) return fixed;
    const float p = expf(xj - row_lse);
    return (j == t ? p - 1.0f : p) * grad_scale;
  };

  // Chunks only when both rows sit at the same offset from a 16-byte
  // boundary (always so in place, or for buffers from one allocator).
  const bool same_alignment =
      ((reinterpret_cast<uintptr_t>(x) ^ reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  const RowSplit split = same_alignment ? split_row(x, v) : RowSplit{v, 0, v};
  for (int64_t j = threadIdx.x; j < split.head; j += kThreads)
    out[j] = from_f32<T>(grad(to_f32(x[j]), j));
  const int4* body_in = reinterpret_cast<const int4*>(x + split.head);
  int4* body_out = reinterpret_cast<int4*>(out + split.head);
  for (int64_t c = threadIdx.x; c < split.chunks; c += kThreads) {
    float e[Pack<T>::kSize];
    Pack<T>::unpack(body_in[c], e);
    const int64_t first = split.head + c * Pack<T>::kSize;
#pragma unroll
    for (int i = 0; i < Pack<T>::kSize; ++i) e[i] = grad(e[i], first + i);
    body_out[c] = Pack<T>::pack(e);
  }
  for (int64_t j = split.tail + threadIdx.x; j < v; j += kThreads)
    out[j] = from_f32<T>(grad(to_f32(x[j]), j));
}

// Rows of logits [N, V] as a grid size; N = 0 launches nothing.
unsigned row_blocks(int64_t n, const char* op) {
  if (n > INT32_MAX)
    fail(op, ": ", n, " rows exceed the ", INT32_MAX,
         " blocks one launch can hold; split the batch");
  return static_cast<unsigned>(n);
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& lse) {
  constexpr const char* op = "cross_entropy_forward";
  const int64_t n = targets.numel(), v = logits.size(-1);
  if (n == 0) return;
  const unsigned blocks = row_blocks(n, op);
  on_cuda_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    launch<cross_entropy_forward_kernel<T>>(blocks, kThreads, 0, compute_stream(),
        device_ptr<T>(logits), targets.data<int32_t>(), losses.data<float>(), lse.data<float>(),
        v);
    SDP_CUDA_LAUNCH_CHECK("cross_entropy_forward_kernel");
  });
}

void cross_entropy_backward_input(const Tensor& logits, const Tensor& targets,
                                  const Tensor& lse, double grad_scale, Tensor& dlogits) {
  constexpr const char* op = "cross_entropy_backward_input";
  const int64_t n = targets.numel(), v = logits.size(-1);
  if (n == 0) return;
  const unsigned blocks = row_blocks(n, op);
  on_cuda_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    launch<cross_entropy_backward_kernel<T>>(blocks, kThreads, 0, compute_stream(),
        device_ptr<T>(logits), targets.data<int32_t>(), lse.data<float>(),
        static_cast<float>(grad_scale), device_ptr<T>(dlogits), v);
    SDP_CUDA_LAUNCH_CHECK("cross_entropy_backward_kernel");
  });
}

}  // namespace sdp::cuda
