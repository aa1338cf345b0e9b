// CUDA window attention with relative position bias and mask. A window
// holds few tokens (N = 16 or 49), so one thread block per (window, head)
// keeps q, k, v and the N x N scores in shared memory (f32) and does the
// whole attention there: scores, bias, mask, softmax (f32, a warp per row),
// probs v. Backward likewise per (window, head): dV = P^T dO, dP = dO V^T,
// dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q, with dS
// left in probs. The bias table's gradient is then reduced from those score
// gradients by a second kernel, one block per table entry (r, h), summing
// in a fixed order (no atomics): the same bits on every run.
#include "kernels/cuda/window_attention.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

// Backward keeps one row of dP per warp in registers, kMaxTokens / 32 per
// lane; shared memory bounds N further (checked at launch).
constexpr int kMaxTokens = 256;
constexpr int kRowSlots = kMaxTokens / 32;
constexpr int kTableThreads = 256;  // table gradient: 8 warps, one index entry each per chunk

struct Dims {
  int64_t windows;   // Bw
  int tokens;        // N
  int heads;         // H
  int head_dim;      // Dh
  int mask_windows;  // nW; 0 without a mask
  int table_rows;    // R (forward: bias lookups outside [0, R) give NaN)
  float scale;

  // Row pitch of the [N][Dh] tiles: odd, so a warp reading one column of
  // consecutive rows hits distinct banks.
  __host__ __device__ int pitch() const { return head_dim + 1; }
  // Offset of (window b, token n, part s in {q, k, v}, head h, dim 0) in qkv.
  __device__ int64_t qkv_offset(int64_t b, int n, int s, int h) const {
    return ((((b * tokens + n) * 3 + s) * heads) + h) * static_cast<int64_t>(head_dim);
  }
  // Offset of (window b, token n, head h, dim 0) in out / dout.
  __device__ int64_t out_offset(int64_t b, int n, int h) const {
    return ((b * tokens + n) * heads + h) * static_cast<int64_t>(head_dim);
  }
};

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// Rows n of part s (q, k or v) of (b, h) into dst [N][pitch] as f32.
template <typename T>
__device__ void load_part(float* dst, const T* qkv, const Dims& d, int64_t b, int s, int h) {
  const int pitch = d.pitch();
  for (int e = threadIdx.x; e < d.tokens * d.head_dim; e += blockDim.x) {
    const int n = e / d.head_dim, k = e % d.head_dim;
    dst[n * pitch + k] = to_f32(qkv[d.qkv_offset(b, n, s, h) + k]);
  }
}

// Shared memory of either kernel: `parts` [N][pitch] tiles and one [N][N].
size_t shared_bytes(const Dims& d, int parts) {
  return sizeof(float) * (static_cast<size_t>(parts) * d.tokens * d.pitch() +
                          static_cast<size_t>(d.tokens) * d.tokens);
}

// Grid: one block per (b, h), bh = b H + h.
template <typename T>
__global__ void window_attention_forward_kernel(const T* qkv, const T* table,
                                                const int32_t* index, const T* mask, T* out,
                                                T* probs, Dims d) {
  SDP_DYNAMIC_SHARED(float, smem);
  const int N = d.tokens, H = d.heads, Dh = d.head_dim, pitch = d.pitch();
  float* q = smem;               // [N][pitch]
  float* k = q + N * pitch;      // [N][pitch]
  float* v = k + N * pitch;      // [N][pitch]
  float* s = v + N * pitch;      // [N][N] scores, then probabilities
  const int64_t bh = blockIdx.x;
  const int64_t b = bh / H;
  const int h = static_cast<int>(bh % H);
  load_part(q, qkv, d, b, 0, h);
  load_part(k, qkv, d, b, 1, h);
  load_part(v, qkv, d, b, 2, h);
  __syncthreads();

  const T* m = d.mask_windows > 0 ? mask + (b % d.mask_windows) * N * N : nullptr;
  for (int e = threadIdx.x; e < N * N; e += blockDim.x) {
    const int i = e / N, j = e % N;
    float dot = 0;
    for (int c = 0; c < Dh; ++c) dot += q[i * pitch + c] * k[j * pitch + c];
    const int32_t r = index[e];
    const float bias = r >= 0 && r < d.table_rows ? to_f32(table[static_cast<int64_t>(r) * H + h])
                                                  : nanf("");  // a bad index shows
    s[e] = d.scale * dot + bias + (m != nullptr ? to_f32(m[e]) : 0.0f);
  }
  __syncthreads();

  // Softmax, a warp per row; each lane reads and writes only its own
  // columns j = lane, lane + 32, ..., so the row needs no barrier inside.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  T* p_out = probs + bh * N * N;
  for (int i = warp; i < N; i += warps) {
    float* row = s + i * N;
    float mx = -INFINITY;
    for (int j = lane; j < N; j += 32) mx = fmaxf(mx, row[j]);
    mx = warp_max(mx);
    float sum = 0;
    for (int j = lane; j < N; j += 32) {
      const float e = expf(row[j] - mx);
      row[j] = e;
      sum += e;
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < N; j += 32) {
      const float p = row[j] * inv;
      row[j] = p;
      p_out[i * N + j] = from_f32<T>(p);
    }
  }
  __syncthreads();

  for (int e = threadIdx.x; e < N * Dh; e += blockDim.x) {
    const int i = e / Dh, c = e % Dh;
    float acc = 0;
    for (int j = 0; j < N; ++j) acc += s[i * N + j] * v[j * pitch + c];
    out[d.out_offset(b, i, h) + c] = from_f32<T>(acc);
  }
}

// Grid: one block per (b, h). probs in: P; out: dS.
template <typename T>
__global__ void window_attention_backward_kernel(const T* dout, const T* qkv, T* probs, T* dqkv,
                                                 Dims d) {
  SDP_DYNAMIC_SHARED(float, smem);
  const int N = d.tokens, H = d.heads, Dh = d.head_dim, pitch = d.pitch();
  float* q = smem;                // [N][pitch]
  float* k = q + N * pitch;       // [N][pitch]
  float* v = k + N * pitch;       // [N][pitch]
  float* g = v + N * pitch;       // [N][pitch] dO
  float* s = g + N * pitch;       // [N][N] P, then dS
  const int64_t bh = blockIdx.x;
  const int64_t b = bh / H;
  const int h = static_cast<int>(bh % H);
  T* p_io = probs + bh * N * N;
  load_part(q, qkv, d, b, 0, h);
  load_part(k, qkv, d, b, 1, h);
  load_part(v, qkv, d, b, 2, h);
  for (int e = threadIdx.x; e < N * Dh; e += blockDim.x) {
    const int n = e / Dh, c = e % Dh;
    g[n * pitch + c] = to_f32(dout[d.out_offset(b, n, h) + c]);
  }
  for (int e = threadIdx.x; e < N * N; e += blockDim.x) s[e] = to_f32(p_io[e]);
  __syncthreads();

  // dV[j] = sum_i P[i, j] dO[i], while s still holds P.
  for (int e = threadIdx.x; e < N * Dh; e += blockDim.x) {
    const int j = e / Dh, c = e % Dh;
    float acc = 0;
    for (int i = 0; i < N; ++i) acc += s[i * N + j] * g[i * pitch + c];
    dqkv[d.qkv_offset(b, j, 2, h) + c] = from_f32<T>(acc);
  }
  __syncthreads();  // every read of P above before dS overwrites it

  // dS, a warp per row i: lane holds dP[i, j] for j = lane + 32 t.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int i = warp; i < N; i += warps) {
    float dp[kRowSlots];
    float dsum = 0;
#pragma unroll
    for (int t = 0; t < kRowSlots; ++t) {
      const int j = lane + 32 * t;
      dp[t] = 0;
      if (j < N) {
        float acc = 0;
        for (int c = 0; c < Dh; ++c) acc += g[i * pitch + c] * v[j * pitch + c];
        dp[t] = acc;
        dsum += s[i * N + j] * acc;
      }
    }
    dsum = warp_sum(dsum);
#pragma unroll
    for (int t = 0; t < kRowSlots; ++t) {
      const int j = lane + 32 * t;
      if (j < N) {
        const float ds = s[i * N + j] * (dp[t] - dsum);
        s[i * N + j] = ds;
        p_io[i * N + j] = from_f32<T>(ds);
      }
    }
  }
  __syncthreads();

  // dQ[i] = scale sum_j dS[i, j] K[j]; dK[j] = scale sum_i dS[i, j] Q[i].
  for (int e = threadIdx.x; e < N * Dh; e += blockDim.x) {
    const int n = e / Dh, c = e % Dh;
    float aq = 0, ak = 0;
    for (int j = 0; j < N; ++j) aq += s[n * N + j] * k[j * pitch + c];
    for (int i = 0; i < N; ++i) ak += s[i * N + n] * q[i * pitch + c];
    dqkv[d.qkv_offset(b, n, 0, h) + c] = from_f32<T>(d.scale * aq);
    dqkv[d.qkv_offset(b, n, 1, h) + c] = from_f32<T>(d.scale * ak);
  }
}

// dtable[r, h] += sum over windows b and entries e with index[e] = r of
// ds[b, h, e]. Grid (R, H). The index is scanned in chunks of kTableThreads
// entries; a chunk's hits are listed in entry order (ballot + prefix), then
// each thread sums its windows b = t, t + 256, ... over the listed entries
// in double, and the block adds the thread sums in a fixed order.
template <typename T>
__global__ void table_gradient_kernel(const T* ds, const int32_t* index, float* dtable,
                                      int64_t windows, int n2, int heads) {
  __shared__ int hits[kTableThreads];
  __shared__ int warp_hits[kTableThreads / 32];
  const int r = blockIdx.x, h = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double acc = 0;
  for (int c0 = 0; c0 < n2; c0 += kTableThreads) {
    const int e = c0 + threadIdx.x;
    const bool hit = e < n2 && index[e] == r;
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_hits[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kTableThreads / 32; ++w) {
      if (w < warp) before += warp_hits[w];
      total += warp_hits[w];
    }
    if (hit) hits[before + __popc(ballot & ((1u << lane) - 1u))] = e;
    __syncthreads();
    for (int64_t b = threadIdx.x; b < windows; b += kTableThreads) {
      const T* src = ds + (b * heads + h) * static_cast<int64_t>(n2);
      for (int m = 0; m < total; ++m) acc += to_f32(src[hits[m]]);
    }
    __syncthreads();  // the next chunk rewrites hits and warp_hits
  }
  acc = block_sum_all(acc);
  if (threadIdx.x == 0) {
    float* at = dtable + static_cast<int64_t>(r) * heads + h;
    *at = static_cast<float>(static_cast<double>(*at) + acc);
  }
}

Dims dims_of(const Tensor& qkv, int64_t table_rows, double scale, const char* op) {
  const int64_t N = qkv.size(1), H = qkv.size(3), Dh = qkv.size(4);
  if (N > kMaxTokens)
    fail(op, ": N = ", N, " tokens per window exceeds the CUDA kernel's limit of ", kMaxTokens);
  if (H > 65535 || Dh > 65535 || table_rows > INT32_MAX)
    fail(op, ": heads ", H, ", head dim ", Dh, " or table rows ", table_rows,
         " exceed the CUDA kernel's limits");
  if (qkv.size(0) * H > INT32_MAX)
    fail(op, ": Bw x H = ", qkv.size(0) * H, " exceeds the CUDA grid limit of ", INT32_MAX);
  Dims d{};
  d.windows = qkv.size(0);
  d.tokens = static_cast<int>(N);
  d.heads = static_cast<int>(H);
  d.head_dim = static_cast<int>(Dh);
  d.mask_windows = 0;
  d.table_rows = static_cast<int>(table_rows);
  d.scale = static_cast<float>(scale);
  return d;
}

// Whole warps: 4 for small windows, 8 from 32 x 32 scores on.
int block_threads(const Dims& d) { return d.tokens * d.tokens >= 1024 ? 256 : 128; }

// Opts the kernel in to `bytes` of dynamic shared memory, failing with a
// message when the device has less per block.
template <typename Kernel>
void reserve_shared(Kernel* kernel, size_t bytes, const Dims& d, const char* op) {
  int device = 0, limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit))
    fail(op, ": N = ", d.tokens, ", Dh = ", d.head_dim, " needs ", bytes,
         " bytes of shared memory per block, more than the device's ", limit);
  if (bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
}

}  // namespace

void window_attention_forward(const Tensor& qkv, const Tensor& table, const Tensor& index,
                              const Tensor& mask, double scale, Tensor& out, Tensor& probs) {
  constexpr const char* op = "window_attention_forward";
  if (qkv.numel() == 0) return;
  Dims d = dims_of(qkv, table.size(0), scale, op);
  if (mask.ndim() != 0) d.mask_windows = static_cast<int>(mask.size(0));
  on_cuda_float(qkv.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = shared_bytes(d, 3);
    reserve_shared(window_attention_forward_kernel<T>, bytes, d, op);
    const T* pmask = d.mask_windows > 0 ? device_ptr<T>(mask) : nullptr;
    launch<window_attention_forward_kernel<T>>(static_cast<unsigned>(d.windows * d.heads),
        block_threads(d), bytes, compute_stream(), device_ptr<T>(qkv), device_ptr<T>(table),
        index.data<int32_t>(), pmask, device_ptr<T>(out), device_ptr<T>(probs), d);
    SDP_CUDA_LAUNCH_CHECK("window_attention_forward_kernel");
  });
}

void window_attention_backward_input(const Tensor& dout, const Tensor& qkv, Tensor& probs,
                                     const Tensor& index, double scale, Tensor& dqkv,
                                     Tensor* dtable) {
  constexpr const char* op = "window_attention_backward_input";
  if (qkv.numel() == 0) return;
  const int64_t table_rows = dtable != nullptr ? dtable->size(0) : 0;
  const Dims d = dims_of(qkv, table_rows, scale, op);
  on_cuda_float(qkv.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const size_t bytes = shared_bytes(d, 4);
    reserve_shared(window_attention_backward_kernel<T>, bytes, d, op);
    cudaStream_t stream = compute_stream();
    launch<window_attention_backward_kernel<T>>(static_cast<unsigned>(d.windows * d.heads),
        block_threads(d), bytes, stream, device_ptr<T>(dout), device_ptr<T>(qkv),
        device_ptr<T>(probs), device_ptr<T>(dqkv), d);
    SDP_CUDA_LAUNCH_CHECK("window_attention_backward_kernel");
    if (dtable == nullptr) return;
    const dim3 grid(static_cast<unsigned>(table_rows), static_cast<unsigned>(d.heads));
    launch<table_gradient_kernel<T>>(grid, kTableThreads, 0, stream,
        device_ptr<T>(probs), index.data<int32_t>(), dtable->data<float>(), d.windows,
        d.tokens * d.tokens, d.heads);
    SDP_CUDA_LAUNCH_CHECK("table_gradient_kernel");
  });
}

}  // namespace sdp::cuda
