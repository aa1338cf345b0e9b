// Pipeline stage cuts: --stage-blocks parsing and its refusals, explicit
// cuts, balanced cuts against brute force over every cut, and per-site costs
// counted on meta models against the analytic FLOPs of their layers.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/error.h"
#include "engine/pipeline/site_costs.h"
#include "engine/pipeline/stage_split.h"
#include "engine/train/trainer.h"
#include "kernels/flop_count.h"
#include "models/llama/llama_model.h"
#include "models/resnet/resnet_config.h"

using namespace sdp;
using namespace sdp::pipeline;

namespace {

std::vector<int> counts_of(int blocks, const std::vector<StageSpan>& spans) {
  std::vector<int> counts;
  for (const StageSpan& s : spans) counts.push_back(s.end(blocks) - s.first_block);
  return counts;
}

double largest(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, x);
  return m;
}

// Every cut of L blocks into P stages of >= 1 block, in lexicographic order
// of the cut positions; the first with the smallest largest stage cost.
std::vector<int> brute_force(int L, int P, const std::vector<double>& cost) {
  std::vector<int> cuts(static_cast<size_t>(P) - 1), best_counts;
  double best = INFINITY;
  // cuts[k] = first block of stage k + 1, strictly increasing in [1, L - 1].
  std::function<void(int, int)> walk = [&](int k, int from) {
    if (k == P - 1) {
      std::vector<int> counts;
      double worst = 0;
      int first = 0;
      for (int s = 0; s < P; ++s) {
        const int end = s == P - 1 ? L : cuts[static_cast<size_t>(s)];
        double c = 0;
        for (int b = first; b < end; ++b) c += cost[static_cast<size_t>(b) + 1];
        if (s == 0) c += cost.front();
        if (s == P - 1) c += cost.back();
        worst = std::max(worst, c);
        counts.push_back(end - first);
        first = end;
      }
      if (worst < best) {
        best = worst;
        best_counts = counts;
      }
      return;
    }
    for (int c = from; c <= L - (P - 1 - k); ++c) {
      cuts[static_cast<size_t>(k)] = c;
      walk(k + 1, c + 1);
    }
  };
  walk(0, 1);
  return best_counts;
}

// Matmul FLOPs per token of one LLaMA block, and one block's attention
// forward (two products over the causal pairs) per micro-batch.
struct LlamaFlops {
  double block_matmul_per_token, attention_forward;
};
LlamaFlops llama_flops(const llama::LlamaConfig& c, int64_t B, int64_t T) {
  const double D = double(c.dim), F = double(c.ffn_dim);
  const double q = double(c.n_heads * c.head_dim()), kv = double(c.n_kv_heads * c.head_dim());
  const double pairs = double(T) * double(T + 1) / 2;
  return {2 * (D * (2 * q + 2 * kv) + 3 * D * F), 2.0 * 2 * double(B) * q * pairs};
}

// 2 B Cout Ho Wo Cin k^2.
double conv_flops(int64_t B, int64_t cout, int64_t hw, int64_t cin, int64_t k) {
  return 2.0 * double(B) * double(cout) * double(hw * hw) * double(cin) * double(k * k);
}

}  // namespace

TEST_CASE("stages: --stage-blocks parses positive integers and refuses the rest", "[stages]") {
  REQUIRE(parse_stage_blocks("3,3,3,3") == std::vector<int>{3, 3, 3, 3});
  REQUIRE(parse_stage_blocks("12") == std::vector<int>{12});
  REQUIRE(parse_stage_blocks("1,10,2") == std::vector<int>{1, 10, 2});
  const std::string valid = "valid: blocks per stage as positive integers separated by commas";
  for (const std::string bad : {"", "3,,3", "3,3,", ",3", "3,a", "3, 3", "-1,2", "+2", "2.5"}) {
    INFO("'" << bad << "'");
    REQUIRE_THROWS_WITH(parse_stage_blocks(bad),
                        Catch::Contains("--stage-blocks '" + bad + "'") && Catch::Contains(valid));
  }
  REQUIRE_THROWS_WITH(parse_stage_blocks("3,0,3"), Catch::Contains("a stage of 0 blocks"));
  REQUIRE_THROWS_WITH(parse_stage_blocks("99999999999999999999"),
                      Catch::Contains("is larger than 1000000"));
  REQUIRE(describe_stage_blocks(12, split_stages(12, 3, parse_stage_blocks("2,4,6"), {})) ==
          "2,4,6");
}

TEST_CASE("stages: explicit block counts give those spans, or a refusal naming the model", "[stages]") {
  const auto spans = split_stages(12, 3, {2, 4, 6}, {}, "llama-134m");
  REQUIRE(spans.size() == 3);
  REQUIRE(spans[0].first_block == 0);
  REQUIRE(spans[0].end_block == 2);
  REQUIRE(spans[1].first_block == 2);
  REQUIRE(spans[1].end_block == 6);
  REQUIRE(spans[2].first_block == 6);
  REQUIRE(spans[2].end_block == 12);
  REQUIRE(spans[0].has_input_stage());
  REQUIRE_FALSE(spans[0].has_output_stage(12));
  REQUIRE_FALSE(spans[1].has_input_stage());
  REQUIRE_FALSE(spans[1].has_output_stage(12));
  REQUIRE(spans[2].has_output_stage(12));
  REQUIRE(spans[2].describe(12) == "blocks 6-11 + output");

  // Costs play no part in an explicit cut.
  REQUIRE(counts_of(4, split_stages(4, 2, {3, 1}, {0, 1, 1, 1, 100})) == std::vector<int>{3, 1});

  REQUIRE_THROWS_WITH(split_stages(12, 4, {3, 3, 3}, {}, "llama-134m"),
                      Catch::Contains("--stage-blocks 3,3,3: model llama-134m has 12 blocks") &&
                          Catch::Contains("needs 4 counts, each >= 1, summing to 12") &&
                          Catch::Contains("got 3 summing to 9"));
  REQUIRE_THROWS_WITH(split_stages(12, 2, {5, 6}, {}, "llama-134m"),
                      Catch::Contains("--stage-blocks 5,6: model llama-134m has 12 blocks"));
  REQUIRE_THROWS_WITH(split_stages(4, 3, {2, 0, 2}, {}, "tiny"),
                      Catch::Contains("--stage-blocks 2,0,2: model tiny has 4 blocks"));
  REQUIRE_THROWS_WITH(split_stages(4, 2, {5, -1}, {}, "tiny"),
                      Catch::Contains("--stage-blocks 5,-1"));
}

TEST_CASE("stages: counts of stages the model cannot take are refused", "[stages]") {
  REQUIRE_THROWS_WITH(split_stages(2, 3, {}, {}, "tiny"),
                      Catch::Equals("a pipeline of 3 stages needs at least 3 blocks; model tiny has 2"));
  REQUIRE_THROWS_WITH(split_stages(2, 3, {1, 1, 1}, {}, "tiny"),
                      Catch::Contains("needs at least 3 blocks; model tiny has 2"));
  REQUIRE_THROWS_WITH(split_stages(4, 0, {}, {}, "tiny"), Catch::Contains("0 stages (valid: 1 .. 4)"));
  // One stage is the whole model.
  const auto one = split_stages(8, 1, {}, {});
  REQUIRE(one.size() == 1);
  REQUIRE(one[0].whole(8));
  REQUIRE(one[0].end_block == 8);
  // Site costs of the wrong form.
  REQUIRE_THROWS_WITH(split_stages(4, 2, {}, {1, 1, 1, 1}, "tiny"),
                      Catch::Contains("4 site costs given for tiny with 4 blocks (valid: 6 costs"));
  REQUIRE_THROWS_WITH(split_stages(2, 2, {}, {0, 1, -1, 0}, "tiny"),
                      Catch::Contains("the cost of site 2 of tiny is -1 (valid: a finite number >= 0)"));
  REQUIRE_THROWS_WITH(split_stages(2, 2, {}, {0, 1, NAN, 0}, "tiny"),
                      Catch::Contains("the cost of site 2 of tiny"));
}

TEST_CASE("stages: balanced cuts of uniform and skewed costs", "[stages]") {
  // Uniform blocks, free ends: an even split when P divides L.
  REQUIRE(counts_of(12, split_stages(12, 4, {}, {})) == std::vector<int>{3, 3, 3, 3});
  REQUIRE(counts_of(8, split_stages(8, 2, {}, std::vector<double>(10, 5.0))) ==
          std::vector<int>{4, 4});
  // Ties take the earliest cuts: 4 blocks over 3 stages.
  REQUIRE(counts_of(4, split_stages(4, 3, {}, {})) == std::vector<int>{1, 1, 2});

  // A heavy output stage (3 blocks' worth): the last stage keeps one block
  // and the others take the rest; 12 + 3 over 4 stages cannot beat 4.
  std::vector<double> heavy_out(14, 1.0);
  heavy_out.front() = 0;
  heavy_out.back() = 3;
  const auto out = split_stages(12, 4, {}, heavy_out);
  REQUIRE(counts_of(12, out) == std::vector<int>{3, 4, 4, 1});
  REQUIRE(largest(stage_cost_sums(12, out, heavy_out)) == 4);

  // A heavy input stage moves blocks the other way.
  std::vector<double> heavy_in(14, 1.0);
  heavy_in.front() = 3;
  heavy_in.back() = 0;
  const auto in = split_stages(12, 4, {}, heavy_in);
  REQUIRE(counts_of(12, in) == std::vector<int>{1, 3, 4, 4});
  REQUIRE(largest(stage_cost_sums(12, in, heavy_in)) == 4);

  // One expensive block gets a stage of its own.
  std::vector<double> spike(10, 1.0);  // L = 8
  spike.front() = spike.back() = 0;
  spike[1 + 5] = 6;
  REQUIRE(counts_of(8, split_stages(8, 3, {}, spike)) == std::vector<int>{5, 1, 2});
}

TEST_CASE("stages: balanced cuts equal brute force over every cut, L <= 10, P <= 4", "[stages]") {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> draw(0, 9);
  int cases = 0;
  for (int L = 1; L <= 10; ++L)
    for (int P = 1; P <= std::min(4, L); ++P)
      for (int trial = 0; trial < 12; ++trial) {
        // Integer costs: every sum is exact, so the optimum and its ties are too.
        std::vector<double> cost(static_cast<size_t>(L) + 2);
        for (double& c : cost) c = draw(rng);
        if (trial == 0) std::fill(cost.begin(), cost.end(), 1.0);  // many ties
        const auto spans = split_stages(L, P, {}, cost);
        INFO("L=" << L << " P=" << P << " trial " << trial);
        const std::vector<int> expected = brute_force(L, P, cost);
        REQUIRE(counts_of(L, spans) == expected);
        REQUIRE(spans.front().has_input_stage());
        REQUIRE(spans.back().has_output_stage(L));
        ++cases;
      }
  REQUIRE(cases == 12 * (1 + 2 + 3 + 4 * 7));
}

TEST_CASE("stages: site costs of tiny llama are its layers' FLOPs, site by site", "[stages]") {
  const int64_t B = 2, T = 16, N = B * T;
  const auto mc = llama::LlamaConfig::named("tiny");
  const LlamaFlops f = llama_flops(mc, B, T);
  const int L = int(mc.n_layers);
  const double V = double(mc.vocab), D = double(mc.dim);

  ops::reset_flop_count();
  ops::count_flops(123);  // a caller's count survives the counting
  const SiteCosts costs = count_site_costs("tiny", {}, B, T);
  REQUIRE(ops::flops_counted() == 123);
  REQUIRE(costs.model == "tiny");
  REQUIRE(costs.blocks() == L);

  const SiteCost& input = costs.sites.front();
  const SiteCost& output = costs.sites.back();
  REQUIRE(input.flops() == 0);  // an embedding lookup and its scatter
  REQUIRE(output.forward_flops == Approx(2 * N * V * D).epsilon(1e-12));
  REQUIRE(output.backward_flops() == Approx(4 * N * V * D).epsilon(1e-12));
  for (int b = 0; b < L; ++b) {
    const SiteCost& s = costs.sites[size_t(b) + 1];
    INFO("block " << b);
    REQUIRE(s.forward_flops == Approx(N * f.block_matmul_per_token + f.attention_forward).epsilon(1e-12));
    // Input gradients: the matmuls' and attention's (5 products, scores
    // recomputed); weight gradients: the matmuls' alone.
    REQUIRE(s.backward_input_flops ==
            Approx(N * f.block_matmul_per_token + f.attention_forward * 5 / 2).epsilon(1e-12));
    REQUIRE(s.backward_weight_flops == Approx(N * f.block_matmul_per_token).epsilon(1e-12));
  }

  // The sites tile the passes, and the passes are what a training step
  // counts without any hooks.
  double forward = 0, backward = 0;
  for (const SiteCost& s : costs.sites) {
    forward += s.forward_flops;
    backward += s.backward_flops();
  }
  REQUIRE(forward == costs.forward_total_flops);
  REQUIRE(backward == costs.backward_total_flops);
  TrainConfig c;
  c.model = "tiny";
  c.batch = B;
  c.seq = T;
  c.device = "meta";
  c.eval_every = 0;
  Trainer trainer(c);
  REQUIRE(forward + backward == Approx(trainer.train_step().flops).epsilon(1e-12));

  // Every parameter once; blocks alike; the untied head at the output.
  int64_t numel = 0;
  for (const SiteCost& s : costs.sites) numel += s.param_numel;
  REQUIRE(numel == llama::LlamaConfig::named("tiny").parameter_count());
  REQUIRE(input.param_numel == mc.vocab * mc.dim);
  REQUIRE(output.param_numel == mc.vocab * mc.dim + mc.dim);
  REQUIRE(input.param_bytes == 4 * input.param_numel);
  // The residual stream [B, T, D] in f32 enters every block.
  REQUIRE(costs.block_input_bytes == std::vector<int64_t>(size_t(L), N * mc.dim * 4));
}

TEST_CASE("stages: a tied embedding's bytes count once, at the input stage", "[stages]") {
  auto mc = llama::LlamaConfig::named("tiny");
  mc.tie_embeddings = true;
  MetaAllocator meta(64);
  llama::LlamaModel model(mc);
  model.materialize(meta, DType::bf16);
  model.params().allocate_grads();
  OwnedTensor tokens(meta, {2, 8}, DType::i32, MemCategory::workspace);   // [B, T]
  OwnedTensor targets(meta, {2, 8}, DType::i32, MemCategory::workspace);  // [B, T]
  const SiteCosts costs = count_site_costs(model, *tokens, *targets);
  int64_t numel = 0;
  for (const SiteCost& s : costs.sites) numel += s.param_numel;
  REQUIRE(numel == model.parameter_count());
  REQUIRE(costs.sites.front().param_numel == mc.vocab * mc.dim);
  REQUIRE(costs.sites.back().param_numel == mc.dim);  // the final norm alone
  REQUIRE(costs.sites.front().param_bytes == 2 * mc.vocab * mc.dim);  // bf16
  // The tied head still computes at the output stage.
  REQUIRE(costs.sites.back().forward_flops == Approx(2.0 * 16 * mc.vocab * mc.dim).epsilon(1e-12));
  // The model can train on without the counting's hooks.
  REQUIRE_NOTHROW(model.forward(*tokens, *targets, true, 0));

  llama::LlamaModel no_grads(mc);
  no_grads.materialize(meta, DType::f32);
  REQUIRE_THROWS_WITH(count_site_costs(no_grads, *tokens, *targets),
                      Catch::Contains("allocate its gradients first"));
}

TEST_CASE("stages: llama-134m's blocks cost alike and its head more than a block", "[stages]") {
  const int64_t B = 4, T = 1024;
  const SiteCosts costs = count_site_costs("llama-134m", {}, B, T, DType::bf16);
  const int L = costs.blocks();
  REQUIRE(L == 12);
  for (int b = 1; b < L; ++b) {
    INFO("block " << b);
    REQUIRE(costs.sites[size_t(b) + 1].flops() == costs.sites[1].flops());
    REQUIRE(costs.sites[size_t(b) + 1].param_bytes == costs.sites[1].param_bytes);
  }
  const SiteCost& head = costs.sites.back();
  REQUIRE(head.flops() > costs.sites[1].flops());
  REQUIRE(head.param_bytes > costs.sites[1].param_bytes);
  // Balanced over FLOPs, the head's stage gets fewer blocks than the others.
  const auto spans = split_stages(L, 4, {}, costs.compute_flops(), costs.model);
  const std::vector<int> counts = counts_of(L, spans);
  REQUIRE(counts.back() < counts.front());
  REQUIRE(largest(stage_cost_sums(L, spans, costs.compute_flops())) <
          largest(stage_cost_sums(L, split_stages(L, 4, {3, 3, 3, 3}, {}), costs.compute_flops())));

  // Per-stage figures: the sums of their sites, and [B, T, D] bf16 received.
  const auto stages = stage_costs(spans, costs);
  REQUIRE(stages.size() == 4);
  double flops = 0;
  int64_t bytes = 0;
  for (const StageCost& s : stages) {
    flops += s.forward_flops + s.backward_input_flops + s.backward_weight_flops;
    bytes += s.param_bytes;
  }
  REQUIRE(flops == Approx(costs.forward_total_flops + costs.backward_total_flops).epsilon(1e-12));
  REQUIRE(bytes == 2 * llama::LlamaConfig::named("llama-134m").parameter_count());
  REQUIRE(stages[0].received_bytes == 0);
  for (size_t k = 1; k < stages.size(); ++k) REQUIRE(stages[k].received_bytes == B * T * 768 * 2);
}

TEST_CASE("stages: resnet18's block costs follow its stages' widths", "[stages]") {
  const int64_t B = 8, H = 32;
  const SiteCosts costs = count_site_costs("resnet18", {}, B, H);
  REQUIRE(costs.blocks() == 8);
  // Block b's forward: conv1 (strided at a stage's first block), conv2, and
  // the 1x1 projection where the width or size changes.
  const int64_t widths[4] = {64, 128, 256, 512};
  int64_t in = 64, hw = H;
  for (int b = 0; b < 8; ++b) {
    const int stage = b / 2;
    const bool first = b % 2 == 0;
    const int64_t w = widths[stage];
    const int64_t out_hw = first && stage > 0 ? hw / 2 : hw;
    double expected = conv_flops(B, w, out_hw, in, 3) + conv_flops(B, w, out_hw, w, 3);
    if (in != w || out_hw != hw) expected += conv_flops(B, w, out_hw, in, 1);
    const SiteCost& s = costs.sites[size_t(b) + 1];
    INFO("block " << b);
    REQUIRE(s.forward_flops == Approx(expected).epsilon(1e-12));
    REQUIRE(s.backward_input_flops == Approx(expected).epsilon(1e-12));
    REQUIRE(s.backward_weight_flops == Approx(expected).epsilon(1e-12));
    REQUIRE(costs.block_input_bytes[size_t(b)] == B * in * hw * hw * 4);
    in = w;
    hw = out_hw;
  }
  // Same FLOPs, four times the weights, stage after stage (the second
  // block of each stage: two 3x3 convs and two BatchNorms).
  for (int stage = 1; stage < 4; ++stage) {
    const SiteCost& prev = costs.sites[size_t(2 * stage - 1) + 1];
    const SiteCost& cur = costs.sites[size_t(2 * stage + 1) + 1];
    REQUIRE(cur.forward_flops == Approx(prev.forward_flops).epsilon(1e-12));
    const int64_t w = widths[stage];
    REQUIRE(cur.param_numel == 2 * (9 * w * w + 2 * w));
    REQUIRE(cur.param_numel > 3 * prev.param_numel);
  }
  // The stem: its convolution's forward and weight gradient (the images
  // need none); the classifier: one [classes, 512] matmul each way.
  REQUIRE(costs.sites[0].forward_flops == Approx(conv_flops(B, 64, H, 3, 3)).epsilon(1e-12));
  REQUIRE(costs.sites[0].backward_input_flops == 0);
  REQUIRE(costs.sites[0].backward_weight_flops == Approx(conv_flops(B, 64, H, 3, 3)).epsilon(1e-12));
  const SiteCost& fc = costs.sites.back();
  REQUIRE(fc.forward_flops == Approx(2.0 * B * 512 * 10).epsilon(1e-12));
  REQUIRE(fc.backward_input_flops == Approx(2.0 * B * 512 * 10).epsilon(1e-12));
  REQUIRE(fc.backward_weight_flops == Approx(2.0 * B * 512 * 10).epsilon(1e-12));
  int64_t numel = 0;
  for (const SiteCost& s : costs.sites) numel += s.param_numel;
  REQUIRE(numel == resnet::ResNetConfig::named("resnet18").parameter_count());
  // A stage starting at block 2 receives [B, 64, 32, 32] f32.
  const auto stages = stage_costs(split_stages(8, 2, {2, 6}, {}), costs);
  REQUIRE(stages[1].received_bytes == B * 64 * 32 * 32 * 4);
  REQUIRE(stages[0].param_numel + stages[1].param_numel == numel);
  REQUIRE_THROWS_WITH(stage_costs({StageSpan{6, 9}}, costs),
                      Catch::Contains("is not a span of model resnet18 with 8 blocks"));

  // Balanced by parameter bytes instead: the last stage's widest block
  // outweighs the seven before it, so it stands alone; the same cut as
  // trying every cut.
  const auto by_bytes = split_stages(8, 2, {}, costs.param_bytes(), costs.model);
  REQUIRE(counts_of(8, by_bytes) == std::vector<int>{7, 1});
  REQUIRE(counts_of(8, by_bytes) == brute_force(8, 2, costs.param_bytes()));
}
