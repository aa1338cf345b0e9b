// Times causal GQA attention forward and backward on the CPU backend.
//   bench_attention                 -> B=8 T=256 Hq=Hkv=8 Dh=32, then T=1024 Dh=64
//   bench_attention B T Hq Hkv Dh [iters] [f32|f64]
// FLOPs counted for the causal half of the score matrix: forward does two
// matrix products (S = QK^T, O = PV), 2 * 2 * B * Hq * T^2 * Dh / 2; backward
// counts 2x forward (dV, dP, dQ, dK), the usual convention, although the
// kernel also recomputes S (2.5x forward of actual work).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/memory_stats.h"
#include "engine/core/tensor.h"
#include "kernels/ops.h"

using namespace sdp;

namespace {

void fill_random(const Tensor& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DType::f32)
      t.data<float>()[i] = static_cast<float>(dist(rng));
    else
      t.data<double>()[i] = dist(rng);
  }
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

void run(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t Dh, int iters, DType dt) {
  CpuAllocator alloc;
  auto make = [&](Shape s) { return OwnedTensor(alloc, s, dt, MemCategory::activation); };
  OwnedTensor q = make({B, T, Hq, Dh}), k = make({B, T, Hkv, Dh}), v = make({B, T, Hkv, Dh});
  OwnedTensor out = make({B, T, Hq, Dh}), lse = make({B, Hq, T}), dout = make({B, T, Hq, Dh});
  OwnedTensor dq = make({B, T, Hq, Dh}), dk = make({B, T, Hkv, Dh}), dv = make({B, T, Hkv, Dh});
  OwnedTensor ws = make({ops::attention_workspace_elems(B, T, Hq, Hkv, Dh)});
  fill_random(*q, 1);
  fill_random(*k, 2);
  fill_random(*v, 3);
  fill_random(*dout, 4);

  // warm-up: page in the buffers and let BLAS pick its kernels
  ops::attention_forward(*q, *k, *v, *out, *lse, *ws);
  ops::attention_backward_input(*dout, *q, *k, *v, *out, *lse, *dq, *dk, *dv, *ws);

  // Process CPU time next to the wall clock: on a shared machine wall time
  // includes waiting for a core; with one thread CPU time does not.
  std::vector<double> fwd, bwd;
  double fwd_cpu = 0, bwd_cpu = 0;
  for (int i = 0; i < iters; ++i) {
    std::clock_t c0 = std::clock();
    auto t0 = std::chrono::steady_clock::now();
    ops::attention_forward(*q, *k, *v, *out, *lse, *ws);
    fwd.push_back(ms_since(t0));
    fwd_cpu += static_cast<double>(std::clock() - c0);
    c0 = std::clock();
    t0 = std::chrono::steady_clock::now();
    ops::attention_backward_input(*dout, *q, *k, *v, *out, *lse, *dq, *dk, *dv, *ws);
    bwd.push_back(ms_since(t0));
    bwd_cpu += static_cast<double>(std::clock() - c0);
  }
  const double cpu_ms = 1000.0 / CLOCKS_PER_SEC / iters;
  fwd_cpu *= cpu_ms;
  bwd_cpu *= cpu_ms;
  std::sort(fwd.begin(), fwd.end());
  std::sort(bwd.begin(), bwd.end());
  const double f_ms = fwd[fwd.size() / 2], b_ms = bwd[bwd.size() / 2];
  const double flop_fwd = 2.0 * 2.0 * static_cast<double>(B * Hq) * static_cast<double>(T) *
                          static_cast<double>(T) * static_cast<double>(Dh) / 2.0;
  const double flop_bwd = 2.0 * flop_fwd;
  std::printf(
      "attention %s B=%lld T=%lld Hq=%lld Hkv=%lld Dh=%lld threads=%d (median of %d)\n"
      "  forward  %8.2f ms  %7.1f GFLOP/s   (cpu time %8.2f ms)\n"
      "  backward %8.2f ms  %7.1f GFLOP/s   (cpu time %8.2f ms)\n"
      "  total    %8.2f ms  %7.1f GFLOP/s   (cpu time %8.2f ms)\n",
      dtype_name(dt).data(), static_cast<long long>(B), static_cast<long long>(T),
      static_cast<long long>(Hq), static_cast<long long>(Hkv), static_cast<long long>(Dh),
      omp_get_max_threads(), iters, f_ms, flop_fwd / f_ms * 1e-6, fwd_cpu, b_ms,
      flop_bwd / b_ms * 1e-6, bwd_cpu, f_ms + b_ms, (flop_fwd + flop_bwd) / (f_ms + b_ms) * 1e-6,
      fwd_cpu + bwd_cpu);
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS 0.3.21 does not recognize some virtualized Xeons and falls back
  // to its SSE3 (Prescott) kernels, 3x slower here; OPENBLAS_CORETYPE=SkylakeX
  // (or Haswell) picks the right ones. Printed so that a slow run says why.
  std::printf("OpenBLAS core: %s\n", openblas_get_corename());
  if (argc >= 6) {
    const int iters = argc >= 7 ? std::atoi(argv[6]) : 10;
    const DType dt = argc >= 8 && std::string(argv[7]) == "f64" ? DType::f64 : DType::f32;
    run(std::atoll(argv[1]), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
        std::atoll(argv[5]), std::max(iters, 1), dt);
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: %s [B T Hq Hkv Dh [iters] [f32|f64]]\n", argv[0]);
    return 2;
  }
  run(8, 256, 8, 8, 32, 20, DType::f32);
  run(1, 1024, 8, 8, 64, 5, DType::f32);
  return 0;
}
