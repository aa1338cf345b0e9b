// CUDA index maps of the Swin Transformer. Every map is a gather: one
// thread per output unit (a 16-byte pack of channels when the channel count
// and the pointers allow, one element otherwise) computes where its input
// lies and copies it, so outputs are written coalesced and exactly once.
// The shifted window partition folds torch.roll into the index arithmetic:
// no intermediate copy. The token mean sums in f32 in token order.
#include "kernels/cuda/window_layout.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/bf16_math.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/vec.cuh"

namespace sdp::cuda {
namespace {

using namespace vec;

// images [B, C, H, W] -> patches [B, H/p, W/p, C p p], element by element:
// patch element (ch, r, c) of patch (i, j) is pixel (i p + r, j p + c).
template <typename T>
__global__ void patchify_kernel(const T* images, T* patches, int64_t total, int64_t channels,
                                int64_t height, int64_t width, int64_t p) {
  const int64_t per_patch = channels * p * p, wp = width / p, hp = height / p;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t e = o % per_patch, patch = o / per_patch;
    const int64_t ch = e / (p * p), r = e / p % p, c = e % p;
    const int64_t j = patch % wp, bi = patch / wp;
    const int64_t i = bi % hp, b = bi / hp;
    patches[o] = images[((b * channels + ch) * height + i * p + r) * width + j * p + c];
  }
}

// Geometry of x [B, H, W, C] cut into w x w windows shifted by s, counted in
// units of K channels (units = C / K per token).
struct WindowMap {
  int64_t batch, height, width, units, window, shift;
};

// windows [B nH nW, w w, C] gathered from x [B, H, W, C]:
//   windows[(b nH + i) nW + j, r w + c] = x[b, (i w + r + s) mod H, (j w + c + s) mod W].
template <typename T, int K>
__global__ void window_partition_kernel(const T* x, T* windows, WindowMap g, int64_t total) {
  using V = Vec<T, K>;
  const V* src = reinterpret_cast<const V*>(x);
  V* dst = reinterpret_cast<V*>(windows);
  const int64_t w = g.window, nh = g.height / w, nw = g.width / w;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t u = o % g.units, t = o / g.units;  // t: token row of the windows
    const int64_t token = t % (w * w), win = t / (w * w);
    const int64_t r = token / w, c = token % w;
    const int64_t j = win % nw, i = win / nw % nh, b = win / (nw * nh);
    const int64_t row = (i * w + r + g.shift) % g.height;
    const int64_t col = (j * w + c + g.shift) % g.width;
    dst[o] = src[((b * g.height + row) * g.width + col) * g.units + u];
  }
}

// The inverse map, gathered from the x side: pixel (row, col) came from
// window position (row - s) mod H, (col - s) mod W.
template <typename T, int K>
__global__ void window_merge_kernel(const T* windows, T* x, WindowMap g, int64_t total) {
  using V = Vec<T, K>;
  const V* src = reinterpret_cast<const V*>(windows);
  V* dst = reinterpret_cast<V*>(x);
  const int64_t w = g.window, nh = g.height / w, nw = g.width / w;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t u = o % g.units, pixel = o / g.units;
    const int64_t col = pixel % g.width, row = pixel / g.width % g.height;
    const int64_t b = pixel / (g.width * g.height);
    const int64_t rr = (row - g.shift + g.height) % g.height;  // 0 <= shift < w <= H
    const int64_t cc = (col - g.shift + g.width) % g.width;
    const int64_t win = (b * nh + rr / w) * nw + cc / w;
    const int64_t token = (rr % w) * w + cc % w;
    dst[o] = src[(win * w * w + token) * g.units + u];
  }
}

// y [B, H/2, W/2, 4C] from x [B, H, W, C] (units of K channels): neighbour k
// of output (i, j) is x[2i + k % 2, 2j + k / 2] (timm's order).
template <typename T, int K>
__global__ void patch_merge_forward_kernel(const T* x, T* y, int64_t height, int64_t width,
                                           int64_t units, int64_t total) {
  using V = Vec<T, K>;
  const V* src = reinterpret_cast<const V*>(x);
  V* dst = reinterpret_cast<V*>(y);
  const int64_t ho = height / 2, wo = width / 2;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t u = o % units, k = o / units % 4, pos = o / (4 * units);
    const int64_t j = pos % wo, i = pos / wo % ho, b = pos / (wo * ho);
    dst[o] = src[((b * height + 2 * i + k % 2) * width + 2 * j + k / 2) * units + u];
  }
}

// dx [B, H, W, C] gathered from dy [B, H/2, W/2, 4C]: pixel (row, col) is
// neighbour k = row % 2 + 2 (col % 2) of output (row / 2, col / 2).
template <typename T, int K>
__global__ void patch_merge_backward_kernel(const T* dy, T* dx, int64_t height, int64_t width,
                                            int64_t units, int64_t total) {
  using V = Vec<T, K>;
  const V* src = reinterpret_cast<const V*>(dy);
  V* dst = reinterpret_cast<V*>(dx);
  const int64_t ho = height / 2, wo = width / 2;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t u = o % units, pixel = o / units;
    const int64_t col = pixel % width, row = pixel / width % height;
    const int64_t b = pixel / (width * height);
    const int64_t k = row % 2 + 2 * (col % 2);
    dst[o] = src[(((b * ho + row / 2) * wo + col / 2) * 4 + k) * units + u];
  }
}

// y [B, C] = mean over t of x [B, L, C]: one thread per (b, c), adjacent
// threads on adjacent channels (coalesced rows), tokens summed in order.
template <typename T>
__global__ void token_mean_forward_kernel(const T* x, T* y, int64_t batch, int64_t tokens,
                                          int64_t channels) {
  const float inv = 1.0f / static_cast<float>(tokens);
  for (int64_t o = first_index(); o < batch * channels; o += grid_stride()) {
    const int64_t b = o / channels, c = o % channels;
    const T* xb = x + b * tokens * channels + c;
    float s = 0;
    for (int64_t t = 0; t < tokens; ++t) s += to_f32(xb[t * channels]);
    y[o] = from_f32<T>(s * inv);
  }
}

// dx [B, L, C] = dy [B, C] / L.
template <typename T>
__global__ void token_mean_backward_kernel(const T* dy, T* dx, int64_t tokens, int64_t channels,
                                           int64_t total) {
  const float inv = 1.0f / static_cast<float>(tokens);
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t c = o % channels, b = o / (channels * tokens);
    dx[o] = from_f32<T>(to_f32(dy[b * channels + c]) * inv);
  }
}

// Calls f(std::integral_constant<int, K>) with K the pack size when the
// channel count and every pointer allow 16-byte packs, else 1.
template <typename T, typename F>
void with_pack(int64_t channels, const void* a, const void* b, F&& f) {
  constexpr int K = kPack<T>;
  if (channels % K == 0 && aligned16(a) && aligned16(b))
    f(std::integral_constant<int, K>{});
  else
    f(std::integral_constant<int, 1>{});
}

// x [B, H, W, C] read in packs of `pack` channels.
WindowMap window_map_of(const Tensor& x, int64_t pack, int64_t window, int64_t shift) {
  return {x.size(0), x.size(1), x.size(2), x.size(3) / pack, window, shift};
}

}  // namespace

void patchify(const Tensor& images, int64_t patch, Tensor& patches) {
  const int64_t total = patches.numel();
  if (total == 0) return;
  on_cuda_float(images.dtype(), "patchify", [&](auto tag) {
    using T = decltype(tag);
    launch<patchify_kernel<T>>(blocks_for(total), kThreads, 0, compute_stream(),
        device_ptr<T>(images), device_ptr<T>(patches), total, images.size(1), images.size(2),
        images.size(3), patch);
    SDP_CUDA_LAUNCH_CHECK("patchify_kernel");
  });
}

void window_partition(const Tensor& x, int64_t window, int64_t shift, Tensor& windows) {
  if (x.numel() == 0) return;
  on_cuda_float(x.dtype(), "window_partition", [&](auto tag) {
    using T = decltype(tag);
    const T* px = device_ptr<T>(x);
    T* pw = device_ptr<T>(windows);
    with_pack<T>(x.size(3), px, pw, [&](auto pack) {
      constexpr int K = decltype(pack)::value;
      const int64_t total = x.numel() / K;
      launch<window_partition_kernel<T, K>>(blocks_for(total), kThreads, 0, compute_stream(),
          px, pw, window_map_of(x, K, window, shift), total);
    });
    SDP_CUDA_LAUNCH_CHECK("window_partition_kernel");
  });
}

void window_merge(const Tensor& windows, int64_t window, int64_t shift, Tensor& x) {
  if (x.numel() == 0) return;
  on_cuda_float(x.dtype(), "window_merge", [&](auto tag) {
    using T = decltype(tag);
    const T* pw = device_ptr<T>(windows);
    T* px = device_ptr<T>(x);
    with_pack<T>(x.size(3), px, pw, [&](auto pack) {
      constexpr int K = decltype(pack)::value;
      const int64_t total = x.numel() / K;
      launch<window_merge_kernel<T, K>>(blocks_for(total), kThreads, 0, compute_stream(),
          pw, px, window_map_of(x, K, window, shift), total);
    });
    SDP_CUDA_LAUNCH_CHECK("window_merge_kernel");
  });
}

void patch_merge_forward(const Tensor& x, Tensor& y) {
  if (x.numel() == 0) return;
  on_cuda_float(x.dtype(), "patch_merge_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = device_ptr<T>(x);
    T* py = device_ptr<T>(y);
    with_pack<T>(x.size(3), px, py, [&](auto pack) {
      constexpr int K = decltype(pack)::value;
      const int64_t total = y.numel() / K;
      launch<patch_merge_forward_kernel<T, K>>(blocks_for(total), kThreads, 0, compute_stream(),
          px, py, x.size(1), x.size(2), x.size(3) / K, total);
    });
    SDP_CUDA_LAUNCH_CHECK("patch_merge_forward_kernel");
  });
}

void patch_merge_backward_input(const Tensor& dy, Tensor& dx) {
  if (dx.numel() == 0) return;
  on_cuda_float(dx.dtype(), "patch_merge_backward_input", [&](auto tag) {
    using T = decltype(tag);
    const T* pdy = device_ptr<T>(dy);
    T* pdx = device_ptr<T>(dx);
    with_pack<T>(dx.size(3), pdy, pdx, [&](auto pack) {
      constexpr int K = decltype(pack)::value;
      const int64_t total = dx.numel() / K;
      launch<patch_merge_backward_kernel<T, K>>(blocks_for(total), kThreads, 0, compute_stream(),
          pdy, pdx, dx.size(1), dx.size(2), dx.size(3) / K, total);
    });
    SDP_CUDA_LAUNCH_CHECK("patch_merge_backward_kernel");
  });
}

// x [B, L, C] or [B, H, W, C]: L is everything between the first and last dims.
void token_mean_forward(const Tensor& x, Tensor& y) {
  const int64_t batch = x.size(0), channels = x.size(-1);
  if (y.numel() == 0) return;
  const int64_t tokens = x.numel() / (batch * channels);
  on_cuda_float(x.dtype(), "token_mean_forward", [&](auto tag) {
    using T = decltype(tag);
    launch<token_mean_forward_kernel<T>>(blocks_for(batch * channels), kThreads, 0,
        compute_stream(), device_ptr<T>(x), device_ptr<T>(y), batch, tokens, channels);
    SDP_CUDA_LAUNCH_CHECK("token_mean_forward_kernel");
  });
}

void token_mean_backward_input(const Tensor& dy, Tensor& dx) {
  const int64_t total = dx.numel();
  if (total == 0) return;
  const int64_t batch = dx.size(0), channels = dx.size(-1);
  const int64_t tokens = total / (batch * channels);
  on_cuda_float(dx.dtype(), "token_mean_backward_input", [&](auto tag) {
    using T = decltype(tag);
    launch<token_mean_backward_kernel<T>>(blocks_for(total), kThreads, 0, compute_stream(),
        device_ptr<T>(dy), device_ptr<T>(dx), tokens, channels, total);
    SDP_CUDA_LAUNCH_CHECK("token_mean_backward_kernel");
  });
}

}  // namespace sdp::cuda
