// FLOPs counted from the ops actually run: matmuls 2 m n k, causal attention
// over its pairs; a training step counts the analytic figure of the layers a
// rank computes (fewer under forward masking, no weight gradients for what
// backward masking does not train), on the meta device as on the CPU.
#include <catch2/catch.hpp>

#include "engine/train/trainer.h"
#include "models/llama/llama_model.h"
#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "test_support.h"

using namespace sdp;

TEST_CASE("linear ops count 2 m n k FLOPs on every device", "[flops]") {
  MetaAllocator meta(64);
  OwnedTensor x(meta, {6, 5}, DType::f32, MemCategory::activation);  // [N, in]
  OwnedTensor w(meta, {4, 5}, DType::f32, MemCategory::param);       // [out, in]
  OwnedTensor y(meta, {6, 4}, DType::f32, MemCategory::activation);  // [N, out]
  ops::reset_flop_count();
  ops::linear_forward(*x, *w, *y);
  REQUIRE(ops::flops_counted() == 2.0 * 6 * 5 * 4);
  ops::linear_backward_input(*y, *w, *x);
  ops::linear_backward_weight(*y, *x, *w);
  REQUIRE(ops::flops_counted() == 3 * 2.0 * 6 * 5 * 4);
}

namespace {

// Matmul parameters of one block and of the head, and the attention FLOPs of
// one block's forward (2 products) per micro-batch.
struct ModelFlops {
  double block_matmul, head, attention_forward;
};
ModelFlops analytic(const llama::LlamaConfig& c, int64_t B, int64_t T) {
  const double D = static_cast<double>(c.dim), F = static_cast<double>(c.ffn_dim);
  const double q = static_cast<double>(c.n_heads * c.head_dim());
  const double kv = static_cast<double>(c.n_kv_heads * c.head_dim());
  const double pairs = static_cast<double>(T) * static_cast<double>(T + 1) / 2;
  return {D * (2 * q + 2 * kv) + 3 * D * F, static_cast<double>(c.vocab) * D,
          2.0 * 2 * static_cast<double>(B) * q * pairs};
}

}  // namespace

TEST_CASE("a training step counts the FLOPs of what the rank computes", "[flops]") {
  TrainConfig c;
  c.model = "mini";
  c.batch = 2;
  c.seq = 16;
  c.device = "meta";
  c.eval_every = 0;
  const auto mc = llama::LlamaConfig::named(c.model);
  const ModelFlops s = analytic(mc, c.batch, c.seq);
  const double N = static_cast<double>(c.batch * c.seq), L = static_cast<double>(mc.n_layers);
  // forward + input gradients + weight gradients of every matmul, attention
  // forward (2 products) and backward (5, with the recomputed scores).
  const double full = 6 * N * (L * s.block_matmul + s.head) + L * s.attention_forward * 7 / 2;
  Trainer ddp(c);
  REQUIRE(ddp.train_step().flops == Approx(full).epsilon(1e-12));

  // B-SDP, C = 0.5 on 4 ranks: each rank runs 2 of the 4 blocks.
  TrainConfig b = c;
  b.parallel.strategy = "b-sdp";
  b.parallel.active_fraction = 0.5;
  b.emulate_world = 4;
  Trainer half(b);
  REQUIRE(half.train_step().flops ==
          Approx(6 * N * (L / 2 * s.block_matmul + s.head) + L / 2 * s.attention_forward * 7 / 2)
              .epsilon(1e-12));

  // Bb-SDP: the whole forward and input gradients, weight gradients of the
  // owned half of the blocks only.
  b.parallel.strategy = "bb-sdp";
  Trainer masked(b);
  REQUIRE(masked.train_step().flops ==
          Approx(full - 2 * N * L / 2 * s.block_matmul).epsilon(1e-12));
}
