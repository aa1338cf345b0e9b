// Times the CPU conv2d (forward, backward input, backward weight) on the 3x3
// layers of a CIFAR ResNet-18, in f32; bench/torch_ref/conv_bench.py times
// PyTorch on the same shapes and prints the same lines.
//   bench_conv [B (32)] [iters (5)] [all | CIN:COUT:SIZE:STRIDE ...]
// "all" adds the stride-2 3x3 convs entering stages 2-4; explicit specs time
// those 3x3 layers instead (SIZE the input's height and width), e.g. the
// half-width layers of an N-SDP rank: 16:8:32:1 8:16:32:1. Each time is the
// median of `iters` runs after two warm-up runs; "min" sums the fastest runs
// of the three, "cpu" their mean process CPU time; GFLOP/s from the medians.
// For one-thread numbers set OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (and
// OPENBLAS_CORETYPE as wanted: Haswell = AVX2, SkylakeX = AVX-512 kernels).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <random>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/tensor.h"
#include "kernels/ops.h"

using namespace sdp;

namespace {

struct Layer {
  int64_t in_channels, out_channels, size, stride;  // size: the input's height and width
};
const Layer kLayers[] = {{64, 64, 32, 1}, {128, 128, 16, 1}, {256, 256, 8, 1}, {512, 512, 4, 1}};
const Layer kDownsample[] = {{64, 128, 32, 2}, {128, 256, 16, 2}, {256, 512, 8, 2}};

// "CIN:COUT:SIZE:STRIDE" -> a layer; false when it is not one.
bool parse_layer(const char* text, Layer& layer) {
  long long v[4];
  char tail = 0;
  if (std::sscanf(text, "%lld:%lld:%lld:%lld%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4)
    return false;
  layer = {v[0], v[1], v[2], v[3]};
  return v[0] >= 1 && v[1] >= 1 && v[2] >= 1 && (v[3] == 1 || v[3] == 2);
}

void fill_random(const Tensor& t, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
}

// Process CPU time of all timed runs, next to the wall clock: on a shared
// machine wall time includes waiting for a core; with one thread CPU time
// does not. The fastest run is the least disturbed by other processes.
double g_cpu_ms = 0;
double g_min_ms = 0;

template <typename F>
double median_ms(F&& f, int iters) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    g_cpu_ms += 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / iters;
  }
  std::sort(times.begin(), times.end());
  g_min_ms += times.front();
  return times[times.size() / 2];
}

double bench_layer(int64_t B, const Layer& layer, int iters) {
  const int64_t cout = layer.out_channels, cin = layer.in_channels, size = layer.size;
  const ops::Conv2dGeometry g{3, layer.stride, 1};
  const int64_t out = g.out_size(size);
  const Shape xs{B, cin, size, size}, ws{cout, cin, 3, 3}, ys{B, cout, out, out};
  CpuAllocator alloc;
  auto make = [&](Shape s, MemCategory cat) { return OwnedTensor(alloc, s, DType::f32, cat); };
  OwnedTensor x = make(xs, MemCategory::activation), w = make(ws, MemCategory::param);
  OwnedTensor y = make(ys, MemCategory::activation), dy = make(ys, MemCategory::activation);
  OwnedTensor dx = make(xs, MemCategory::activation), dw = make(ws, MemCategory::grad);
  OwnedTensor work = make({ops::conv2d_workspace_elems(xs, ws, g, DType::f32, Device::cpu)},
                          MemCategory::workspace);
  fill_random(*x, 1, 1.0f);
  fill_random(*w, 2, 0.05f);
  fill_random(*dy, 3, 1.0f);
  ops::fill(*dw, 0.0);

  g_cpu_ms = 0;
  g_min_ms = 0;
  const double fwd = median_ms([&] { ops::conv2d_forward(*x, *w, g, *y, *work); }, iters);
  const double bwd_in =
      median_ms([&] { ops::conv2d_backward_input(*dy, *w, g, *dx, *work); }, iters);
  const double bwd_w =
      median_ms([&] { ops::conv2d_backward_weight(*dy, *x, g, *dw, *work); }, iters);
  const double flops = 2.0 * B * cout * out * out * cin * 9;
  const double total = fwd + bwd_in + bwd_w;
  std::printf(
      "B=%3lld Cin=%3lld Cout=%3lld %2lldx%-2lld s%lld  fwd %7.2f  bwd_in %7.2f  bwd_w %7.2f  "
      "total %7.2f ms (min %7.2f, cpu %7.2f)  %6.1f GFLOP/s  (workspace %.1f MiB)\n",
      static_cast<long long>(B), static_cast<long long>(cin), static_cast<long long>(cout),
      static_cast<long long>(size), static_cast<long long>(size),
      static_cast<long long>(layer.stride), fwd, bwd_in, bwd_w, total, g_min_ms, g_cpu_ms,
      3 * flops / total / 1e6, static_cast<double>(work->bytes()) / (1 << 20));
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t B = argc > 1 ? std::atoll(argv[1]) : 32;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool all = argc > 3 && std::strcmp(argv[3], "all") == 0;
  std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
  if (all) layers.insert(layers.end(), std::begin(kDownsample), std::end(kDownsample));
  if (argc > 3 && !all) {
    layers.clear();
    for (int i = 3; i < argc; ++i) {
      Layer l{};
      if (!parse_layer(argv[i], l)) {
        std::fprintf(stderr, "bench_conv: layer '%s' is not CIN:COUT:SIZE:STRIDE (stride 1 or 2)\n",
                     argv[i]);
        return 2;
      }
      layers.push_back(l);
    }
  }
  if (B < 1 || iters < 1) {
    std::fprintf(stderr, "usage: bench_conv [B >= 1] [iters >= 1] [all | CIN:COUT:SIZE:STRIDE ...]\n");
    return 2;
  }
  std::printf("sdp-engine conv2d, f32 cpu, %d OpenMP thread(s)\n", omp_get_max_threads());
  double total = 0, fastest = 0;
  auto run = [&](const Layer& l) {
    total += bench_layer(B, l, iters);
    fastest += g_min_ms;
  };
  for (const Layer& l : layers) run(l);
  std::printf("sum over layers: %.1f ms (min %.1f)\n", total, fastest);
  return 0;
}
