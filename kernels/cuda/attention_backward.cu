// Causal attention backward on CUDA, in two kernels that need no workspace
// and no atomics (so gradients are bit-identical from run to run):
//   kv: a block owns (batch, kv head, tile of keys) and loops over the query
//       heads of its group and the query tiles at or below the diagonal,
//       accumulating dK and dV in registers; no other block writes its rows.
//   q:  a block owns (batch, query head, tile of query rows) and loops over
//       the key tiles at or left of the diagonal, accumulating dQ.
// Both recompute P = exp(S - lse) from q, k and the saved lse, and the row
// term D_i = sum_d dO_id O_id from dout and out, instead of storing them:
// the extra work is one more Q K^T and dO V^T product than a one-kernel
// scheme with atomically accumulated dQ.
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

using namespace attention_detail;

// ---- tensor-core kernels (bf16) -----------------------------------------------------------
// kD: the head dim padded to a multiple of 16. At kD = 128 the second tile
// dimension shrinks to 32 so the accumulators stay in registers.
template <int kD>
struct KvTiles {
  static constexpr int kKeys = 64;                        // 16 a warp
  static constexpr int kQueries = kD >= 128 ? 32 : 64;    // query rows a step
  static constexpr int kPitch = kD + 8;                   // [rows][kD] tiles (+8: see forward)
  static constexpr int kPitchT = kQueries + 8;            // [kD][kQueries] transposed tiles
  // k, v [kKeys][kPitch]; q, dout [kQueries][kPitch]; q^T, dout^T [kD][kPitchT]
  // (bf16), then lse and D [kQueries] (f32).
  static constexpr int kElems = 2 * kKeys * kPitch + 2 * kQueries * kPitch + 2 * kD * kPitchT;
  static constexpr int kSharedBytes = kElems * 2 + 2 * kQueries * 4;
};

template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_mma(const bf16_t* __restrict__ dout, const bf16_t* __restrict__ q,
                              const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                              const bf16_t* __restrict__ out, const float* __restrict__ lse,
                              bf16_t* __restrict__ dk, bf16_t* __restrict__ dv, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  using Tiles = KvTiles<kD>;
  constexpr int kKeys = Tiles::kKeys, kQueries = Tiles::kQueries;
  constexpr int kPitch = Tiles::kPitch, kPitchT = Tiles::kPitchT;
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  bf16_t* k_tile = reinterpret_cast<bf16_t*>(shared_raw);  // [kKeys][kPitch]
  bf16_t* v_tile = k_tile + kKeys * kPitch;                 // [kKeys][kPitch]
  bf16_t* q_tile = v_tile + kKeys * kPitch;                 // [kQueries][kPitch]
  bf16_t* do_tile = q_tile + kQueries * kPitch;             // [kQueries][kPitch]
  bf16_t* q_tile_t = do_tile + kQueries * kPitch;           // [kD][kPitchT]
  bf16_t* do_tile_t = q_tile_t + kD * kPitchT;              // [kD][kPitchT]
  float* lse_log2 = reinterpret_cast<float*>(do_tile_t + kD * kPitchT);  // [kQueries]
  float* d_row = lse_log2 + kQueries;                                     // [kQueries]

  const int b = blockIdx.x / p.kv_heads, kv_head = blockIdx.x % p.kv_heads;
  const int k0 = blockIdx.y * kKeys;  // y ascending: key tile 0 (the most queries) first
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, quad_lane = lane & 3;
  const int key_lo = k0 + warp * 16 + (lane >> 2);
  const int keys[2] = {key_lo, key_lo + 8};  // accumulator rows g and g + 8
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const int64_t kv_offset = p.head_offset(b, kv_head, p.kv_heads);

  load_tile<kKeys, kD, kPitch>(k_tile, k + kv_offset, kv_stride, k0, p);
  load_tile<kKeys, kD, kPitch>(v_tile, v + kv_offset, kv_stride, k0, p);

  float dk_acc[kD / 8][4], dv_acc[kD / 8][4];  // 16 keys x kD each
#pragma unroll
  for (int n = 0; n < kD / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) dk_acc[n][i] = dv_acc[n][i] = 0.f;

  const int q_tiles = (p.seq + kQueries - 1) / kQueries;
  for (int h = kv_head * p.group; h < (kv_head + 1) * p.group; ++h) {
    const int64_t q_offset = p.head_offset(b, h, p.q_heads);
    const float* lse_head = lse + p.lse_offset(b, h);
    // Query tiles wholly before this key tile see none of its keys.
    for (int qt = k0 / kQueries; qt < q_tiles; ++qt) {
      const int q0 = qt * kQueries;
      __syncthreads();  // every warp is done with the previous query tile
      load_tile<kQueries, kD, kPitch>(q_tile, q + q_offset, q_stride, q0, p);
      load_tile<kQueries, kD, kPitch>(do_tile, dout + q_offset, q_stride, q0, p);
      load_tile_transposed<kQueries, kD, kPitchT>(q_tile_t, q + q_offset, q_stride, q0, p);
      load_tile_transposed<kQueries, kD, kPitchT>(do_tile_t, dout + q_offset, q_stride, q0, p);
      load_row_stats<bf16_t, kQueries>(lse_log2, d_row, lse_head, dout + q_offset,
                                       out + q_offset, q_stride, q0, p);
      __syncthreads();

      // S^T = K Q^T and dP^T = V dO^T: 16 keys x kQueries per warp.
      float st[kQueries / 8][4], dpt[kQueries / 8][4];
#pragma unroll
      for (int n = 0; n < kQueries / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) st[n][i] = dpt[n][i] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t ka[4], va[4];
        load_a<kPitch>(ka, k_tile, warp * 16, kk * 16);
        load_a<kPitch>(va, v_tile, warp * 16, kk * 16);
#pragma unroll
        for (int n = 0; n < kQueries / 8; ++n) {
          uint32_t bq[2], bdo[2];
          load_b<kPitch>(bq, q_tile, n * 8, kk * 16);
          mma_bf16(st[n], ka, bq);
          load_b<kPitch>(bdo, do_tile, n * 8, kk * 16);
          mma_bf16(dpt[n], va, bdo);
        }
      }

      // P^T = exp(S^T - lse) on the causal pairs, dS^T = P^T (dP^T - D), in place.
#pragma unroll
      for (int n = 0; n < kQueries / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int local = n * 8 + 2 * quad_lane + (i & 1);
          const int query = q0 + local;
          const bool causal = keys[i >> 1] <= query && query < p.seq;
          const float prob = causal ? exp2f(st[n][i] * p.scale_log2 - lse_log2[local]) : 0.f;
          st[n][i] = prob;
          dpt[n][i] = prob * (dpt[n][i] - d_row[local]);
        }

      // dV += P^T dO, dK += dS^T Q (scaled once at the end).
#pragma unroll
      for (int kc = 0; kc < kQueries / 16; ++kc) {
        uint32_t pa[4], dsa[4];
        accumulators_to_a(pa, st[2 * kc], st[2 * kc + 1]);
        accumulators_to_a(dsa, dpt[2 * kc], dpt[2 * kc + 1]);
#pragma unroll
        for (int n = 0; n < kD / 8; ++n) {
          uint32_t bt[2];
          load_b<kPitchT>(bt, do_tile_t, n * 8, kc * 16);
          mma_bf16(dv_acc[n], pa, bt);
          load_b<kPitchT>(bt, q_tile_t, n * 8, kc * 16);
          mma_bf16(dk_acc[n], dsa, bt);
        }
      }
    }
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int key = keys[half];
    if (key >= p.seq) continue;
    const int64_t at = kv_offset + static_cast<int64_t>(key) * kv_stride;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int d = n * 8 + 2 * quad_lane;  // even; head_dim even: the pair is in or out
      if (d >= p.head_dim) continue;
      *reinterpret_cast<uint32_t*>(dk + at + d) =
          pack_bf16(dk_acc[n][2 * half] * p.scale, dk_acc[n][2 * half + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv + at + d) =
          pack_bf16(dv_acc[n][2 * half], dv_acc[n][2 * half + 1]);
    }
  }
}

template <int kD>
struct QTiles {
  static constexpr int kRows = 64;                     // 16 a warp
  static constexpr int kKeys = kD >= 128 ? 32 : 64;    // keys a step
  static constexpr int kPitch = kD + 8;
  static constexpr int kPitchT = kKeys + 8;            // K^T [kD][kKeys]
  // q, dout [kRows][kPitch]; k, v [kKeys][kPitch]; k^T [kD][kPitchT] (bf16),
  // then lse and D [kRows] (f32).
  static constexpr int kElems = 2 * kRows * kPitch + 2 * kKeys * kPitch + kD * kPitchT;
  static constexpr int kSharedBytes = kElems * 2 + 2 * kRows * 4;
};

template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_mma(const bf16_t* __restrict__ dout, const bf16_t* __restrict__ q,
                             const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                             const bf16_t* __restrict__ out, const float* __restrict__ lse,
                             bf16_t* __restrict__ dq, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  using Tiles = QTiles<kD>;
  constexpr int kRows = Tiles::kRows, kKeys = Tiles::kKeys;
  constexpr int kPitch = Tiles::kPitch, kPitchT = Tiles::kPitchT;
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  bf16_t* q_tile = reinterpret_cast<bf16_t*>(shared_raw);  // [kRows][kPitch]
  bf16_t* do_tile = q_tile + kRows * kPitch;                // [kRows][kPitch]
  bf16_t* k_tile = do_tile + kRows * kPitch;                // [kKeys][kPitch]
  bf16_t* v_tile = k_tile + kKeys * kPitch;                 // [kKeys][kPitch]
  bf16_t* k_tile_t = v_tile + kKeys * kPitch;               // [kD][kPitchT]
  float* lse_log2 = reinterpret_cast<float*>(k_tile_t + kD * kPitchT);  // [kRows]
  float* d_row = lse_log2 + kRows;                                       // [kRows]

  const int b = blockIdx.x / p.q_heads, h = blockIdx.x % p.q_heads, kv_head = h / p.group;
  const int q_tile_index = gridDim.y - 1 - blockIdx.y;  // heaviest (last) tiles first
  const int q0 = q_tile_index * kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, quad_lane = lane & 3;
  const int local_lo = warp * 16 + (lane >> 2);
  const int locals[2] = {local_lo, local_lo + 8};  // accumulator rows g and g + 8
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const int64_t q_offset = p.head_offset(b, h, p.q_heads);
  const int64_t kv_offset = p.head_offset(b, kv_head, p.kv_heads);

  load_tile<kRows, kD, kPitch>(q_tile, q + q_offset, q_stride, q0, p);
  load_tile<kRows, kD, kPitch>(do_tile, dout + q_offset, q_stride, q0, p);
  load_row_stats<bf16_t, kRows>(lse_log2, d_row, lse + p.lse_offset(b, h), dout + q_offset,
                                out + q_offset, q_stride, q0, p);

  float dq_acc[kD / 8][4];  // 16 rows x kD
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) dq_acc[n][0] = dq_acc[n][1] = dq_acc[n][2] = dq_acc[n][3] = 0.f;

  // Keys up to the tile's last row (or the sequence end).
  const int last_key = min(q0 + kRows - 1, p.seq - 1);
  for (int key_tile = 0; key_tile <= last_key / kKeys; ++key_tile) {
    const int k0 = key_tile * kKeys;
    __syncthreads();  // every warp is done with the previous key tile (and the loads above land)
    load_tile<kKeys, kD, kPitch>(k_tile, k + kv_offset, kv_stride, k0, p);
    load_tile<kKeys, kD, kPitch>(v_tile, v + kv_offset, kv_stride, k0, p);
    load_tile_transposed<kKeys, kD, kPitchT>(k_tile_t, k + kv_offset, kv_stride, k0, p);
    __syncthreads();

    // S = Q K^T and dP = dO V^T: 16 rows x kKeys per warp.
    float s[kKeys / 8][4], dp[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] = dp[n][i] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t qa[4], doa[4];
      load_a<kPitch>(qa, q_tile, warp * 16, kk * 16);
      load_a<kPitch>(doa, do_tile, warp * 16, kk * 16);
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        uint32_t bk[2], bv[2];
        load_b<kPitch>(bk, k_tile, n * 8, kk * 16);
        mma_bf16(s[n], qa, bk);
        load_b<kPitch>(bv, v_tile, n * 8, kk * 16);
        mma_bf16(dp[n], doa, bv);
      }
    }

    // dS = P (dP - D), P = exp(S - lse) on the causal pairs; into s.
    const float row_lse[2] = {lse_log2[locals[0]], lse_log2[locals[1]]};
    const float row_d[2] = {d_row[locals[0]], d_row[locals[1]]};
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = q0 + locals[i >> 1];
        const int key = k0 + n * 8 + 2 * quad_lane + (i & 1);
        const bool causal = key <= row && row < p.seq;
        const float prob = causal ? exp2f(s[n][i] * p.scale_log2 - row_lse[i >> 1]) : 0.f;
        s[n][i] = prob * (dp[n][i] - row_d[i >> 1]);
      }

    // dQ += dS K (scaled once at the end).
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      uint32_t dsa[4];
      accumulators_to_a(dsa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t bk[2];
        load_b<kPitchT>(bk, k_tile_t, n * 8, kc * 16);
        mma_bf16(dq_acc[n], dsa, bk);
      }
    }
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = q0 + locals[half];
    if (row >= p.seq) continue;
    bf16_t* dq_row = dq + q_offset + static_cast<int64_t>(row) * q_stride;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      const int d = n * 8 + 2 * quad_lane;
      if (d < p.head_dim)
        *reinterpret_cast<uint32_t*>(dq_row + d) =
            pack_bf16(dq_acc[n][2 * half] * p.scale, dq_acc[n][2 * half + 1] * p.scale);
    }
  }
}

// ---- scalar kernels (f32 or bf16 storage, f32 arithmetic) -----------------------------------
// Tiles of 32 rows; 4 threads (a quad) per owned row: thread c of a quad
// takes the other side's rows c, c + 4, ... and owned dims c, c + 4, ...
inline constexpr int kScalarTile = 32;
inline constexpr int kScalarProbPitch = kScalarTile + 1;

template <int kMaxD>
struct ScalarKvShared {
  static constexpr int kPitch = kMaxD + 1;  // odd: distinct banks across rows
  // k, v, q, dout [32][kPitch]; probs, dscores [32][kScalarProbPitch]; lse, D [32]
  static constexpr int kFloats = 4 * kScalarTile * kPitch + 2 * kScalarTile * kScalarProbPitch +
                                 2 * kScalarTile;
  static constexpr int kSharedBytes = kFloats * 4;
};

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_scalar(const T* __restrict__ dout, const T* __restrict__ q,
                                 const T* __restrict__ k, const T* __restrict__ v,
                                 const T* __restrict__ out, const float* __restrict__ lse,
                                 T* __restrict__ dk, T* __restrict__ dv, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  constexpr int kPitch = ScalarKvShared<kMaxD>::kPitch, kProbPitch = kScalarProbPitch;
  static_assert(kScalarTile * 4 == kThreads, "a quad of threads per key");
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  float* k_tile = reinterpret_cast<float*>(shared_raw);  // [32][kPitch]
  float* v_tile = k_tile + kScalarTile * kPitch;          // [32][kPitch]
  float* q_tile = v_tile + kScalarTile * kPitch;          // [32][kPitch]
  float* do_tile = q_tile + kScalarTile * kPitch;         // [32][kPitch]
  float* probs = do_tile + kScalarTile * kPitch;          // [32 keys][kProbPitch]
  float* dscores = probs + kScalarTile * kProbPitch;      // [32 keys][kProbPitch]
  float* lse_log2 = dscores + kScalarTile * kProbPitch;   // [32]
  float* d_row = lse_log2 + kScalarTile;                  // [32]

  const int b = blockIdx.x / p.kv_heads, kv_head = blockIdx.x % p.kv_heads;
  const int k0 = blockIdx.y * kScalarTile;
  const int j = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int key = k0 + j;
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const int64_t kv_offset = p.head_offset(b, kv_head, p.kv_heads);

  load_tile_f32<T, kScalarTile>(k_tile, kPitch, k + kv_offset, kv_stride, k0, p);
  load_tile_f32<T, kScalarTile>(v_tile, kPitch, v + kv_offset, kv_stride, k0, p);
  float dk_acc[kMaxD / 4], dv_acc[kMaxD / 4];
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) dk_acc[n] = dv_acc[n] = 0.f;

  const int q_tiles = (p.seq + kScalarTile - 1) / kScalarTile;
  for (int h = kv_head * p.group; h < (kv_head + 1) * p.group; ++h) {
    const int64_t q_offset = p.head_offset(b, h, p.q_heads);
    for (int qt = blockIdx.y; qt < q_tiles; ++qt) {  // earlier query tiles see no key here
      const int q0 = qt * kScalarTile;
      __syncthreads();
      load_tile_f32<T, kScalarTile>(q_tile, kPitch, q + q_offset, q_stride, q0, p);
      load_tile_f32<T, kScalarTile>(do_tile, kPitch, dout + q_offset, q_stride, q0, p);
      load_row_stats<T, kScalarTile>(lse_log2, d_row, lse + p.lse_offset(b, h), dout + q_offset,
                                     out + q_offset, q_stride, q0, p);
      __syncthreads();

#pragma unroll
      for (int m = 0; m < kScalarTile / 4; ++m) {
        const int i = c + 4 * m, query = q0 + i;
        float s = 0.f, dp = 0.f;
        for (int d = 0; d < p.head_dim; ++d) {
          s += k_tile[j * kPitch + d] * q_tile[i * kPitch + d];
          dp += v_tile[j * kPitch + d] * do_tile[i * kPitch + d];
        }
        const bool causal = key <= query && query < p.seq;
        const float prob = causal ? exp2f(s * p.scale_log2 - lse_log2[i]) : 0.f;
        probs[j * kProbPitch + i] = prob;
        dscores[j * kProbPitch + i] = prob * (dp - d_row[i]);
      }
      __syncwarp();  // the quad's row of probs and dscores is visible to all four threads

#pragma unroll
      for (int n = 0; n < kMaxD / 4; ++n) {
        const int d = c + 4 * n;
        if (d >= p.head_dim) continue;
        float dv_sum = dv_acc[n], dk_sum = dk_acc[n];
        for (int i = 0; i < kScalarTile; ++i) {
          dv_sum += probs[j * kProbPitch + i] * do_tile[i * kPitch + d];
          dk_sum += dscores[j * kProbPitch + i] * q_tile[i * kPitch + d];
        }
        dv_acc[n] = dv_sum;
        dk_acc[n] = dk_sum;
      }
    }
  }

  if (key >= p.seq) return;  // after the last barrier
  const int64_t at = kv_offset + static_cast<int64_t>(key) * kv_stride;
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) {
    const int d = c + 4 * n;
    if (d >= p.head_dim) continue;
    dk[at + d] = from_f32<T>(dk_acc[n] * p.scale);
    dv[at + d] = from_f32<T>(dv_acc[n]);
  }
}

template <int kMaxD>
struct ScalarQShared {
  static constexpr int kPitch = kMaxD + 1;
  // q, dout, k, v [32][kPitch]; dscores [32 rows][kScalarProbPitch]
  static constexpr int kFloats = 4 * kScalarTile * kPitch + kScalarTile * kScalarProbPitch;
  static constexpr int kSharedBytes = kFloats * 4;
};

template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_scalar(const T* __restrict__ dout, const T* __restrict__ q,
                                const T* __restrict__ k, const T* __restrict__ v,
                                const T* __restrict__ out, const float* __restrict__ lse,
                                T* __restrict__ dq, Params p) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  constexpr int kPitch = ScalarQShared<kMaxD>::kPitch, kProbPitch = kScalarProbPitch;
  SDP_DYNAMIC_SHARED(unsigned char, shared_raw);
  float* q_tile = reinterpret_cast<float*>(shared_raw);  // [32][kPitch]
  float* do_tile = q_tile + kScalarTile * kPitch;         // [32][kPitch]
  float* k_tile = do_tile + kScalarTile * kPitch;         // [32][kPitch]
  float* v_tile = k_tile + kScalarTile * kPitch;          // [32][kPitch]
  float* dscores = v_tile + kScalarTile * kPitch;         // [32 rows][kProbPitch]

  const int b = blockIdx.x / p.q_heads, h = blockIdx.x % p.q_heads, kv_head = h / p.group;
  const int q_tile_index = gridDim.y - 1 - blockIdx.y;
  const int q0 = q_tile_index * kScalarTile;
  const int r = threadIdx.x >> 2, c = threadIdx.x & 3;
  const int row = q0 + r;
  const int64_t q_stride = p.row_stride(p.q_heads), kv_stride = p.row_stride(p.kv_heads);
  const int64_t q_offset = p.head_offset(b, h, p.q_heads);
  const int64_t kv_offset = p.head_offset(b, kv_head, p.kv_heads);

  load_tile_f32<T, kScalarTile>(q_tile, kPitch, q + q_offset, q_stride, q0, p);
  load_tile_f32<T, kScalarTile>(do_tile, kPitch, dout + q_offset, q_stride, q0, p);
  // The row's lse (exp2 domain) and D = sum_d dO O, summed over the quad.
  float d_part = 0.f, row_lse = 0.f;
  if (row < p.seq) {
    const int64_t at = q_offset + static_cast<int64_t>(row) * q_stride;
    for (int d = c; d < p.head_dim; d += 4) d_part += to_f32(dout[at + d]) * to_f32(out[at + d]);
    row_lse = lse[p.lse_offset(b, h) + row] * kLog2e;
  }
  const float row_d = quad_sum(d_part);

  float dq_acc[kMaxD / 4];
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) dq_acc[n] = 0.f;

  for (int key_tile = 0; key_tile <= q_tile_index; ++key_tile) {
    const int k0 = key_tile * kScalarTile;
    __syncthreads();
    load_tile_f32<T, kScalarTile>(k_tile, kPitch, k + kv_offset, kv_stride, k0, p);
    load_tile_f32<T, kScalarTile>(v_tile, kPitch, v + kv_offset, kv_stride, k0, p);
    __syncthreads();

#pragma unroll
    for (int m = 0; m < kScalarTile / 4; ++m) {
      const int jj = c + 4 * m, key = k0 + jj;
      float s = 0.f, dp = 0.f;
      for (int d = 0; d < p.head_dim; ++d) {
        s += q_tile[r * kPitch + d] * k_tile[jj * kPitch + d];
        dp += do_tile[r * kPitch + d] * v_tile[jj * kPitch + d];
      }
      const bool causal = key <= row && row < p.seq;
      const float prob = causal ? exp2f(s * p.scale_log2 - row_lse) : 0.f;
      dscores[r * kProbPitch + jj] = prob * (dp - row_d);
    }
    __syncwarp();

#pragma unroll
    for (int n = 0; n < kMaxD / 4; ++n) {
      const int d = c + 4 * n;
      if (d >= p.head_dim) continue;
      float sum = dq_acc[n];
      for (int jj = 0; jj < kScalarTile; ++jj)
        sum += dscores[r * kProbPitch + jj] * k_tile[jj * kPitch + d];
      dq_acc[n] = sum;
    }
  }

  if (row >= p.seq) return;
  T* dq_row = dq + q_offset + static_cast<int64_t>(row) * q_stride;
#pragma unroll
  for (int n = 0; n < kMaxD / 4; ++n) {
    const int d = c + 4 * n;
    if (d < p.head_dim) dq_row[d] = from_f32<T>(dq_acc[n] * p.scale);
  }
}

// ---- launches --------------------------------------------------------------------------------
struct BackwardArgs {
  const Tensor &dout, &q, &k, &v, &out, &lse;
  Tensor &dq, &dk, &dv;
};

void launch_backward_mma(const BackwardArgs& a, Params p, const char* op) {
  with_padded_head_dim(p.head_dim, [&](auto padded) {
    constexpr int kD = decltype(padded)::value;
    const dim3 kv_grid(static_cast<unsigned>(p.batch * p.kv_heads),
                       static_cast<unsigned>(tile_count(p.seq, KvTiles<kD>::kKeys, op)));
    allow_shared_bytes(attention_backward_kv_mma<kD>, KvTiles<kD>::kSharedBytes);
    launch<attention_backward_kv_mma<kD>>(kv_grid, kThreads, KvTiles<kD>::kSharedBytes,
        compute_stream(), device_ptr<bf16_t>(a.dout), device_ptr<bf16_t>(a.q),
        device_ptr<bf16_t>(a.k), device_ptr<bf16_t>(a.v), device_ptr<bf16_t>(a.out),
        a.lse.data<float>(), device_ptr<bf16_t>(a.dk), device_ptr<bf16_t>(a.dv), p);
    SDP_CUDA_LAUNCH_CHECK("attention_backward_kv_mma");

    const dim3 q_grid(static_cast<unsigned>(p.batch * p.q_heads),
                      static_cast<unsigned>(tile_count(p.seq, QTiles<kD>::kRows, op)));
    allow_shared_bytes(attention_backward_q_mma<kD>, QTiles<kD>::kSharedBytes);
    launch<attention_backward_q_mma<kD>>(q_grid, kThreads, QTiles<kD>::kSharedBytes,
        compute_stream(), device_ptr<bf16_t>(a.dout), device_ptr<bf16_t>(a.q),
        device_ptr<bf16_t>(a.k), device_ptr<bf16_t>(a.v), device_ptr<bf16_t>(a.out),
        a.lse.data<float>(), device_ptr<bf16_t>(a.dq), p);
    SDP_CUDA_LAUNCH_CHECK("attention_backward_q_mma");
  });
}

template <typename T>
void launch_backward_scalar(const BackwardArgs& a, Params p, const char* op) {
  with_scalar_head_dim(p.head_dim, [&](auto budget) {
    constexpr int kMaxD = decltype(budget)::value;
    const int tiles = tile_count(p.seq, kScalarTile, op);
    const dim3 kv_grid(static_cast<unsigned>(p.batch * p.kv_heads), static_cast<unsigned>(tiles));
    constexpr int kv_bytes = ScalarKvShared<kMaxD>::kSharedBytes;
    allow_shared_bytes(attention_backward_kv_scalar<T, kMaxD>, kv_bytes);
    launch<attention_backward_kv_scalar<T, kMaxD>>(kv_grid, kThreads, kv_bytes, compute_stream(),
        device_ptr<T>(a.dout), device_ptr<T>(a.q), device_ptr<T>(a.k), device_ptr<T>(a.v),
        device_ptr<T>(a.out), a.lse.data<float>(), device_ptr<T>(a.dk), device_ptr<T>(a.dv), p);
    SDP_CUDA_LAUNCH_CHECK("attention_backward_kv_scalar");

    const dim3 q_grid(static_cast<unsigned>(p.batch * p.q_heads), static_cast<unsigned>(tiles));
    constexpr int q_bytes = ScalarQShared<kMaxD>::kSharedBytes;
    allow_shared_bytes(attention_backward_q_scalar<T, kMaxD>, q_bytes);
    launch<attention_backward_q_scalar<T, kMaxD>>(q_grid, kThreads, q_bytes, compute_stream(),
        device_ptr<T>(a.dout), device_ptr<T>(a.q), device_ptr<T>(a.k), device_ptr<T>(a.v),
        device_ptr<T>(a.out), a.lse.data<float>(), device_ptr<T>(a.dq), p);
    SDP_CUDA_LAUNCH_CHECK("attention_backward_q_scalar");
  });
}

}  // namespace

void attention_backward_input(const Tensor& dout, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& out, const Tensor& lse, Tensor& dq,
                              Tensor& dk, Tensor& dv, AttentionKernel kernel) {
  constexpr const char* op = "attention_backward_input";
  if (q.size(3) > kAttentionMaxHeadDim)
    fail(op, ": head dim ", q.size(3), " is not supported on CUDA (valid: 1..",
         kAttentionMaxHeadDim, ")");
  if (q.numel() == 0) {
    // No query rows reach k and v (no query heads): their gradients are zero.
    if (dk.numel() > 0) {
      CUDA_CHECK(cudaMemsetAsync(dk.raw(), 0, dk.bytes(), compute_stream()));
      CUDA_CHECK(cudaMemsetAsync(dv.raw(), 0, dv.bytes(), compute_stream()));
    }
    return;
  }
  Params p = make_params(q, k, op);
  const BackwardArgs args{dout, q, k, v, out, lse, dq, dk, dv};
  bool tensor_cores = kernel == AttentionKernel::automatic && q.dtype() == DType::bf16 &&
                      p.head_dim % 2 == 0 && device_has_bf16_mma();
  const Tensor* const every[] = {&dout, &q, &k, &v, &out, &dq, &dk, &dv};
  for (const Tensor* t : every) tensor_cores = tensor_cores && aligned_to(t->raw(), 4);
  if (tensor_cores) {
    p.vector_loads = p.head_dim % 8 == 0;
    const Tensor* const loaded[] = {&dout, &q, &k, &v};  // read in 16-byte chunks
    for (const Tensor* t : loaded) p.vector_loads = p.vector_loads && aligned_to(t->raw(), 16);
    launch_backward_mma(args, p, op);
    return;
  }
  on_cuda_float(q.dtype(), op, [&](auto zero) {
    launch_backward_scalar<decltype(zero)>(args, p, op);
  });
}

}  // namespace sdp::cuda
