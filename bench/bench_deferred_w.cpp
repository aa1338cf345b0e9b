// Times a LLaMA's deferred weight gradients per micro-batch against batched
// (Model::backward_weight_batched: one GEMM per weight over the k
// micro-batches' rows concatenated), in one process, beside the forward (F)
// and the input-gradient backward (I) of one micro-batch: the ratios the
// 2BP speed-up is made of, measured apart from any pipeline's waits.
//
//   build/bin/bench_deferred_w --model small --batch 1 --seq 256 --k 1,2,4,8 --repeats 7
//
// Per repeat and k: k training forwards (F timed each), k split backwards (I
// timed each), then the k micro-batches' W, either one backward_weight each
// or one backward_weight_batched; the two forms alternate repeat by repeat
// on fresh forwards. Reported: the best (minimum) and the median over the
// repeats of the time per micro-batch; the best is the figure least touched
// by other work on a shared machine. Threads: --threads (1 = one core, as a
// pipeline rank runs).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/core/allocator.h"
#include "kernels/ops.h"
#include "models/registry.h"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

struct Stat {
  std::vector<double> v;
  double best() const { return *std::min_element(v.begin(), v.end()); }
  double median() const {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Deferred weight gradients of a LLaMA: per micro-batch against batched"};
  std::string model = "small", ks_text = "1,2,4,8";
  int64_t batch = 1, seq = 256;
  int repeats = 7, threads = 1;
  app.add_option("--model", model, "model spec (a LLaMA)")->capture_default_str();
  app.add_option("--batch", batch, "sequences per micro-batch")->capture_default_str();
  app.add_option("--seq", seq, "tokens per sequence")->capture_default_str();
  app.add_option("--k", ks_text, "micro-batches per batched W, comma list")->capture_default_str();
  app.add_option("--repeats", repeats, "repeats per k and form")->capture_default_str()->check(
      CLI::PositiveNumber);
  app.add_option("--threads", threads, "OpenMP / BLAS threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(threads);
  std::vector<int> ks;
  {
    std::stringstream in(ks_text);
    for (std::string item; std::getline(in, item, ',');) ks.push_back(std::stoi(item));
  }

  sdp::CpuAllocator alloc;
  std::unique_ptr<sdp::Model> m = sdp::make_model(model);
  m->materialize(alloc, sdp::DType::f32);
  m->params().allocate_grads();
  m->params().init_values(1);
  const int kmax = *std::max_element(ks.begin(), ks.end());
  std::vector<sdp::OwnedTensor> tokens, targets;  // [kmax] of [B, T] i32
  for (int i = 0; i < kmax; ++i) {
    tokens.emplace_back(alloc, sdp::Shape{batch, seq}, sdp::DType::i32, sdp::MemCategory::workspace);
    targets.emplace_back(alloc, sdp::Shape{batch, seq}, sdp::DType::i32, sdp::MemCategory::workspace);
    for (int64_t j = 0; j < batch * seq; ++j) {
      tokens.back()->data<int32_t>()[j] = static_cast<int32_t>((j * 37 + 11 * i) % m->token_vocabulary());
      targets.back()->data<int32_t>()[j] = static_cast<int32_t>((j * 53 + 5 * i) % m->token_vocabulary());
    }
  }
  const double scale = 1.0 / static_cast<double>(batch * seq);
  std::printf("model %s, micro-batch %lld x %lld, f32, %d thread(s); seconds per micro-batch, "
              "best / median of %d repeats\n",
              model.c_str(), static_cast<long long>(batch), static_cast<long long>(seq), threads,
              repeats);
  std::printf("%4s %18s %18s %22s %22s %14s\n", "k", "F", "I", "W per-micro-batch", "W batched",
              "batched gain");
  for (int k : ks) {
    Stat f, in, w_per, w_batched;
    for (int r = 0; r < 2 * repeats; ++r) {
      const bool batched = r % 2 == 1;
      for (int i = 0; i < k; ++i) {
        const auto t = clock_type::now();
        m->forward(*tokens[static_cast<size_t>(i)], *targets[static_cast<size_t>(i)], true, i);
        f.v.push_back(seconds_since(t));
      }
      for (int i = k; i-- > 0;) {
        const auto t = clock_type::now();
        m->backward(scale, true, {}, i);
        in.v.push_back(seconds_since(t));
      }
      std::vector<int> mbs;
      for (int i = 0; i < k; ++i) mbs.push_back(i);
      const auto t = clock_type::now();
      if (batched)
        m->backward_weight_batched(mbs);
      else
        for (int i : mbs) m->backward_weight({}, i);
      (batched ? w_batched : w_per).v.push_back(seconds_since(t) / k);
    }
    std::printf("%4d %8.2f / %7.2f %8.2f / %7.2f %10.2f / %9.2f %10.2f / %9.2f %6.3f / %5.3f   (ms)\n",
                k, 1e3 * f.best(), 1e3 * f.median(), 1e3 * in.best(), 1e3 * in.median(),
                1e3 * w_per.best(), 1e3 * w_per.median(), 1e3 * w_batched.best(),
                1e3 * w_batched.median(), w_per.best() / w_batched.best(),
                w_per.median() / w_batched.median());
  }
  return 0;
}
