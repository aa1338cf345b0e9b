// CUDA batch normalization. x is read as [B, C, S] (S = H W): channel c is B
// runs of S contiguous elements, one per image, C S elements apart.
//
// Training forward and both backward passes: one block per channel walks
// the channel's elements (in 16-byte packs when S and the pointers allow),
// sums in f32 per thread, then over the block through block_sum_all, whose
// fixed order makes the result independent of scheduling. The variance is
// the mean of squared deviations from the mean, summed in a second pass
// (not E[x^2] - mean^2, which cancels badly when |mean| >> std). CIFAR
// ResNets have at most B S = 131072 elements per channel at batch 128, a
// few hundred microseconds of one SM's bandwidth at worst, and C >= 64
// channels keep most SMs busy; no cross-block reduction is needed (it would
// need scratch memory that these ops are not given).
// Evaluation forward: a plain elementwise map.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"

namespace sdp::cuda {
namespace {

constexpr int kChannelThreads = 1024;  // per channel block, at most
constexpr int kMapThreads = 256;
constexpr int64_t kMaxMapBlocks = 8192;  // grid-stride beyond

// K consecutive elements moved by one load or store (16 bytes when packed).
template <typename T, int K>
struct alignas(sizeof(T) * K) Vec {
  T v[K];
};

template <typename T>
constexpr int kPack = static_cast<int>(16 / sizeof(T));

// Calls f(i) for every pack i of channel c in a [batch, channels, units]
// array of packs, this thread's share: the block's threads take consecutive
// packs, so a warp reads contiguous memory within an image's run. The
// position (image, unit) advances by blockDim.x packs per step without a
// division.
template <typename F>
__device__ __forceinline__ void for_each_channel_pack(int64_t batch, int64_t channels, int64_t c,
                                                      int64_t units, F&& f) {
  const int64_t step_images = blockDim.x / units, step_units = blockDim.x % units;
  int64_t image = threadIdx.x / units, unit = threadIdx.x % units;
  while (image < batch) {
    f((image * channels + c) * units + unit);
    image += step_images;
    unit += step_units;
    if (unit >= units) {
      unit -= units;
      ++image;
    }
  }
}

// Grid: one block per channel; blockDim.x a multiple of 32. x and y hold
// [batch, channels, units] packs of K elements.
template <typename T, int K>
__global__ void __launch_bounds__(kChannelThreads)
    batchnorm_train_kernel(const T* x, const T* weight, const T* bias, float eps, float momentum,
                           T* y, float* save_mean, float* save_invstd, float* running_mean,
                           float* running_var, int64_t batch, int64_t channels, int64_t units) {
  SDP_LAUNCH_BOUNDS_CHECK(kChannelThreads);
  using V = Vec<T, K>;
  const int64_t c = blockIdx.x;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  const double count = static_cast<double>(batch) * static_cast<double>(units) * K;

  float sum = 0;
  for_each_channel_pack(batch, channels, c, units, [&](int64_t i) {
    const V v = xv[i];
#pragma unroll
    for (int j = 0; j < K; ++j) sum += to_f32(v.v[j]);
  });
  const float mean = static_cast<float>(static_cast<double>(block_sum_all(sum)) / count);

  float squares = 0;
  for_each_channel_pack(batch, channels, c, units, [&](int64_t i) {
    const V v = xv[i];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const float d = to_f32(v.v[j]) - mean;
      squares += d * d;
    }
  });
  const double squared_deviations = block_sum_all(squares);
  const float var = static_cast<float>(squared_deviations / count);
  const float invstd = 1.0f / sqrtf(var + eps);

  if (threadIdx.x == 0) {
    save_mean[c] = mean;
    save_invstd[c] = invstd;
    const float unbiased = count > 1 ? static_cast<float>(squared_deviations / (count - 1)) : var;
    if (running_mean != nullptr) {  // null: a recomputation, the running statistics stay
      running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
      running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
    }
  }

  const float scale = invstd * to_f32(weight[c]), shift = to_f32(bias[c]);
  for_each_channel_pack(batch, channels, c, units, [&](int64_t i) {
    const V v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>((to_f32(v.v[j]) - mean) * scale + shift);
    yv[i] = out;
  });
}

// The two per-channel sums of both backward passes: sum(dy) and
// sum(dy xhat), xhat = (x - mean) invstd, returned to every thread.
template <typename T, int K>
__device__ __forceinline__ void channel_gradient_sums(const Vec<T, K>* dyv, const Vec<T, K>* xv,
                                                      float mean, float invstd, int64_t batch,
                                                      int64_t channels, int64_t c, int64_t units,
                                                      float& sum_dy, float& sum_dy_xhat) {
  using V = Vec<T, K>;
  float s = 0, sx = 0;
  for_each_channel_pack(batch, channels, c, units, [&](int64_t i) {
    const V d = dyv[i], v = xv[i];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const float g = to_f32(d.v[j]);
      s += g;
      sx += g * ((to_f32(v.v[j]) - mean) * invstd);
    }
  });
  sum_dy = block_sum_all(s);
  sum_dy_xhat = block_sum_all(sx);
}

// Grid: one block per channel. Every pack of dy is read (the sums) before
// the barriers inside block_sum_all and then again, by the thread that
// writes dx there, just before it does: dx may alias dy.
template <typename T, int K>
__global__ void __launch_bounds__(kChannelThreads)
    batchnorm_backward_input_kernel(const T* dy, const T* x, const T* weight,
                                    const float* save_mean, const float* save_invstd, T* dx,
                                    int64_t batch, int64_t channels, int64_t units) {
  SDP_LAUNCH_BOUNDS_CHECK(kChannelThreads);
  using V = Vec<T, K>;
  const int64_t c = blockIdx.x;
  const V* dyv = reinterpret_cast<const V*>(dy);
  const V* xv = reinterpret_cast<const V*>(x);
  V* dxv = reinterpret_cast<V*>(dx);
  const float mean = save_mean[c], invstd = save_invstd[c];
  float sum_dy = 0, sum_dy_xhat = 0;
  channel_gradient_sums<T, K>(dyv, xv, mean, invstd, batch, channels, c, units, sum_dy,
                              sum_dy_xhat);
  const double count = static_cast<double>(batch) * static_cast<double>(units) * K;
  const float mean_dy = static_cast<float>(sum_dy / count);
  const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
  const float scale = to_f32(weight[c]) * invstd;
  for_each_channel_pack(batch, channels, c, units, [&](int64_t i) {
    const V d = dyv[i], v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const float xhat = (to_f32(v.v[j]) - mean) * invstd;
      out.v[j] = from_f32<T>(scale * (to_f32(d.v[j]) - mean_dy - xhat * mean_dy_xhat));
    }
    dxv[i] = out;
  });
}

// Grid: one block per channel; thread 0 adds the channel's sums.
template <typename T, int K>
__global__ void __launch_bounds__(kChannelThreads)
    batchnorm_backward_weight_kernel(const T* dy, const T* x, const float* save_mean,
                                     const float* save_invstd, float* dweight, float* dbias,
                                     int64_t batch, int64_t channels, int64_t units) {
  SDP_LAUNCH_BOUNDS_CHECK(kChannelThreads);
  using V = Vec<T, K>;
  const int64_t c = blockIdx.x;
  float sum_dy = 0, sum_dy_xhat = 0;
  channel_gradient_sums<T, K>(reinterpret_cast<const V*>(dy), reinterpret_cast<const V*>(x),
                              save_mean[c], save_invstd[c], batch, channels, c, units, sum_dy,
                              sum_dy_xhat);
  if (threadIdx.x == 0) {
    dweight[c] += sum_dy_xhat;
    dbias[c] += sum_dy;
  }
}

// Grid-stride over the packs of [batch, channels, units]; the channel of a
// pack is its row's index modulo channels. y may alias x (each pack is read
// before the same thread writes it).
template <typename T, int K>
__global__ void batchnorm_eval_kernel(const T* x, const T* weight, const T* bias,
                                      const float* running_mean, const float* running_var,
                                      float eps, T* y, int64_t packs, int64_t channels,
                                      int64_t units) {
  using V = Vec<T, K>;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs;
       i += stride) {
    const int64_t c = (i / units) % channels;
    const float mean = running_mean[c];
    const float scale = to_f32(weight[c]) / sqrtf(running_var[c] + eps);
    const float shift = to_f32(bias[c]);
    const V v = xv[i];
    V out;
#pragma unroll
    for (int j = 0; j < K; ++j) out.v[j] = from_f32<T>((to_f32(v.v[j]) - mean) * scale + shift);
    yv[i] = out;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// x's extents read as [batch, channels, spatial].
struct Layout {
  int64_t batch = 0, channels = 0, spatial = 0;
  bool empty() const { return batch == 0 || channels == 0 || spatial == 0; }
};

Layout layout_of(const Tensor& x, const char* op) {
  Layout l;
  l.batch = x.size(0);
  l.channels = x.size(1);
  l.spatial = 1;
  for (int d = 2; d < x.ndim(); ++d) l.spatial *= x.size(d);
  if (l.channels > INT_MAX) fail(op, ": ", l.channels, " channels exceed the grid's limit");
  return l;
}

// Whole warps, one thread per pack of a channel, at most kChannelThreads.
int channel_threads(const Layout& l, int k) {
  const int64_t packs = l.batch * (l.spatial / k);
  return static_cast<int>(std::clamp<int64_t>((packs + 31) / 32 * 32, 32, kChannelThreads));
}

// Packs of K elements need every channel run (spatial) to be whole packs
// and every pointer to sit on a 16-byte boundary.
bool packable(const Layout& l, int k, std::initializer_list<const void*> pointers) {
  if (l.spatial % k != 0) return false;
  for (const void* p : pointers)
    if (!aligned16(p)) return false;
  return true;
}

}  // namespace

namespace {

// The training kernel; running_mean, running_var null leave them alone.
void launch_batchnorm_train(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            double momentum, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                            float* running_mean, float* running_var, const char* op) {
  const Layout l = layout_of(x, op);
  if (l.empty()) return;
  on_cuda_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    T* py = device_ptr<T>(y);
    const dim3 grid(static_cast<unsigned>(l.channels));
    cudaStream_t stream = compute_stream();
    const auto launch_packed = [&](auto pack) {
      constexpr int P = decltype(pack)::value;
      launch<batchnorm_train_kernel<T, P>>(grid, channel_threads(l, P), 0, stream,
          px, device_ptr<T>(weight), device_ptr<T>(bias), static_cast<float>(eps),
          static_cast<float>(momentum), py, save_mean.data<float>(), save_invstd.data<float>(),
          running_mean, running_var, l.batch, l.channels, l.spatial / P);
    };
    if (packable(l, K, {px, py}))
      launch_packed(std::integral_constant<int, K>{});
    else
      launch_packed(std::integral_constant<int, 1>{});
    SDP_CUDA_LAUNCH_CHECK("batchnorm_train_kernel");
  });
}

}  // namespace

void batchnorm_forward_train(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                             double momentum, Tensor& y, Tensor& save_mean, Tensor& save_invstd,
                             Tensor& running_mean, Tensor& running_var) {
  launch_batchnorm_train(x, weight, bias, eps, momentum, y, save_mean, save_invstd,
                         running_mean.data<float>(), running_var.data<float>(),
                         "batchnorm_forward_train");
}

void batchnorm_forward_batch_stats(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   double eps, Tensor& y, Tensor& save_mean, Tensor& save_invstd) {
  launch_batchnorm_train(x, weight, bias, eps, /*momentum=*/0.0, y, save_mean, save_invstd,
                         nullptr, nullptr, "batchnorm_forward_batch_stats");
}

void batchnorm_forward_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps,
                            Tensor& y) {
  constexpr const char* op = "batchnorm_forward_eval";
  const Layout l = layout_of(x, op);
  if (l.empty()) return;
  on_cuda_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* px = device_ptr<T>(x);
    T* py = device_ptr<T>(y);
    cudaStream_t stream = compute_stream();
    const auto launch_packed = [&](auto pack) {
      constexpr int P = decltype(pack)::value;
      const int64_t units = l.spatial / P;
      const int64_t packs = l.batch * l.channels * units;
      const int blocks = static_cast<int>(
          std::clamp<int64_t>((packs + kMapThreads - 1) / kMapThreads, 1, kMaxMapBlocks));
      launch<batchnorm_eval_kernel<T, P>>(blocks, kMapThreads, 0, stream,
          px, device_ptr<T>(weight), device_ptr<T>(bias), running_mean.data<float>(),
          running_var.data<float>(), static_cast<float>(eps), py, packs, l.channels, units);
    };
    if (packable(l, K, {px, py}))
      launch_packed(std::integral_constant<int, K>{});
    else
      launch_packed(std::integral_constant<int, 1>{});
    SDP_CUDA_LAUNCH_CHECK("batchnorm_eval_kernel");
  });
}

void batchnorm_backward_input(const Tensor& dy, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx) {
  constexpr const char* op = "batchnorm_backward_input";
  const Layout l = layout_of(x, op);
  if (l.empty()) return;
  on_cuda_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    const T* px = device_ptr<T>(x);
    T* pdx = device_ptr<T>(dx);
    const dim3 grid(static_cast<unsigned>(l.channels));
    cudaStream_t stream = compute_stream();
    const auto launch_packed = [&](auto pack) {
      constexpr int P = decltype(pack)::value;
      launch<batchnorm_backward_input_kernel<T, P>>(grid, channel_threads(l, P), 0, stream,
          pdy, px, device_ptr<T>(weight), save_mean.data<float>(), save_invstd.data<float>(), pdx,
          l.batch, l.channels, l.spatial / P);
    };
    if (packable(l, K, {pdy, px, pdx}))
      launch_packed(std::integral_constant<int, K>{});
    else
      launch_packed(std::integral_constant<int, 1>{});
    SDP_CUDA_LAUNCH_CHECK("batchnorm_backward_input_kernel");
  });
}

void batchnorm_backward_weight(const Tensor& dy, const Tensor& x, const Tensor& save_mean,
                               const Tensor& save_invstd, Tensor& dweight, Tensor& dbias) {
  constexpr const char* op = "batchnorm_backward_weight";
  const Layout l = layout_of(x, op);
  if (l.empty()) return;
  on_cuda_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int K = kPack<T>;
    const T* pdy = device_ptr<T>(dy);
    const T* px = device_ptr<T>(x);
    const dim3 grid(static_cast<unsigned>(l.channels));
    cudaStream_t stream = compute_stream();
    const auto launch_packed = [&](auto pack) {
      constexpr int P = decltype(pack)::value;
      launch<batchnorm_backward_weight_kernel<T, P>>(grid, channel_threads(l, P), 0, stream,
          pdy, px, save_mean.data<float>(), save_invstd.data<float>(), dweight.data<float>(),
          dbias.data<float>(), l.batch, l.channels, l.spatial / P);
    };
    if (packable(l, K, {pdy, px}))
      launch_packed(std::integral_constant<int, K>{});
    else
      launch_packed(std::integral_constant<int, 1>{});
    SDP_CUDA_LAUNCH_CHECK("batchnorm_backward_weight_kernel");
  });
}

}  // namespace sdp::cuda
