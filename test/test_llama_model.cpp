// Whole-model checks of LLaMA: gradients of every parameter against finite
// differences in f64, split backward equal to fused, components cover the
// parameters exactly, and bad configs are refused clearly.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "kernels/ops.h"
#include "models/llama/llama_model.h"
#include "test_support.h"

using namespace sdp;
using namespace sdp::llama;
using sdp::testing::Arena;

namespace {

LlamaConfig micro_config(bool tied) {
  LlamaConfig c;
  c.name = "micro";
  c.dim = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;  // grouped-query attention
  c.ffn_dim = 12;
  c.vocab = 11;
  c.max_seq = 8;
  c.tie_embeddings = tied;
  return c;
}

// Random weights of a realistic scale (norm gains near 1, not exactly 1, so
// their gradients matter).
void randomize(LlamaModel& m, uint64_t seed) {
  ParameterSet& p = m.params();
  for (int id = 0; id < p.count(); ++id) {
    const bool is_norm = p.decl(id).shape.ndim() == 1;
    sdp::testing::fill_uniform(p.param(id), seed + static_cast<uint64_t>(id),
                               is_norm ? 0.5 : -0.5, is_norm ? 1.5 : 0.5);
  }
}

}  // namespace

TEST_CASE("LLaMA gradients of every parameter match finite differences (f64)", "[model]") {
  for (const bool tied : {false, true}) {
    CAPTURE(tied);
    CpuAllocator alloc;
    LlamaModel model(micro_config(tied));
    model.materialize(alloc, DType::f64);
    model.params().allocate_grads();
    randomize(model, 7);
    Arena arena;
    Tensor tokens = arena.make({2, 5}, DType::i32);   // [B, T]
    Tensor targets = arena.make({2, 5}, DType::i32);  // [B, T]
    sdp::testing::fill_tokens(tokens, 1, 11);
    sdp::testing::fill_tokens(targets, 2, 11);
    targets.data<int32_t>()[3] = -1;  // one ignored target

    const double scale = 1.0 / 9.0;
    model.forward(tokens, targets);
    model.backward(scale);
    auto loss = [&] { return model.forward(tokens, targets, false) * scale; };
    ParameterSet& p = model.params();
    for (int id = 0; id < p.count(); ++id) {
      CAPTURE(p.decl(id).name);
      const auto numeric = sdp::testing::numeric_gradient(p.param(id), loss, 1e-5);
      const auto analytic = sdp::testing::to_vector(p.grad(id));
      REQUIRE(sdp::testing::max_rel_error(analytic, numeric) < 1e-6);
    }
  }
}

TEST_CASE("split backward (input now, weights later) equals fused backward", "[model]") {
  CpuAllocator alloc;
  LlamaModel model(micro_config(false));
  model.materialize(alloc, DType::f64);
  model.params().allocate_grads();
  randomize(model, 3);
  Arena arena;
  Tensor tokens = arena.make({2, 6}, DType::i32);
  Tensor targets = arena.make({2, 6}, DType::i32);
  sdp::testing::fill_tokens(tokens, 4, 11);
  sdp::testing::fill_tokens(targets, 5, 11);

  model.forward(tokens, targets);
  model.backward(0.1);
  std::map<int, std::vector<double>> fused;
  for (int id = 0; id < model.params().count(); ++id)
    fused[id] = sdp::testing::to_vector(model.params().grad(id));

  model.params().zero_grads();
  model.forward(tokens, targets);
  model.backward(0.1, /*split_weight_grads=*/true);
  // Before backward_weight only the shared parameters have gradients.
  REQUIRE(ops::sum_squares(model.params().group_grads(model.block_group(0))) == 0.0);
  model.backward_weight();
  for (int id = 0; id < model.params().count(); ++id)
    REQUIRE(sdp::testing::to_vector(model.params().grad(id)) == fused[id]);
}

TEST_CASE("components partition the parameters at block and neuron granularity", "[model]") {
  LlamaConfig c = LlamaConfig::named("tiny");
  for (const auto g : {Granularity::block, Granularity::neuron}) {
    ModelLayout layout;
    layout.granularity = g;
    layout.ffn_groups = 4;
    layout.head_groups = 2;
    LlamaModel model(c, layout);
    const int64_t total = model.params().total_numel();
    REQUIRE(total == c.parameter_count());
    int64_t covered = 0;
    std::set<int> seen;
    for (const auto& comp : model.components()) {
      covered += comp.numel;
      for (int id : comp.params) {
        REQUIRE(seen.insert(id).second);  // each parameter in exactly one component
        REQUIRE(model.params().decl(id).group == comp.group);
      }
    }
    REQUIRE(covered == total);
    REQUIRE(seen.size() == static_cast<size_t>(model.params().count()));
  }
  LlamaModel blocks(c);
  REQUIRE(blocks.components().size() == static_cast<size_t>(c.n_layers + 1));
  REQUIRE(blocks.components()[0].kind == ComponentKind::shared);
  ModelLayout neuron{Granularity::neuron, 4, 2, 8, {}, {}};
  LlamaModel neurons(c, neuron);
  REQUIRE(neurons.components().size() == static_cast<size_t>(1 + c.n_layers * (4 + 2)));
  // Group-major order: every block's group 0 first.
  REQUIRE(neurons.components()[1].name == "block.0.ffn.0");
  REQUIRE(neurons.components()[2].name == "block.0.heads.0");
  REQUIRE(neurons.components()[3].name == "block.1.ffn.0");
  neuron.ffn_groups = 5;
  REQUIRE_THROWS_WITH(LlamaModel(c, neuron),
                      Catch::Contains("ffn_groups = 5 must divide the FFN size 176"));
}

TEST_CASE("named configs have the stated parameter counts", "[model]") {
  REQUIRE(LlamaConfig::named("llama-134m").parameter_count() == 134105856);
  const double p500 = static_cast<double>(LlamaConfig::named("llama-500m").parameter_count());
  const double p1b = static_cast<double>(LlamaConfig::named("llama-1b").parameter_count());
  REQUIRE(std::abs(p500 / 500e6 - 1) < 0.05);
  REQUIRE(std::abs(p1b / 1e9 - 1) < 0.05);
  REQUIRE_THROWS_WITH(LlamaConfig::named("llama-7b"), Catch::Contains("valid: tiny, mini, small"));
}

TEST_CASE("inconsistent model configs are refused with the field named", "[model][errors]") {
  LlamaConfig c = micro_config(false);
  c.n_kv_heads = 3;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("n_heads = 2 must be a multiple of n_kv_heads = 3"));
  c = micro_config(false);
  c.dim = 9;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("dim = 9 must be divisible by n_heads"));
  nlohmann::json j = micro_config(false).to_hf_json();
  j.erase("hidden_size");
  REQUIRE_THROWS_WITH(LlamaConfig::from_hf_json(j), Catch::Contains("missing field 'hidden_size'"));
  j = micro_config(false).to_hf_json();
  REQUIRE(LlamaConfig::from_hf_json(j).parameter_count() == micro_config(false).parameter_count());
}

TEST_CASE("forward rejects sequences longer than max_seq and bad token shapes", "[model][errors]") {
  CpuAllocator alloc;
  LlamaModel model(micro_config(false));
  model.materialize(alloc, DType::f32);
  Arena arena;
  Tensor tokens = arena.make({1, 9}, DType::i32);
  sdp::testing::fill_tokens(tokens, 1, 11);
  REQUIRE_THROWS_WITH(model.forward(tokens, tokens), Catch::Contains("exceeds the model's max_seq 8"));
  Tensor bad = arena.make({1, 4}, DType::i32);
  sdp::testing::fill_tokens(bad, 1, 11);
  bad.data<int32_t>()[2] = 11;
  REQUIRE_THROWS_WITH(model.forward(bad, bad), Catch::Contains("11"));
}
