#pragma once
// Pieces shared by the attention kernels (attention_forward.cu,
// attention_backward.cu): the per-call parameters, copies of tiles between
// global and shared memory, the warp-level bf16 tensor-core product with its
// fragment layouts, and the host-side launch helpers.
//
// Fragment layouts of mma.sync.m16n8k16 (bf16 in, f32 accumulate), per the
// PTX ISA, with g = lane / 4 and t = lane % 4; a register of two bf16 holds
// the lower column (or k) index in its low half:
//   A 16x16 row-major, 4 regs: a0 (row g, cols 2t, 2t+1), a1 (row g+8, same
//     cols), a2 (row g, cols 2t+8, 2t+9), a3 (row g+8, cols 2t+8, 2t+9)
//   B 16x8, 2 regs: b0 (k = 2t, 2t+1 of column g), b1 (k = 2t+8, 2t+9)
//   C 16x8 f32, 4 regs: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8)
// So two accumulator tiles side by side (16 x 16) are, once rounded to bf16,
// exactly an A operand: P and dS go from one product into the next without
// leaving registers.
#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"

namespace sdp::cuda::attention_detail {

using bf16_t = __nv_bfloat16;

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kThreads = 128;  // every attention kernel: four warps
inline constexpr int kMaxGridY = 65535;

// Per-call constants, passed by value to every kernel.
struct Params {
  int batch, seq, q_heads, kv_heads, head_dim;
  int group;           // q_heads / kv_heads: query heads sharing one kv head
  float scale;         // 1 / sqrt(head_dim)
  float scale_log2;    // scale * log2(e): softmax runs on exp2
  bool vector_loads;   // 16-byte global loads are safe (tensor-core path only)

  // Element offset of (batch b, head h, row 0, dim 0) in a [B, T, heads, Dh] tensor.
  __host__ __device__ int64_t head_offset(int b, int h, int heads) const {
    return (static_cast<int64_t>(b) * seq * heads + h) * head_dim;
  }
  // Distance between consecutive sequence rows of one head, in elements.
  __host__ __device__ int64_t row_stride(int heads) const {
    return static_cast<int64_t>(heads) * head_dim;
  }
  // Offset of (b, h, row 0) in lse [B, Hq, T].
  __host__ __device__ int64_t lse_offset(int b, int h) const {
    return (static_cast<int64_t>(b) * q_heads + h) * seq;
  }
};

// ---- warp reductions ------------------------------------------------------------
// The four lanes of a quad (lane / 4 equal) share one score row in both the
// mma layout (cols 2t, 2t+1 of row g) and the scalar kernels (4 threads a row).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// ---- tensor-core product ----------------------------------------------------------
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  // memcpy, not a uint32_t* cast: the emulated build's host compiler (g++ at
  // -O3) may drop a store read back through another type; nvcc emits the same
  // register move either way.
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

__device__ __forceinline__ uint32_t load_pair(const bf16_t* at) {
  return *reinterpret_cast<const uint32_t*>(at);  // `at` is 4-byte aligned (even index)
}

// d += a b: A 16x16 bf16 (row-major), B 16x8 bf16 (column-major), d 16x8 f32.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(SDP_CUDA_EMULATION)
  // The emulated device runs the same warp-wide product from the PTX ISA's
  // fragment layouts (cuda_emulator/runtime/thread_block.cpp).
  ::sdp::emu::mma_m16n8k16_row_col_f32_bf16(d, a, b);
#else
  __trap();  // the host never picks the tensor-core path below sm_80
#endif
}

// A operand: rows row0..row0+15, cols col0..col0+15 of a shared matrix
// [rows][kPitch] stored row-major.
template <int kPitch>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16_t* s, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  const bf16_t* at = s + (row0 + (lane >> 2)) * kPitch + col0 + 2 * (lane & 3);
  a[0] = load_pair(at);                   // row g,     cols 2t, 2t+1
  a[1] = load_pair(at + 8 * kPitch);      // row g + 8, cols 2t, 2t+1
  a[2] = load_pair(at + 8);               // row g,     cols 2t + 8, 2t + 9
  a[3] = load_pair(at + 8 * kPitch + 8);  // row g + 8, cols 2t + 8, 2t + 9
}

// B operand (16 x 8, k by n) with B[k][n] = s[(n0 + n) * kPitch + k0 + k]: the
// shared matrix holds B's columns as its rows, so each register is one
// aligned pair.
template <int kPitch>
__device__ __forceinline__ void load_b(uint32_t (&b)[2], const bf16_t* s, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const bf16_t* at = s + (n0 + (lane >> 2)) * kPitch + k0 + 2 * (lane & 3);
  b[0] = load_pair(at);      // k = 2t, 2t+1 of column g
  b[1] = load_pair(at + 8);  // k = 2t + 8, 2t + 9
}

// Accumulator tiles `left` (cols 0..7) and `right` (cols 8..15) of one
// 16 x 16 block, rounded to bf16, as an A operand (see the layouts above).
__device__ __forceinline__ void accumulators_to_a(uint32_t (&a)[4], const float (&left)[4],
                                                  const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

// ---- tiles between global and shared memory (tensor-core path, bf16) --------------
// Dims d0..d0+7 of sequence row `row` of one head (row r at src + r * stride),
// zeros past the sequence end or the head dim. The head dim is even here and
// every base pointer 4-byte aligned, so a pair of dims is one aligned word;
// vector_loads adds head_dim % 8 == 0 and 16-byte aligned bases.
__device__ __forceinline__ uint4 read_chunk(const bf16_t* src, int64_t stride, int row, int d0,
                                            const Params& p) {
  uint4 chunk = make_uint4(0u, 0u, 0u, 0u);
  if (row >= p.seq || d0 >= p.head_dim) return chunk;
  const bf16_t* at = src + static_cast<int64_t>(row) * stride + d0;
  if (p.vector_loads) return *reinterpret_cast<const uint4*>(at);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = d0 + 2 * i < p.head_dim ? load_pair(at + 2 * i) : 0u;
  chunk.x = w[0];
  chunk.y = w[1];
  chunk.z = w[2];
  chunk.w = w[3];
  return chunk;
}

// Rows row0..row0+kRows-1 into dst [kRows][kPitch], dims padded with zeros to kD.
template <int kRows, int kD, int kPitch>
__device__ void load_tile(bf16_t* dst, const bf16_t* src, int64_t stride, int row0,
                          const Params& p) {
  static_assert(kD % 8 == 0 && kPitch % 8 == 0, "16-byte shared stores need 8-element steps");
  constexpr int kChunks = kD / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = i % kChunks;
    const uint4 chunk = read_chunk(src, stride, row0 + r, c * 8, p);
    *reinterpret_cast<uint4*>(dst + r * kPitch + c * 8) = chunk;
  }
}

// The same rows stored transposed: dst [kD][kPitchT], dst[d * kPitchT + r] =
// dim d of row row0 + r. Consecutive threads take consecutive rows so the
// 16-bit shared stores of a warp fall in distinct banks.
template <int kRows, int kD, int kPitchT>
__device__ void load_tile_transposed(bf16_t* dst, const bf16_t* src, int64_t stride, int row0,
                                     const Params& p) {
  static_assert(kD % 8 == 0, "chunks of 8 dims");
  constexpr int kChunks = kD / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += blockDim.x) {
    const int r = i % kRows, c = i / kRows;
    const uint4 chunk = read_chunk(src, stride, row0 + r, c * 8, p);
    const uint32_t w[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const auto lo = static_cast<unsigned short>(w[j] & 0xffffu);  // the lower dim
      const auto hi = static_cast<unsigned short>(w[j] >> 16);
      dst[(c * 8 + 2 * j) * kPitchT + r] = __ushort_as_bfloat16(lo);
      dst[(c * 8 + 2 * j + 1) * kPitchT + r] = __ushort_as_bfloat16(hi);
    }
  }
}

// ---- tiles for the scalar path (any storage type, f32 in shared memory) -----------
// Rows row0..row0+kRows-1 into dst [kRows][pitch]; rows past the sequence end
// are zeros, dims >= head_dim are left alone (the scalar kernels never read them).
template <typename T, int kRows>
__device__ void load_tile_f32(float* dst, int pitch, const T* src, int64_t stride, int row0,
                              const Params& p) {
  const int n = kRows * p.head_dim;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int r = i / p.head_dim, d = i - r * p.head_dim;
    const int row = row0 + r;
    dst[r * pitch + d] = row < p.seq ? to_f32(src[static_cast<int64_t>(row) * stride + d]) : 0.f;
  }
}

// ---- row statistics for backward ---------------------------------------------------
// For the query rows row0..row0+kRows-1 of one head: lse_log2[r] = lse in the
// exp2 domain, d_row[r] = sum_d dO O (the softmax-gradient row term, from the
// stored dout and out as on the CPU); zeros past the sequence end. A warp per
// row, lanes over dims.
template <typename T, int kRows>
__device__ void load_row_stats(float* lse_log2, float* d_row, const float* lse_bh,
                               const T* dout_bh, const T* out_bh, int64_t stride, int row0,
                               const Params& p) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int r = warp; r < kRows; r += warps) {
    const int row = row0 + r;
    float acc = 0.f;
    if (row < p.seq) {
      const int64_t at = static_cast<int64_t>(row) * stride;
      for (int d = lane; d < p.head_dim; d += 32)
        acc += to_f32(dout_bh[at + d]) * to_f32(out_bh[at + d]);
    }
    acc = warp_sum(acc);  // every lane of the warp takes part
    if (lane == 0) {
      d_row[r] = acc;
      lse_log2[r] = row < p.seq ? lse_bh[row] * kLog2e : 0.f;
    }
  }
}

// ---- host side ---------------------------------------------------------------------
// Parameters of q [B, T, Hq, Dh] and k [B, T, Hkv, Dh] (already checked by the
// ops layer). Sizes stay well inside int so tile arithmetic (row0 + r) cannot
// overflow; element offsets are int64 throughout.
inline Params make_params(const Tensor& q, const Tensor& k, const char* op) {
  constexpr int64_t kLimit = int64_t{1} << 30;
  for (int i = 0; i < 4; ++i)
    if (q.size(i) >= kLimit || k.size(i) >= kLimit)
      fail(op, ": dimension ", i, " of q ", q.shape().str(), " or k ", k.shape().str(),
           " is too large for the CUDA kernels (limit ", kLimit - 1, ")");
  if (q.size(0) * q.size(2) > INT32_MAX)
    fail(op, ": batch x query heads = ", q.size(0) * q.size(2),
         " exceeds the CUDA grid limit of ", INT32_MAX);
  Params p{};
  p.batch = static_cast<int>(q.size(0));
  p.seq = static_cast<int>(q.size(1));
  p.q_heads = static_cast<int>(q.size(2));
  p.kv_heads = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.group = p.q_heads / p.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  p.vector_loads = false;
  return p;
}

// Calls f(std::integral_constant<int, D>) with D the tensor-core head-dim
// instance (16, 32, 64, 128) a head dim <= 128 is zero-padded to.
template <typename F>
void with_padded_head_dim(int head_dim, F&& f) {
  if (head_dim <= 16) f(std::integral_constant<int, 16>{});
  else if (head_dim <= 32) f(std::integral_constant<int, 32>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 64>{});
  else f(std::integral_constant<int, 128>{});
}

// Calls f(std::integral_constant<int, D>) with D the scalar path's register
// budget (32, 64, 128 dims) for a head dim <= 128.
template <typename F>
void with_scalar_head_dim(int head_dim, F&& f) {
  if (head_dim <= 32) f(std::integral_constant<int, 32>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 64>{});
  else f(std::integral_constant<int, 128>{});
}

inline bool aligned_to(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Whether the current device runs bf16 mma.sync (sm_80 and newer).
inline bool device_has_bf16_mma() {
  int device = 0, major = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 8;
}

// Above 48 KiB a kernel must opt in to its dynamic shared memory. Set on each
// launch: cheap, and right for whichever device is current.
template <typename Kernel>
void allow_shared_bytes(Kernel* kernel, int bytes) {
  if (bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// Tiles of `rows` covering the sequence, checked against the grid's y limit.
inline int tile_count(int seq, int rows, const char* op) {
  const int tiles = (seq + rows - 1) / rows;
  if (tiles > kMaxGridY)
    fail(op, ": sequence length ", seq, " needs ", tiles, " tiles of ", rows,
         " rows, more than the CUDA grid limit of ", kMaxGridY);
  return tiles;
}

}  // namespace sdp::cuda::attention_detail
