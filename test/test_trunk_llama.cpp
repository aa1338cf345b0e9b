// LLaMA through the shared trunk loop: several micro-batches in flight give
// the gradients of each in turn; activation checkpointing gives the same
// gradients as keeping everything (block and neuron subnetworks, every:K,
// split weight gradients), counts exactly the recomputed blocks' forward
// FLOPs again, and lowers the activation peak, with the meta device
// predicting the CPU's bytes exactly; the parameter hooks come in the
// documented order and every parameter read happens inside its window.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "models/llama/llama_model.h"
#include "model_test_util.h"
#include "test_support.h"
#include "trunk_test_util.h"

using namespace sdp;
using namespace sdp::llama;
using sdp::testing::Arena;
using sdp::testing::ComponentFilter;
using sdp::testing::HookCall;
using sdp::testing::Peaks;
using sdp::testing::peaks_of;
using sdp::testing::require_recompute_peaks;
using sdp::testing::Weights;

namespace {

LlamaConfig trunk_config(bool tied = false) {
  LlamaConfig c;
  c.name = "trunk";
  c.dim = 8;
  c.n_layers = 3;
  c.n_heads = 4;
  c.n_kv_heads = 2;  // two head groups of one KV head and two query heads
  c.ffn_dim = 12;    // three FFN groups of four units
  c.vocab = 11;
  c.max_seq = 8;
  c.tie_embeddings = tied;
  return c;
}

ModelLayout neuron_layout() { return {Granularity::neuron, 3, 2, 8, {}, {}}; }

struct Batch {
  Tensor tokens, targets;  // [2, 6] i32
};
Batch make_batch(Arena& arena, uint64_t seed) {
  Batch b{arena.make({2, 6}, DType::i32), arena.make({2, 6}, DType::i32)};
  sdp::testing::fill_tokens(b.tokens, seed, 11);
  sdp::testing::fill_tokens(b.targets, seed + 1, 11);
  return b;
}

// Random full weights of a whole-block model (norm gains near 1).
Weights random_weights(const LlamaConfig& config, Arena& arena) {
  CpuAllocator alloc;
  LlamaModel ref(config);
  ref.materialize(alloc, DType::f64);
  ParameterSet& p = ref.params();
  for (int id = 0; id < p.count(); ++id) {
    const bool is_norm = p.decl(id).shape.ndim() == 1;
    sdp::testing::fill_uniform(p.param(id), 200 + static_cast<uint64_t>(id), is_norm ? 0.5 : -0.5,
                               is_norm ? 1.5 : 0.5);
  }
  return sdp::testing::full_values(p, false, arena);
}

std::unique_ptr<LlamaModel> build(const LlamaConfig& config, const ModelLayout& layout,
                                  CpuAllocator& alloc, const Weights& weights, Arena& arena,
                                  const ComponentFilter& held = {},
                                  const ComponentFilter& trained = {}) {
  return sdp::testing::build_model<LlamaModel>(config, layout, alloc, weights, arena, held,
                                               trained);
}

// Loss and gradients of one fused or split step.
struct Step {
  double loss = 0;
  Weights grads;
};
Step step(LlamaModel& m, const Batch& b, Arena& arena, bool split = false) {
  m.params().zero_grads();
  Step s;
  s.loss = m.forward(b.tokens, b.targets);
  m.backward(0.1, split);
  if (split) m.backward_weight();
  s.grads = sdp::testing::grads_of(m, arena);
  return s;
}

struct Cut {
  const char* name;
  ModelLayout layout;
  ComponentFilter held;
};
std::vector<Cut> cuts() {
  return {
      {"full, blocks", ModelLayout{}, {}},
      {"B-SDP: block 1 dropped", ModelLayout{},
       [](const Component& c) { return c.block != 1; }},
      {"N-SDP: FFN group 1 and head group 0 of some blocks dropped", neuron_layout(),
       [](const Component& c) {
         if (c.kind == ComponentKind::ffn_group) return !(c.index == 1 && c.block != 2);
         if (c.kind == ComponentKind::head_group) return !(c.index == 0 && c.block == 1);
         return true;
       }},
  };
}

}  // namespace

TEST_CASE("LLaMA micro-batches in flight give the gradients of each in turn (f64)",
          "[model][trunk]") {
  Arena arena;
  const LlamaConfig config = trunk_config();
  const Weights weights = random_weights(config, arena);
  const Batch a = make_batch(arena, 3), b = make_batch(arena, 9);
  for (const Cut& cut : cuts())
    for (const char* policy : {"none", "block"})
      for (const bool split : {false, true}) {
        CAPTURE(cut.name, policy, split);
        CpuAllocator alloc;
        auto m = build(config, cut.layout, alloc, weights, arena, cut.held);
        m->set_recompute(RecomputePolicy::parse(policy, "test"));
        // In turn: a, then b.
        m->params().zero_grads();
        const double la = m->forward(a.tokens, a.targets);
        m->backward(0.1);
        const double lb = m->forward(b.tokens, b.targets);
        m->backward(0.1);
        const Weights in_turn = sdp::testing::grads_of(*m, arena);

        // Both forwards first, then the backwards in the other order.
        m->params().zero_grads();
        REQUIRE(m->forward(a.tokens, a.targets, true, 0) == la);
        REQUIRE(m->forward(b.tokens, b.targets, true, 1) == lb);
        REQUIRE(m->micro_batches_in_flight() == 2);
        m->backward(0.1, split, {}, 1);
        m->backward(0.1, split, {}, 0);
        if (split) {
          m->backward_weight({}, 0);
          m->backward_weight({}, 1);
        }
        REQUIRE(m->micro_batches_in_flight() == 0);
        sdp::testing::require_same(sdp::testing::grads_of(*m, arena), in_turn, 1e-12);
        REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
      }
}

TEST_CASE("LLaMA backward of a micro-batch that is not in flight is refused", "[model][trunk]") {
  Arena arena;
  const LlamaConfig config = trunk_config();
  CpuAllocator alloc;
  auto m = build(config, {}, alloc, random_weights(config, arena), arena);
  const Batch a = make_batch(arena, 3);
  m->forward(a.tokens, a.targets, true, 0);
  REQUIRE_THROWS_WITH(m->backward(0.1, false, {}, 1), Catch::Contains("micro-batch 1"));
  REQUIRE_THROWS_WITH(m->backward_weight({}, 0), Catch::Contains("split_weight_grads"));
  // An evaluation forward leaves the micro-batch in flight alone.
  m->forward(a.tokens, a.targets, false, 0);
  m->backward(0.1, false, {}, 0);
  REQUIRE(m->micro_batches_in_flight() == 0);
}

TEST_CASE("LLaMA gradients with activation checkpointing equal those without (f64)",
          "[model][trunk][recompute]") {
  Arena arena;
  for (const bool tied : {false, true}) {
    const LlamaConfig config = trunk_config(tied);
    const Weights weights = random_weights(config, arena);
    const Batch batch = make_batch(arena, 5);
    for (const Cut& cut : cuts()) {
      CAPTURE(tied, cut.name);
      CpuAllocator a0;
      auto ref_model = build(config, cut.layout, a0, weights, arena, cut.held);
      const Step ref = step(*ref_model, batch, arena);
      for (const char* policy : {"block", "every:2"})
        for (const bool split : {false, true}) {
          CAPTURE(policy, split);
          CpuAllocator alloc;
          auto m = build(config, cut.layout, alloc, weights, arena, cut.held);
          m->set_recompute(RecomputePolicy::parse(policy, "test"));
          const Step got = step(*m, batch, arena, split);
          REQUIRE(got.loss == ref.loss);
          sdp::testing::require_same(got.grads, ref.grads, 1e-12);
          REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
        }
    }
  }
}

TEST_CASE("LLaMA backward masking with checkpointing trains the owned parts alike",
          "[model][trunk][recompute]") {
  Arena arena;
  const LlamaConfig config = trunk_config();
  const Weights weights = random_weights(config, arena);
  const Batch batch = make_batch(arena, 5);
  auto trained = [](const Component& c) { return c.kind == ComponentKind::shared || c.block == 1; };
  CpuAllocator a0, a1;
  auto ref_model = build(config, {}, a0, weights, arena, {}, trained);
  auto m = build(config, {}, a1, weights, arena, {}, trained);
  m->set_recompute(RecomputePolicy::parse("block", "test"));
  const Step ref = step(*ref_model, batch, arena), got = step(*m, batch, arena, true);
  sdp::testing::require_same(got.grads, ref.grads, 1e-12);
}

TEST_CASE("LLaMA recomputation counts exactly the checkpointed blocks' forward FLOPs again",
          "[model][trunk][recompute][flops]") {
  Arena arena;
  const LlamaConfig config = trunk_config();
  const Weights weights = random_weights(config, arena);
  const Batch batch = make_batch(arena, 5);
  CpuAllocator alloc;
  auto m = build(config, {}, alloc, weights, arena);

  std::map<int, double> site_forward;
  double plain = 0;
  {
    sdp::testing::SiteFlops sites(*m);
    ops::reset_flop_count();
    m->forward(batch.tokens, batch.targets);
    m->backward(0.1);
    plain = ops::flops_counted();
    site_forward = sites.forward;
  }
  REQUIRE(site_forward.size() == static_cast<size_t>(m->site_count()));
  for (const auto& [policy, blocks] :
       std::vector<std::pair<const char*, std::vector<int>>>{{"block", {0, 1, 2}},
                                                             {"every:2", {0, 2}}}) {
    CAPTURE(policy);
    double again = 0;
    for (int b : blocks) again += site_forward.at(b + 1);
    REQUIRE(again > 0);
    m->set_recompute(RecomputePolicy::parse(policy, "test"));
    ops::reset_flop_count();
    m->forward(batch.tokens, batch.targets);
    m->backward(0.1);
    REQUIRE(ops::flops_counted() - plain == Approx(again).epsilon(1e-12));
  }
}

namespace {

Peaks measure(Allocator& alloc, const LlamaConfig& config, const ModelLayout& layout,
              const std::vector<bool>& held, const char* policy, bool split) {
  LlamaModel m(config, layout);
  m.materialize(alloc, DType::f64, held);
  m.params().allocate_grads();
  m.params().init_values(1);
  m.set_recompute(RecomputePolicy::parse(policy, "test"));
  OwnedTensor tokens(alloc, {2, 8}, DType::i32, MemCategory::workspace);   // [B, T]
  OwnedTensor targets(alloc, {2, 8}, DType::i32, MemCategory::workspace);  // [B, T]
  if (alloc.device() == Device::cpu) {
    sdp::testing::fill_tokens(*tokens, 1, static_cast<int32_t>(config.vocab));
    sdp::testing::fill_tokens(*targets, 2, static_cast<int32_t>(config.vocab));
  }
  alloc.stats().reset_peaks();
  m.forward(*tokens, *targets);
  REQUIRE(alloc.stats().current(MemCategory::activation) ==
          m.saved_activation_bytes({2, 8}));
  m.backward(0.1, split);
  if (split) m.backward_weight();
  REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  return peaks_of(alloc.stats());
}

}  // namespace

TEST_CASE("LLaMA meta dry runs predict the CPU's peaks exactly, with and without recomputation",
          "[model][trunk][recompute][meta]") {
  LlamaConfig config = trunk_config();
  config.n_layers = 4;
  config.dim = 16;
  config.ffn_dim = 48;
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()})
    for (const bool split : {false, true}) {
      CAPTURE(granularity_name(layout.granularity), split);
      require_recompute_peaks(
          [&](Allocator& alloc, const char* policy) {
            return measure(alloc, config, layout, {}, policy, split);
          },
          split);
    }
}

TEST_CASE("LLaMA sites list the parameters each part reads", "[model][trunk][hooks]") {
  for (const bool tied : {false, true})
    for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
      CAPTURE(tied, granularity_name(layout.granularity));
      const LlamaConfig config = trunk_config(tied);
      LlamaModel m(config, layout);
      const ParameterSet& p = m.params();
      REQUIRE(m.site_count() == config.n_layers + 2);
      std::map<int, int> sites_of;  // parameter -> how many sites list it
      for (int s = 0; s < m.site_count(); ++s)
        for (int id : m.site_params(s)) {
          REQUIRE_FALSE(p.decl(id).buffer);
          ++sites_of[id];
        }
      REQUIRE(sites_of.size() == static_cast<size_t>(p.count()));  // every parameter
      const int embed = *p.find("model.embed_tokens.weight");
      REQUIRE(sites_of[embed] == (tied ? 2 : 1));
      const auto block1 = m.site_params(2);
      for (const char* norm : {"model.layers.1.input_layernorm.weight",
                               "model.layers.1.post_attention_layernorm.weight"})
        REQUIRE(std::count(block1.begin(), block1.end(), *p.find(norm)) == 1);
      REQUIRE_THROWS_WITH(m.site_params(config.n_layers + 2),
                          Catch::Contains("valid: 0 .. " + std::to_string(config.n_layers + 1)));
    }
}

TEST_CASE("LLaMA parameter hooks come in order and every read is inside its window",
          "[model][trunk][hooks]") {
  Arena arena;
  const LlamaConfig config = trunk_config(/*tied=*/true);
  const Weights weights = random_weights(config, arena);
  const Batch batch = make_batch(arena, 5);
  const auto f = ParamPass::forward, b = ParamPass::backward;
  // B-SDP without block 1 (site 2): it gets no calls.
  auto held = [](const Component& c) { return c.block != 1; };
  for (const char* policy : {"none", "block", "every:2"})
    for (const bool split : {false, true}) {
      CAPTURE(policy, split);
      CpuAllocator a0, a1;
      auto ref_model = build(config, {}, a0, weights, arena, held);
      const Step ref = step(*ref_model, batch, arena);
      auto m = build(config, {}, a1, weights, arena, held);
      m->set_recompute(RecomputePolicy::parse(policy, "test"));
      Step got;
      std::vector<HookCall> calls;
      {
        // Every parameter is NaN outside its site's windows.
        sdp::testing::ParamWindows windows(*m);
        got = step(*m, batch, arena, split);
        REQUIRE(windows.none_open());
        calls = windows.calls;
      }
      REQUIRE(got.loss == ref.loss);
      sdp::testing::require_same(got.grads, ref.grads, 1e-12);
      const std::vector<HookCall> expected = {
          {0, f, true}, {0, f, false}, {1, f, true}, {1, f, false}, {3, f, true}, {3, f, false},
          {4, f, true}, {4, f, false},  // forward: sites 0 .. L + 1, block 1 skipped
          {4, b, true}, {4, b, false}, {3, b, true}, {3, b, false}, {1, b, true}, {1, b, false}};
      // The embedding's backward reads no parameter: site 0 gets no backward calls.
      CAPTURE(sdp::testing::describe(calls));
      REQUIRE(calls == expected);
    }

  // Evaluation and logits() make the forward calls only.
  CpuAllocator alloc;
  auto m = build(config, {}, alloc, weights, arena, held);
  std::vector<HookCall> eval_calls, logits_calls;
  Tensor logits = arena.make({2, 6, config.vocab}, DType::f64);
  {
    sdp::testing::ParamWindows windows(*m);
    m->forward(batch.tokens, batch.targets, false);
    eval_calls = windows.calls;
    windows.calls.clear();
    m->logits(batch.tokens, logits);
    logits_calls = windows.calls;
  }
  const std::vector<HookCall> forward_only = {{0, f, true}, {0, f, false}, {1, f, true},
                                              {1, f, false}, {3, f, true}, {3, f, false},
                                              {4, f, true}, {4, f, false}};
  REQUIRE(eval_calls == forward_only);
  REQUIRE(logits_calls == forward_only);
  for (double v : sdp::testing::to_vector(logits)) REQUIRE(std::isfinite(v));
}

TEST_CASE("LLaMA recomputation is bit-identical in f32", "[model][trunk][recompute]") {
  // The same ops on the same inputs: not merely close.
  const LlamaConfig config = trunk_config();
  Arena arena;
  const Batch batch = make_batch(arena, 5);
  std::vector<std::vector<double>> grads[2];
  for (int with = 0; with < 2; ++with) {
    CpuAllocator alloc;
    LlamaModel m(config, neuron_layout());
    m.materialize(alloc, DType::f32);
    m.params().allocate_grads();
    m.params().init_values(4);
    if (with) m.set_recompute(RecomputePolicy::parse("every:2", "test"));
    m.forward(batch.tokens, batch.targets);
    m.backward(0.1);
    for (int id = 0; id < m.params().count(); ++id)
      grads[with].push_back(sdp::testing::to_vector(m.params().grad(id)));
  }
  REQUIRE(grads[0] == grads[1]);
}
