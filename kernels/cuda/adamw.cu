// Multi-tensor AdamW (see adamw.h). Every range of the flat buffers is cut
// into tiles of kTile elements; one block updates one tile. The ranges
// travel in the kernel's parameters (a table of up to kMaxRanges entries,
// each with the index of its first tile), so a whole optimizer step is one
// launch with no device-side metadata to allocate or copy.
#include "kernels/cuda/adamw.h"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // independent elements in flight per thread
constexpr int64_t kTile = int64_t{kThreads} * kPerThread;
// 24-byte entries: 512 of them are 12 KiB of kernel parameters (CUDA 12.1+
// on Volta and newer allows 32 KiB), enough for every tensor of a model
// with about 56 LLaMA blocks in one launch.
constexpr int kMaxRanges = 512;

struct RangeEntry {
  int64_t offset;      // first element in the flat buffers
  int64_t numel;       // > 0
  int32_t first_tile;  // index of this range's first tile in the launch
  float decay;         // 1 - lr * weight_decay
};

struct RangeTable {
  RangeEntry entries[kMaxRanges];
  int count;
};

// Per-step scalars with the bias corrections folded in, as the CPU kernel.
struct Coefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;     // lr / (1 - beta1^step)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^step)
  float eps;
};

// The entry whose tiles include `tile`: the last one whose first_tile <=
// tile (entries are in increasing first_tile order, the first at 0, and none
// is empty). Every thread of a block searches the same way (uniform).
__device__ __forceinline__ int find_range(const RangeTable& table, int32_t tile) {
  int lo = 0, hi = table.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.entries[mid].first_tile <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// __grid_constant__: the table is read in place from parameter memory
// rather than copied to each thread's local memory for dynamic indexing.
__global__ void __launch_bounds__(kThreads)
    adamw_ranges_kernel(float* __restrict__ param, const float* __restrict__ grad,
                        float* __restrict__ m, float* __restrict__ v,
                        __nv_bfloat16* __restrict__ copy, const __grid_constant__ RangeTable table,
                        const Coefficients c) {
  SDP_LAUNCH_BOUNDS_CHECK(kThreads);
  const int32_t tile = static_cast<int32_t>(blockIdx.x);
  const RangeEntry& range = table.entries[find_range(table, tile)];
  const int64_t start = int64_t{tile - range.first_tile} * kTile;  // within the range

  int64_t index[kPerThread];
  bool active[kPerThread];
  float p[kPerThread], g[kPerThread], mi[kPerThread], vi[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t local = start + threadIdx.x + int64_t{k} * kThreads;
    active[k] = local < range.numel;
    index[k] = range.offset + local;
    if (active[k]) {
      p[k] = param[index[k]];
      g[k] = grad[index[k]];
      mi[k] = m[index[k]];
      vi[k] = v[index[k]];
    }
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    if (!active[k]) continue;
    const float mk = c.beta1 * mi[k] + c.one_minus_beta1 * g[k];
    const float vk = c.beta2 * vi[k] + c.one_minus_beta2 * g[k] * g[k];
    const float pk = p[k] * range.decay - c.step_size * mk / (sqrtf(vk) * c.inv_sqrt_bc2 + c.eps);
    m[index[k]] = mk;
    v[index[k]] = vk;
    param[index[k]] = pk;
    if (copy != nullptr) copy[index[k]] = from_f32<__nv_bfloat16>(pk);
  }
}

Coefficients coefficients(const AdamWStep& s) {
  const double step = static_cast<double>(s.step);
  const double bc1 = 1.0 - std::pow(s.beta1, step), bc2 = 1.0 - std::pow(s.beta2, step);
  return Coefficients{static_cast<float>(s.beta1),
                      static_cast<float>(1.0 - s.beta1),
                      static_cast<float>(s.beta2),
                      static_cast<float>(1.0 - s.beta2),
                      static_cast<float>(s.lr / bc1),
                      static_cast<float>(1.0 / std::sqrt(bc2)),
                      static_cast<float>(s.eps)};
}

void launch_ranges(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                   std::span<const AdamWRange> ranges, const AdamWStep& step, Tensor* copy,
                   const char* op) {
  const Coefficients c = coefficients(step);
  float* p_ptr = param.data<float>();
  const float* g_ptr = grad.data<float>();
  float* m_ptr = m.data<float>();
  float* v_ptr = v.data<float>();
  __nv_bfloat16* copy_ptr = copy != nullptr ? device_ptr<__nv_bfloat16>(*copy) : nullptr;

  RangeTable table{};
  int64_t tiles = 0;  // in the table so far
  auto flush = [&] {
    if (table.count == 0) return;
    launch<adamw_ranges_kernel>(static_cast<unsigned>(tiles), kThreads, 0, compute_stream(),
        p_ptr, g_ptr, m_ptr, v_ptr, copy_ptr, table, c);
    SDP_CUDA_LAUNCH_CHECK("adamw_ranges_kernel");
    table.count = 0;
    tiles = 0;
  };
  for (const AdamWRange& r : ranges) {
    if (r.numel == 0) continue;  // no tiles: would break the search's ordering
    const int64_t range_tiles = (r.numel + kTile - 1) / kTile;
    if (range_tiles > INT32_MAX)
      fail(op, ": a segment of ", r.numel, " elements exceeds one launch's ",
           int64_t{INT32_MAX} * kTile, " elements");
    if (table.count == kMaxRanges || tiles + range_tiles > INT32_MAX) flush();
    table.entries[table.count++] =
        RangeEntry{r.offset, r.numel, static_cast<int32_t>(tiles),
                   static_cast<float>(1.0 - step.lr * r.weight_decay)};
    tiles += range_tiles;
  }
  flush();
}

}  // namespace

void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                  const AdamWStep& step, double weight_decay) {
  const AdamWRange all{0, param.numel(), weight_decay};
  launch_ranges(param, grad, m, v, std::span<const AdamWRange>(&all, 1), step, nullptr,
                "adamw_update");
}

void adamw_update_segments(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                           std::span<const AdamWRange> ranges, const AdamWStep& step,
                           Tensor* low_precision_copy) {
  launch_ranges(param, grad, m, v, ranges, step, low_precision_copy, "adamw_update_segments");
}

}  // namespace sdp::cuda
