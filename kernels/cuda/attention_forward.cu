// Causal attention forward on CUDA: out and lse from q, k, v, one block per
// (tile of query rows, batch, query head). Key/value tiles stream through
// shared memory with an online softmax in f32; tiles entirely above the
// causal diagonal are never visited.
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

using namespace attention_detail;

// ---- tensor-core kernel (bf16) ---------------------------------------------------------
// 64 query rows a block (16 a warp) against key tiles of 64. kD: the head dim
// padded to a multiple of 16.
template <int kD>
struct ForwardTiles {
  static constexpr int kRows = 64;
  static constexpr int kKeys = 64;
  // Row pitches in elements: +8 shifts successive rows by 4 banks, so the
  // eight rows a fragment load touches hit distinct banks.
  static constexpr int kPitch = kD + 8;     // [rows][kD] tiles
  static constexpr int kPitchT = kKeys + 8;  // V^T [kD][kKeys]
  // keys [kKeys][kPitch] (holding Q [kRows][kPitch] first), then V^T.
  static constexpr int kSharedBytes = (kKeys * kPitch + kD * kPitchT) * 2;
  static_assert(kRows == kKeys, "the Q tile borrows the K tile's buffer; the diagonal logic "
                                "assumes square tiles");
};

template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                          const bf16_t* __restrict__ v, bf16_t* __restrict__ out,
                          float* __restrict__ lse, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  using Tiles = ForwardTiles<kD>;
  constexpr int kPitch = Tiles::kPitch, kPitchT = Tiles::kPitchT;
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  bf16_t* k_tile = reinterpret_cast<bf16_t*>(shared_raw);  // [kKeys][kPitch]; Q at first
  bf16_t* v_tile_t = k_tile + Tiles::kKeys * kPitch;         // [kD][kPitchT]

  const int b = blockIdx.x / p.q_heads, h = blockIdx.x % p.q_heads, kv_head = h / p.group;
  // Heaviest tiles (most keys) first: the grid's y runs from the last query tile.
  const int q_tile = gridDim.y - 1 - blockIdx.y;
  const int q0 = q_tile * Tiles::kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int quad_lane = lane & 3;
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const bf16_t* q_head = q + p.head_offset(b, h, p.q_heads);
  const bf16_t* k_head = k + p.head_offset(b, kv_head, p.kv_heads);
  const bf16_t* v_head = v + p.head_offset(b, kv_head, p.kv_heads);

  // This warp's 16 query rows as A operands, kept in registers throughout.
  load_tile<Tiles::kRows, kD, kPitch>(k_tile, q_head, q_stride, q0, p);
  __syncthreads();
  uint32_t q_frag[kD / 16][4];
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) load_a<kPitch>(q_frag[kk], k_tile, warp * 16, kk * 16);

  // The thread's two rows: g (accumulator regs 0, 1) and g + 8 (regs 2, 3).
  const int row_lo = q0 + warp * 16 + (lane >> 2);
  const int rows[2] = {row_lo, row_lo + 8};
  float o[kD / 8][4];  // 16 x kD output accumulators (8 dims a tile)
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};  // running max of the exp2-domain scores
  float row_sum[2] = {0.f, 0.f};  // this thread's share of sum exp2(s - row_max)

  for (int key_tile = 0; key_tile <= q_tile; ++key_tile) {
    const int k0 = key_tile * Tiles::kKeys;
    __syncthreads();  // every warp is done with the previous tile (or with Q)
    load_tile<Tiles::kKeys, kD, kPitch>(k_tile, k_head, kv_stride, k0, p);
    load_tile_transposed<Tiles::kKeys, kD, kPitchT>(v_tile_t, v_head, kv_stride, k0, p);
    __syncthreads();

    float s[Tiles::kKeys / 8][4];  // 16 x 64 scores, 8 keys a tile
#pragma unroll
    for (int n = 0; n < Tiles::kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int n = 0; n < Tiles::kKeys / 8; ++n) {
        uint32_t bk[2];
        load_b<kPitch>(bk, k_tile, n * 8, kk * 16);
        mma_bf16(s[n], q_frag[kk], bk);
      }

    // Causal mask (and the sequence end) in the exp2 domain.
#pragma unroll
    for (int n = 0; n < Tiles::kKeys / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = k0 + n * 8 + 2 * quad_lane + (i & 1);
        const int row = rows[i >> 1];
        s[n][i] = key <= row && key < p.seq ? s[n][i] * p.scale_log2 : -INFINITY;
      }

    // Online softmax: rescale what was accumulated to the new row maximum.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < Tiles::kKeys / 8; ++n)
        tile_max = fmaxf(tile_max, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
      const float new_max = fmaxf(row_max[half], quad_max(tile_max));
      // A row with every score masked so far keeps -inf; subtracting 0 then
      // keeps exp2 at 0 instead of producing NaN from -inf - -inf.
      const float ref = new_max == -INFINITY ? 0.f : new_max;
      const float rescale = exp2f(row_max[half] - ref);
      row_max[half] = new_max;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < Tiles::kKeys / 8; ++n)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float e = exp2f(s[n][2 * half + j] - ref);
          s[n][2 * half + j] = e;
          sum += e;
        }
      row_sum[half] = row_sum[half] * rescale + sum;
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        o[n][2 * half] *= rescale;
        o[n][2 * half + 1] *= rescale;
      }
    }

    // o += P V: P (16 x 64, in bf16) straight from the score registers.
#pragma unroll
    for (int kc = 0; kc < Tiles::kKeys / 16; ++kc) {
      uint32_t pa[4];
      accumulators_to_a(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t bv[2];
        load_b<kPitchT>(bv, v_tile_t, n * 8, kc * 16);
        mma_bf16(o[n], pa, bv);
      }
    }
  }

  bf16_t* out_head = out + p.head_offset(b, h, p.q_heads);
  float* lse_head = lse + p.lse_offset(b, h);
  // Quad sums first, with the whole warp converged; >= 1 since the row
  // maximum contributes exp2(0).
  const float totals[2] = {quad_sum(row_sum[0]), quad_sum(row_sum[1])};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float total = totals[half];
    const int row = rows[half];
    if (row >= p.seq) continue;
    const float inv = 1.f / total;
    bf16_t* out_row = out_head + static_cast<int64_t>(row) * q_stride;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int d = n * 8 + 2 * quad_lane;  // even, and head_dim is even: the pair is in or out
      if (d < p.head_dim)
        *reinterpret_cast<uint32_t*>(out_row + d) =
            pack_bf16(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
    }
    if (quad_lane == 0) lse_head[row] = (row_max[half] + log2f(total)) * kLn2;
  }
}

// ---- scalar kernel (f32 or bf16 storage, f32 arithmetic) ---------------------------------
// 32 query rows a block, 4 threads a row (a quad); key tiles of 32. Thread c
// of a quad scores keys c, c + 4, ... and owns output dims c, c + 4, ...
// kMaxD: head-dim budget of the register arrays (>= head_dim).
inline constexpr int kScalarRows = 32;
inline constexpr int kScalarKeys = 32;

template <int kMaxD>
struct ScalarForwardShared {
  static constexpr int kPitch = kMaxD + 1;  // odd: the quads' rows fall in distinct banks
  static constexpr int kProbPitch = kScalarKeys + 1;
  // q, k, v tiles [32][kPitch], probabilities [32][kProbPitch], all f32.
  static constexpr int kFloats = 3 * kScalarRows * kPitch + kScalarRows * kProbPitch;
  static constexpr int kSharedBytes = kFloats * 4;
};

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_forward_scalar(const T* __restrict__ q, const T* __restrict__ k,
                             const T* __restrict__ v, T* __restrict__ out,
                             float* __restrict__ lse, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  using Shared = ScalarForwardShared<kMaxD>;
  constexpr int kPitch = Shared::kPitch, kProbPitch = Shared::kProbPitch;
  static_assert(kScalarRows * 4 == kThreads, "a quad of threads per query row");
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  float* q_tile = reinterpret_cast<float*>(shared_raw);  // [32][kPitch]
  float* k_tile = q_tile + kScalarRows * kPitch;          // [32][kPitch]
  float* v_tile = k_tile + kScalarKeys * kPitch;          // [32][kPitch]
  float* probs = v_tile + kScalarKeys * kPitch;           // [32][kProbPitch]

  const int b = blockIdx.x / p.q_heads, h = blockIdx.x % p.q_heads, kv_head = h / p.group;
  const int q_tile_index = gridDim.y - 1 - blockIdx.y;
  const int q0 = q_tile_index * kScalarRows;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int row = q0 + r;
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const T* k_head = k + p.head_offset(b, kv_head, p.kv_heads);
  const T* v_head = v + p.head_offset(b, kv_head, p.kv_heads);

  const T* q_head = q + p.head_offset(b, h, p.q_heads);
  load_tile_f32<T, kScalarRows>(q_tile, kPitch, q_head, q_stride, q0, p);
  float o[kMaxD / 4];
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) o[n] = 0.f;
  float row_max = -INFINITY, row_sum = 0.f;  // row_sum: this thread's share

  for (int key_tile = 0; key_tile <= q_tile_index; ++key_tile) {
    const int k0 = key_tile * kScalarKeys;
    __syncthreads();  // previous tiles (and probs) are no longer read
    load_tile_f32<T, kScalarKeys>(k_tile, kPitch, k_head, kv_stride, k0, p);
    load_tile_f32<T, kScalarKeys>(v_tile, kPitch, v_head, kv_stride, k0, p);
    __syncthreads();

    float s[kScalarKeys / 4];
    float tile_max = -INFINITY;
#pragma unroll
    for (int m = 0; m < kScalarKeys / 4; ++m) {
      const int j = c + 4 * m, key = k0 + j;
      float dot = 0.f;
      for (int d = 0; d < p.head_dim; ++d) dot += q_tile[r * kPitch + d] * k_tile[j * kPitch + d];
      s[m] = key <= row && key < p.seq ? dot * p.scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[m]);
    }
    const float new_max = fmaxf(row_max, quad_max(tile_max));
    const float ref = new_max == -INFINITY ? 0.f : new_max;
    const float rescale = exp2f(row_max - ref);
    row_max = new_max;
    float sum = 0.f;
#pragma unroll
    for (int m = 0; m < kScalarKeys / 4; ++m) {
      const float e = exp2f(s[m] - ref);
      probs[r * kProbPitch + c + 4 * m] = e;
      sum += e;
    }
    row_sum = row_sum * rescale + sum;
    __syncwarp();  // the quad's probabilities are visible to all four threads

#pragma unroll
    for (int n = 0; n < kMaxD / 4; ++n) {
      const int d = c + 4 * n;
      if (d < p.head_dim) {
        float acc = o[n] * rescale;
        for (int j = 0; j < kScalarKeys; ++j)
          acc += probs[r * kProbPitch + j] * v_tile[j * kPitch + d];
        o[n] = acc;
      }
    }
  }

  const float total = quad_sum(row_sum);
  if (row >= p.seq) return;  // after the last barrier and shuffle: safe to leave
  const float inv = 1.f / total;
  T* out_row = out + p.head_offset(b, h, p.q_heads) + static_cast<int64_t>(row) * q_stride;
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) {
    const int d = c + 4 * n;
    if (d < p.head_dim) out_row[d] = from_f32<T>(o[n] * inv);
  }
  if (c == 0) lse[p.lse_offset(b, h) + row] = (row_max + log2f(total)) * kLn2;
}

// ---- launches ------------------------------------------------------------------------------
void launch_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                        Tensor& lse, Params p, const char* op) {
  with_padded_head_dim(p.head_dim, [&](auto padded) {
    constexpr int kD = decltype(padded)::value;
    using Tiles = ForwardTiles<kD>;
    const dim3 grid(static_cast<unsigned>(p.batch * p.q_heads),
                    static_cast<unsigned>(tile_count(p.seq, Tiles::kRows, op)));
    allow_shared_bytes(attention_forward_mma<kD>, Tiles::kSharedBytes);
    launch<attention_forward_mma<kD>>(grid, kThreads, Tiles::kSharedBytes, compute_stream(),
        device_ptr<bf16_t>(q), device_ptr<bf16_t>(k), device_ptr<bf16_t>(v),
        device_ptr<bf16_t>(out), lse.data<float>(), p);
    SDP_CUDA_LAUNCH_CHECK("attention_forward_mma");
  });
}

template <typename T>
void launch_forward_scalar(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                           Tensor& lse, Params p, const char* op) {
  with_scalar_head_dim(p.head_dim, [&](auto budget) {
    constexpr int kMaxD = decltype(budget)::value;
    constexpr int bytes = ScalarForwardShared<kMaxD>::kSharedBytes;
    const dim3 grid(static_cast<unsigned>(p.batch * p.q_heads),
                    static_cast<unsigned>(tile_count(p.seq, kScalarRows, op)));
    allow_shared_bytes(attention_forward_scalar<T, kMaxD>, bytes);
    launch<attention_forward_scalar<T, kMaxD>>(grid, kThreads, bytes, compute_stream(),
        device_ptr<T>(q), device_ptr<T>(k), device_ptr<T>(v), device_ptr<T>(out),
        lse.data<float>(), p);
    SDP_CUDA_LAUNCH_CHECK("attention_forward_scalar");
  });
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                       Tensor& lse, AttentionKernel kernel) {
  constexpr const char* op = "attention_forward";
  if (q.size(3) > kAttentionMaxHeadDim)
    fail(op, ": head dim ", q.size(3), " is not supported on CUDA (valid: 1..",
         kAttentionMaxHeadDim, ")");
  if (q.numel() == 0) return;  // no rows (or no heads): nothing to compute or write
  Params p = make_params(q, k, op);
  const bool tensor_cores = kernel == AttentionKernel::automatic && q.dtype() == DType::bf16 &&
                            p.head_dim % 2 == 0 && device_has_bf16_mma() &&
                            aligned_to(q.raw(), 4) && aligned_to(k.raw(), 4) &&
                            aligned_to(v.raw(), 4) && aligned_to(out.raw(), 4);
  if (tensor_cores) {
    p.vector_loads = p.head_dim % 8 == 0 && aligned_to(q.raw(), 16) && aligned_to(k.raw(), 16) &&
                     aligned_to(v.raw(), 16);
    launch_forward_mma(q, k, v, out, lse, p, op);
    return;
  }
  on_cuda_float(q.dtype(), op, [&](auto zero) {
    launch_forward_scalar<decltype(zero)>(q, k, v, out, lse, p, op);
  });
}

}  // namespace sdp::cuda
