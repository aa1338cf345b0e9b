// Times full training steps of the engine on the CPU: Trainer::train_step()
// = zero grads, forward, backward, global grad norm (clip), AdamW update.
// The same unit of work as bench/torch_ref/train_step_bench.py (forward,
// loss, backward, AdamW step, zero_grad), so the two are comparable.
//
//   build/bin/bench_llama_step --model small --batch 8 --seq 256 --steps 10
//       --warmup 3 --threads 1 [--json]
//
// FLOPs per step ("model FLOPs": what the maths needs, not what a given
// implementation does; no recomputation counted):
//   matmul  = 6 * P_mm * N, N = batch * seq tokens, P_mm = weights that are
//             multiplied: layers * (q, k, v, o, gate, up, down) + lm_head
//             (the embedding is a lookup, norm gains are elementwise);
//             2 P_mm N forward, 4 P_mm N backward (input and weight grads).
//   attn    = 12 * batch * heads * head_dim * seq (seq + 1) / 2: causal, only
//             the (query, key) pairs with key <= query; per pair 2 * head_dim
//             FLOPs for each of Q K^T and P V forward (4 Dh) and twice that
//             backward (dP, dS K, dS^T Q, P^T dO: 8 Dh). The engine also
//             recomputes Q K^T in backward (2 Dh more per pair), not counted.
// Elementwise work (norms, RoPE, SwiGLU, softmax, cross-entropy, AdamW) is
// O(N (D + F + V)) and left out.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/train/trainer.h"
#include "models/llama/llama_config.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time full training steps (forward + backward + AdamW) of the LLaMA model on CPU"};
  std::string model = "small";
  int64_t batch = 8, seq = 256, steps = 10, warmup = 3;
  int threads = 1;
  double lr = 1e-3;
  bool json = false;
  app.add_option("--model", model, "named model config")->capture_default_str();
  app.add_option("--batch", batch, "sequences per step")->capture_default_str();
  app.add_option("--seq", seq, "tokens per sequence")->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP threads (0 = runtime default)")->capture_default_str();
  app.add_option("--lr", lr, "AdamW learning rate (constant)")->capture_default_str();
  app.add_flag("--json", json, "print one JSON line only");
  CLI11_PARSE(app, argc, argv);

  try {
    const sdp::llama::LlamaConfig mc = sdp::llama::LlamaConfig::named(model);
    sdp::TrainConfig tc;
    tc.model = model;
    // The synthetic source takes vocabularies up to 1024; the model's vocab
    // (what costs) is the model's either way.
    tc.data = "synthetic:vocab=" + std::to_string(std::min<int64_t>(mc.vocab, 1024));
    tc.batch = batch;
    tc.seq = seq;
    tc.steps = warmup + steps;
    // The PyTorch reference's optimizer: AdamW(lr, weight_decay 0.1), betas
    // (0.9, 0.999), eps 1e-8, constant rate, no clipping.
    tc.lr = lr;
    tc.min_lr = lr;
    tc.warmup = 0;
    tc.weight_decay = 0.1;
    tc.beta1 = 0.9;
    tc.beta2 = 0.999;
    tc.eps = 1e-8;
    tc.grad_clip = 0;  // the norm is still computed (reported), nothing scaled
    tc.eval_every = 0;
    tc.threads = threads;
    tc.progress = false;
    sdp::Trainer trainer(tc);
    // The OpenMP build of OpenBLAS follows omp_set_num_threads() (the
    // Trainer's) at its next call; setting it here too makes the count
    // reported below the one used from the first call on.
    if (threads > 0) openblas_set_num_threads(threads);

    for (int64_t i = 0; i < warmup; ++i) trainer.train_step();
    // Process CPU time per step too: on a shared machine it is less sensitive
    // than wall time to other load (with one thread, cpu <= wall).
    auto cpu_now = [] {
      timespec ts{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    };
    std::vector<double> ms, cpu_ms;
    double loss = 0;
    for (int64_t i = 0; i < steps; ++i) {
      const double c0 = cpu_now();
      const sdp::StepResult r = trainer.train_step();
      cpu_ms.push_back(cpu_now() - c0);
      ms.push_back(r.seconds * 1e3);
      loss = r.loss;
    }

    const int64_t N = batch * seq, Dh = mc.head_dim();
    const int64_t per_layer = mc.dim * (2 * mc.n_heads * Dh + 2 * mc.n_kv_heads * Dh) +
                              3 * mc.dim * mc.ffn_dim;
    const int64_t p_mm = mc.n_layers * per_layer + mc.vocab * mc.dim;
    const double mm_flops = 6.0 * static_cast<double>(p_mm) * static_cast<double>(N);
    const double attn_flops = 12.0 * static_cast<double>(batch * mc.n_layers * mc.n_heads * Dh) *
                              static_cast<double>(seq) * static_cast<double>(seq + 1) / 2.0;
    const double flops = mm_flops + attn_flops;
    const double med = median(ms), mn = *std::min_element(ms.begin(), ms.end());
    const double tokens_per_s = static_cast<double>(N) / (med / 1e3);
    const double gflops = flops / (med / 1e3) / 1e9;
    const char* core = openblas_get_corename();
    const char* coretype_env = std::getenv("OPENBLAS_CORETYPE");
    const int omp_threads = omp_get_max_threads();
#if defined(__GNUC__) && defined(__x86_64__)
    // OpenBLAS 0.3.21 does not know every newer CPU and then falls back to its
    // SSE3 "Prescott" kernels, several times slower than the AVX2/AVX-512 ones.
    if (core && std::string(core) == "Prescott" && __builtin_cpu_supports("avx2"))
      std::fprintf(stderr,
                   "bench_llama_step: note: OpenBLAS runs its Prescott (SSE3) kernels on a CPU "
                   "with AVX2%s; OPENBLAS_CORETYPE=%s gives much faster matrix products\n",
                   __builtin_cpu_supports("avx512f") ? " and AVX-512" : "",
                   __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell");
#endif
    const int blas_threads = openblas_get_num_threads();

    if (json) {
      nlohmann::json j = {
          {"impl", "sdp-engine"},
          {"ms_per_step", std::round(med * 1e3) / 1e3},
          {"min_ms", std::round(mn * 1e3) / 1e3},
          {"cpu_ms_per_step", std::round(median(cpu_ms) * 1e3) / 1e3},
          {"tokens_per_s", std::round(tokens_per_s * 10) / 10},
          {"gflop_per_step", flops / 1e9},
          {"matmul_gflop_per_step", mm_flops / 1e9},
          {"attn_gflop_per_step", attn_flops / 1e9},
          {"gflops", std::round(gflops * 100) / 100},
          {"threads", omp_threads},
          {"blas_threads", blas_threads},
          {"openblas_core", core ? core : "?"},
          {"openblas_coretype_env", coretype_env ? coretype_env : ""},
          {"steps", steps},
          {"warmup", warmup},
          {"loss", loss},
          {"params", mc.parameter_count()},
          {"config",
           {{"model", model}, {"dim", mc.dim}, {"layers", mc.n_layers}, {"heads", mc.n_heads},
            {"kv_heads", mc.n_kv_heads}, {"ffn", mc.ffn_dim}, {"vocab", mc.vocab},
            {"seq", seq}, {"batch", batch}, {"tie", mc.tie_embeddings}}},
      };
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("sdp-engine, %d OpenMP thread(s), %d BLAS thread(s), OpenBLAS core %s "
                  "(OPENBLAS_CORETYPE=%s)\n",
                  omp_threads, blas_threads, core ? core : "?", coretype_env ? coretype_env : "");
      std::printf("model %s: dim %lld layers %lld heads %lld/%lld ffn %lld vocab %lld, "
                  "seq %lld batch %lld (%.2fM params)\n",
                  model.c_str(), static_cast<long long>(mc.dim),
                  static_cast<long long>(mc.n_layers), static_cast<long long>(mc.n_heads),
                  static_cast<long long>(mc.n_kv_heads), static_cast<long long>(mc.ffn_dim),
                  static_cast<long long>(mc.vocab), static_cast<long long>(seq),
                  static_cast<long long>(batch),
                  static_cast<double>(mc.parameter_count()) / 1e6);
      std::printf("median %.2f ms/step (min %.2f, CPU time %.2f) over %lld steps, %.0f tokens/s, "
                  "last loss %.4f\n",
                  med, mn, median(cpu_ms), static_cast<long long>(steps), tokens_per_s, loss);
      std::printf("%.2f GFLOP/step (matmul %.2f + attention %.2f), %.1f GFLOP/s at the median\n",
                  flops / 1e9, mm_flops / 1e9, attn_flops / 1e9, gflops);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_llama_step: %s\n", e.what());
    return 1;
  }
  return 0;
}
