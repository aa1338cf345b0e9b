// CUDA kernels of the utility ops. Elementwise kernels walk their buffers in
// 16-byte packs (one vector load or store each) when every pointer is
// 16-byte aligned, element by element otherwise. Reductions are
// deterministic: the grid is a function of the element count only, each
// block writes one double partial into a fixed device array, and the host
// adds the partials in block order.
#include "kernels/cuda/elementwise.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int kThreads = 256;          // per block; a multiple of 32 (the reductions need it)
constexpr int64_t kMaxBlocks = 8192;   // grid-stride loops cover larger tensors
constexpr int kMaxReduceBlocks = 1024;  // partials per reduction

// 16 bytes of T: the unit of one vector load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / sizeof(T);
  T v[kSize];
};

// Elements [0, m) of `p` into slots [0, m) (the rest are zero); one vector
// load when the pack is whole and aligned. The element loops unroll fully
// so that the pack stays in registers (a runtime slot index would put it in
// local memory).
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p, int m, bool aligned) {
  Pack<T> r{};
  if (aligned && m == Pack<T>::kSize) {
    r = *reinterpret_cast<const Pack<T>*>(p);
  } else {
#pragma unroll
    for (int j = 0; j < Pack<T>::kSize; ++j)
      if (j < m) r.v[j] = p[j];
  }
  return r;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& r, int m, bool aligned) {
  if (aligned && m == Pack<T>::kSize) {
    *reinterpret_cast<Pack<T>*>(p) = r;
  } else {
#pragma unroll
    for (int j = 0; j < Pack<T>::kSize; ++j)
      if (j < m) p[j] = r.v[j];
  }
}

__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Elements in the pack that starts at element i of n.
__device__ __forceinline__ int pack_count(int64_t i, int64_t n, int size) {
  return static_cast<int>(n - i < size ? n - i : size);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for `items` work items (packs or elements), one per thread.
int blocks_for(int64_t items) {
  return static_cast<int>(std::clamp<int64_t>((items + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <typename T>
int64_t pack_total(int64_t n) {
  return (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
}

// ---- elementwise --------------------------------------------------------------

// Bits: the storage of one element (uint16_t for bf16, uint32_t for f32/i32).
template <typename Bits>
__global__ void fill_kernel(Bits* x, int64_t n, Bits value, bool aligned) {
  constexpr int K = Pack<Bits>::kSize;
  Pack<Bits> p;
#pragma unroll
  for (int j = 0; j < K; ++j) p.v[j] = value;
  for (int64_t k = thread_index(); k * K < n; k += thread_count()) {
    const int64_t i = k * K;
    store_pack(x + i, p, pack_count(i, n, K), aligned);
  }
}

// out = a + b; out may alias a or b (each element is read before it is written,
// by the same thread).
template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n, bool aligned) {
  constexpr int K = Pack<T>::kSize;
  for (int64_t k = thread_index(); k * K < n; k += thread_count()) {
    const int64_t i = k * K;
    const int m = pack_count(i, n, K);
    const Pack<T> pa = load_pack(a + i, m, aligned), pb = load_pack(b + i, m, aligned);
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < K; ++j) r.v[j] = from_f32<T>(to_f32(pa.v[j]) + to_f32(pb.v[j]));
    store_pack(out + i, r, m, aligned);
  }
}

template <typename T>
__global__ void scale_kernel(T* x, int64_t n, float alpha, bool aligned) {
  constexpr int K = Pack<T>::kSize;
  for (int64_t k = thread_index(); k * K < n; k += thread_count()) {
    const int64_t i = k * K;
    const int m = pack_count(i, n, K);
    Pack<T> p = load_pack(x + i, m, aligned);
#pragma unroll
    for (int j = 0; j < K; ++j) p.v[j] = from_f32<T>(to_f32(p.v[j]) * alpha);
    store_pack(x + i, p, m, aligned);
  }
}

template <typename From, typename To>
__global__ void convert_kernel(const From* src, To* dst, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count())
    dst[i] = from_f32<To>(to_f32(src[i]));
}

// A strided view's layout, padded at the front to kMaxDims dims of size 1 so
// the index arithmetic unrolls.
struct StridedPair {
  int64_t shape[kMaxDims];
  int64_t src_strides[kMaxDims];
  int64_t dst_strides[kMaxDims];
};

// Element i (row-major over the shared shape) of src goes to element i of
// dst, each found through its own strides. E: the element's storage bits.
template <typename E>
__global__ void copy_strided_kernel(const E* src, E* dst, int64_t n, StridedPair layout) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) {
    int64_t rest = i, src_offset = 0, dst_offset = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      const int64_t size = layout.shape[d];
      if (size == 1) continue;
      const int64_t coord = rest % size;
      rest /= size;
      src_offset += coord * layout.src_strides[d];
      dst_offset += coord * layout.dst_strides[d];
    }
    dst[dst_offset] = src[src_offset];
  }
}

// ---- reductions ------------------------------------------------------------------

// One partial per block of the last reduction; guarded by reduce_mutex()
// from the launch until the host has read them.
__device__ double g_block_partials[kMaxReduceBlocks];

std::mutex& reduce_mutex() {
  static std::mutex m;
  return m;
}

struct SquareTerm {
  template <typename T>
  __device__ double operator()(T v) const {
    const double f = to_f32(v);
    return f * f;
  }
};
struct ValueTerm {
  template <typename T>
  __device__ double operator()(T v) const { return to_f32(v); }
};
struct NonNegativeTerm {
  __device__ double operator()(int32_t v) const { return v >= 0 ? 1.0 : 0.0; }
};

// g_block_partials[block] = sum of term(x[i]) over the block's elements.
// Each thread adds its elements in a fixed order in double.
template <typename T, typename Term>
__global__ void reduce_kernel(const T* x, int64_t n, bool aligned, Term term) {
  constexpr int K = Pack<T>::kSize;
  double acc = 0;
  for (int64_t k = thread_index(); k * K < n; k += thread_count()) {
    const int64_t i = k * K;
    const int m = pack_count(i, n, K);
    const Pack<T> p = load_pack(x + i, m, aligned);
#pragma unroll
    for (int j = 0; j < K; ++j)
      if (j < m) acc += term(p.v[j]);
  }
  acc = block_sum_all(acc);
  if (threadIdx.x == 0) g_block_partials[blockIdx.x] = acc;
}

// Sum of term(x[i]) over x [n], in double; waits for the stream.
template <typename T, typename Term>
double reduce(const T* x, int64_t n, Term term, const char* name) {
  if (n == 0) return 0.0;
  // Four packs per thread before a second block is worth it.
  const int64_t per_block = int64_t{kThreads} * Pack<T>::kSize * 4;
  const int blocks =
      static_cast<int>(std::clamp<int64_t>((n + per_block - 1) / per_block, 1, kMaxReduceBlocks));
  std::lock_guard<std::mutex> lock(reduce_mutex());
  cudaStream_t stream = compute_stream();
  launch<reduce_kernel<T, Term>>(blocks, kThreads, 0, stream, x, n, aligned16(x), term);
  SDP_CUDA_LAUNCH_CHECK(name);
  double partials[kMaxReduceBlocks];
  CUDA_CHECK(cudaMemcpyFromSymbolAsync(partials, g_block_partials, sizeof(double) * blocks, 0,
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double total = 0;
  for (int b = 0; b < blocks; ++b) total += partials[b];
  return total;
}

template <typename Bits>
void launch_fill(Tensor& x, Bits value) {
  const int64_t n = x.numel();
  cudaStream_t stream = compute_stream();
  // Patterns of one repeated byte (zero above all) need no kernel.
  unsigned char bytes[sizeof(Bits)];
  std::memcpy(bytes, &value, sizeof(Bits));
  if (std::all_of(bytes, bytes + sizeof(Bits), [&](unsigned char c) { return c == bytes[0]; })) {
    CUDA_CHECK(cudaMemsetAsync(x.raw(), bytes[0], x.bytes(), stream));
    return;
  }
  Bits* p = static_cast<Bits*>(x.raw());
  launch<fill_kernel<Bits>>(blocks_for(pack_total<Bits>(n)), kThreads, 0, stream, p, n, value,
      aligned16(p));
  SDP_CUDA_LAUNCH_CHECK("fill_kernel");
}

template <typename E>
void launch_copy_strided(const Tensor& src, Tensor& dst) {
  StridedPair layout;
  const int pad = kMaxDims - src.ndim();
  for (int d = 0; d < kMaxDims; ++d) {
    const bool real = d >= pad;
    layout.shape[d] = real ? src.size(d - pad) : 1;
    layout.src_strides[d] = real ? src.stride(d - pad) : 0;
    layout.dst_strides[d] = real ? dst.stride(d - pad) : 0;
  }
  const int64_t n = src.numel();
  launch<copy_strided_kernel<E>>(blocks_for(n), kThreads, 0, compute_stream(),
      static_cast<const E*>(src.raw()), static_cast<E*>(dst.raw()), n, layout);
  SDP_CUDA_LAUNCH_CHECK("copy_strided_kernel");
}

}  // namespace

void fill(Tensor& x, double value) {
  if (x.numel() == 0) return;
  switch (x.dtype()) {
    case DType::f32: {
      const float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      launch_fill<uint32_t>(x, bits);
      return;
    }
    case DType::i32:
      launch_fill<uint32_t>(x, static_cast<uint32_t>(static_cast<int32_t>(value)));
      return;
    case DType::bf16:
      launch_fill<uint16_t>(x, bf16::from_float(static_cast<float>(value)).bits);
      return;
    default:
      fail("fill: unsupported dtype ", dtype_name(x.dtype()), " on CUDA (valid: f32, bf16, i32)");
  }
}

void copy(const Tensor& src, Tensor& dst) {
  if (src.numel() == 0 || src.raw() == dst.raw()) return;
  if (src.is_contiguous() && dst.is_contiguous()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice,
                               compute_stream()));
    return;
  }
  switch (dtype_size(src.dtype())) {
    case 2: launch_copy_strided<uint16_t>(src, dst); return;
    case 4: launch_copy_strided<uint32_t>(src, dst); return;
    case 8: launch_copy_strided<uint64_t>(src, dst); return;
  }
  fail("copy: unsupported dtype ", dtype_name(src.dtype()), " on CUDA");
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  on_cuda_float(a.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = device_ptr<T>(a);
    const T* pb = device_ptr<T>(b);
    T* po = device_ptr<T>(out);
    const bool aligned = aligned16(pa) && aligned16(pb) && aligned16(po);
    launch<add_kernel<T>>(blocks_for(pack_total<T>(n)), kThreads, 0, compute_stream(), pa, pb, po,
        n, aligned);
    SDP_CUDA_LAUNCH_CHECK("add_kernel");
  });
}

void accumulate(Tensor& acc, const Tensor& x) { add(acc, x, acc); }

void scale(Tensor& x, double alpha) {
  const int64_t n = x.numel();
  if (n == 0) return;
  on_cuda_float(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    T* p = device_ptr<T>(x);
    launch<scale_kernel<T>>(blocks_for(pack_total<T>(n)), kThreads, 0, compute_stream(),
        p, n, static_cast<float>(alpha), aligned16(p));
    SDP_CUDA_LAUNCH_CHECK("scale_kernel");
  });
}

double sum_squares(const Tensor& x) {
  double result = 0;
  on_cuda_float(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    result = reduce(device_ptr<T>(x), x.numel(), SquareTerm{}, "reduce_kernel (sum_squares)");
  });
  return result;
}

double sum(const Tensor& x) {
  double result = 0;
  on_cuda_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    result = reduce(device_ptr<T>(x), x.numel(), ValueTerm{}, "reduce_kernel (sum)");
  });
  return result;
}

int64_t count_nonnegative(const Tensor& x) {
  // Per-block counts are whole numbers far below 2^53, exact in double.
  return static_cast<int64_t>(reduce(x.data<int32_t>(), x.numel(), NonNegativeTerm{},
                                     "reduce_kernel (count_nonnegative)"));
}

void convert(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype()) {
    copy(src, dst);
    return;
  }
  on_cuda_float(src.dtype(), "convert (src)", [&](auto from_tag) {
    on_cuda_float(dst.dtype(), "convert (dst)", [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      launch<convert_kernel<From, To>>(blocks_for(n), kThreads, 0, compute_stream(),
          device_ptr<From>(src), device_ptr<To>(dst), n);
      SDP_CUDA_LAUNCH_CHECK("convert_kernel");
    });
  });
}

double item(const Tensor& x, int64_t offset) {
  const size_t size = dtype_size(x.dtype());
  unsigned char bytes[8] = {};
  cudaStream_t stream = compute_stream();
  CUDA_CHECK(cudaMemcpyAsync(bytes, static_cast<const unsigned char*>(x.raw()) + offset * size,
                             size, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  switch (x.dtype()) {
    case DType::f32: { float v; std::memcpy(&v, bytes, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, bytes, 8); return v; }
    case DType::i32: { int32_t v; std::memcpy(&v, bytes, 4); return v; }
    case DType::u16: { uint16_t v; std::memcpy(&v, bytes, 2); return v; }
    case DType::bf16: { bf16 v; std::memcpy(&v.bits, bytes, 2); return v.to_float(); }
  }
  fail("item: unsupported dtype ", dtype_name(x.dtype()), " on CUDA");
}

}  // namespace sdp::cuda
