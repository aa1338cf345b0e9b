// LLaMA cut into components: neuron-level pieces compute the same model as
// whole blocks; a subnetwork that holds only some components (forward
// masking) equals the full model with the missing components' output
// projections zeroed; training only some components (backward masking)
// gives exactly the full model's gradients for them and allocates nothing
// for the others; initialization does not depend on the cut.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "models/common/parameter_pieces.h"
#include "models/llama/llama_model.h"
#include "model_test_util.h"
#include "test_support.h"

using namespace sdp;
using namespace sdp::llama;
using sdp::testing::Arena;

namespace {

LlamaConfig cut_config() {
  LlamaConfig c;
  c.name = "cut";
  c.dim = 8;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;  // two head groups of one KV head and two query heads
  c.ffn_dim = 12;    // three FFN groups of four units
  c.vocab = 11;
  c.max_seq = 8;
  c.tie_embeddings = false;
  return c;
}

ModelLayout neuron_layout() { return {Granularity::neuron, 3, 2, 8, {}, {}}; }

using sdp::testing::require_masked_grads;
using sdp::testing::require_part_grads;
using sdp::testing::Weights;

// Full Hugging Face tensors (values or gradients) of a model, assembled from its parts.
Weights full_values(const LlamaModel& m, bool grads, Arena& arena) {
  return sdp::testing::full_values(m.params(), grads, arena);
}

struct Batch {
  Tensor tokens, targets;  // [2, 6] i32
};
Batch make_batch(Arena& arena) {
  Batch b{arena.make({2, 6}, DType::i32), arena.make({2, 6}, DType::i32)};
  sdp::testing::fill_tokens(b.tokens, 4, 11);
  sdp::testing::fill_tokens(b.targets, 5, 11);
  return b;
}

// The reference: a whole-block model with random weights (norm gains near 1).
Weights random_full_weights(Arena& arena) {
  CpuAllocator alloc;
  LlamaModel ref(cut_config());
  ref.materialize(alloc, DType::f64);
  ParameterSet& p = ref.params();
  for (int id = 0; id < p.count(); ++id) {
    const bool is_norm = p.decl(id).shape.ndim() == 1;
    sdp::testing::fill_uniform(p.param(id), 100 + static_cast<uint64_t>(id),
                               is_norm ? 0.5 : -0.5, is_norm ? 1.5 : 0.5);
  }
  return full_values(ref, false, arena);
}

// Loss and full-tensor gradients of a model on the batch.
struct Outcome {
  double loss = 0;
  Weights grads;
};
Outcome run(LlamaModel& m, const Batch& b, Arena& arena) {
  m.params().zero_grads();
  Outcome o;
  o.loss = m.forward(b.tokens, b.targets);
  m.backward(0.1);
  o.grads = full_values(m, true, arena);
  return o;
}

std::vector<bool> held_components(const LlamaModel& m,
                                  const std::function<bool(const Component&)>& keep) {
  return sdp::testing::groups_where(m.components(), m.params().group_count(), keep);
}

using sdp::testing::ComponentFilter;

std::unique_ptr<LlamaModel> build(const ModelLayout& layout, CpuAllocator& alloc,
                                  const Weights& weights, Arena& arena,
                                  const ComponentFilter& held = {},
                                  const ComponentFilter& trained = {}) {
  return sdp::testing::build_model<LlamaModel>(cut_config(), layout, alloc, weights, arena, held,
                                               trained);
}

void require_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  REQUIRE(sdp::testing::max_rel_error(a, b) < tol);
}

// Zeroes the output-projection columns of the listed heads / FFN units of a
// full model's weights (what dropping those neuron groups means).
void zero_columns(std::vector<double>& w, int64_t rows, int64_t cols, int64_t start,
                  int64_t count) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = start; c < start + count; ++c) w[static_cast<size_t>(r * cols + c)] = 0;
}

}  // namespace

TEST_CASE("neuron pieces compute the same model and gradients as whole blocks", "[model][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  CpuAllocator a1, a2;
  auto blocks = build({}, a1, weights, arena);
  auto neurons = build(neuron_layout(), a2, weights, arena);
  const Outcome ref = run(*blocks, batch, arena), cut = run(*neurons, batch, arena);
  REQUIRE(cut.loss == Approx(ref.loss).epsilon(1e-12));
  REQUIRE(cut.grads.size() == ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    CAPTURE(name);
    require_close(cut.grads.at(name), g, 1e-10);
  }
}

TEST_CASE("neuron-cut gradients match finite differences (f64)", "[model][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  CpuAllocator alloc;
  // Hold only some groups: gradients of the subnetwork itself.
  auto held = build(neuron_layout(), alloc, weights, arena, [](const Component& c) {
    return c.kind == ComponentKind::shared || c.index != 1;
  });
  LlamaModel& model = *held;
  model.forward(batch.tokens, batch.targets);
  model.backward(0.1);
  auto loss = [&] { return model.forward(batch.tokens, batch.targets, false) * 0.1; };
  ParameterSet& p = model.params();
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    CAPTURE(p.decl(id).name);
    const auto numeric = sdp::testing::numeric_gradient(p.param(id), loss, 1e-5);
    REQUIRE(sdp::testing::max_rel_error(sdp::testing::to_vector(p.grad(id)), numeric) < 1e-6);
  }
}

TEST_CASE("forward masking equals the full model with dropped parts zeroed", "[model][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  const LlamaConfig c = cut_config();
  const int64_t D = c.dim, F = c.ffn_dim, q_out = c.n_heads * c.head_dim();

  SECTION("N-SDP: head group 1 of block 0 and FFN groups 0, 2 of block 1 dropped") {
    auto keep = [](const Component& comp) {
      if (comp.kind == ComponentKind::head_group) return !(comp.block == 0 && comp.index == 1);
      if (comp.kind == ComponentKind::ffn_group) return !(comp.block == 1 && comp.index != 1);
      return true;
    };
    CpuAllocator a1, a2;
    auto sub_model = build(neuron_layout(), a1, weights, arena, keep);
    LlamaModel& sub = *sub_model;

    auto zeroed = weights;
    zero_columns(zeroed.at("model.layers.0.self_attn.o_proj.weight"), D, q_out, q_out / 2, q_out / 2);
    zero_columns(zeroed.at("model.layers.1.mlp.down_proj.weight"), D, F, 0, F / 3);
    zero_columns(zeroed.at("model.layers.1.mlp.down_proj.weight"), D, F, 2 * F / 3, F / 3);
    auto full = build({}, a2, zeroed, arena);
    const Outcome ref = run(*full, batch, arena), got = run(sub, batch, arena);
    REQUIRE(got.loss == Approx(ref.loss).epsilon(1e-12));
    // The subnet's own tensors (unheld pieces left zero in the assembly) match
    // the full model's gradients where they exist.
    Arena scratch;
    const auto sub_grads = full_values(sub, true, scratch);
    const ParameterSet& p = sub.params();
    require_part_grads(p, ref.grads, 1e-10);
    // Narrower matrices: the subnet holds fewer parameters and activations.
    REQUIRE(p.materialized_numel() < full->params().materialized_numel());
    REQUIRE(sub.saved_activation_bytes({2, 6}) < full->saved_activation_bytes({2, 6}));
  }

  SECTION("B-SDP: block 1 dropped") {
    CpuAllocator a1, a2;
    auto sub = build({}, a1, weights, arena, [](const Component& comp) { return comp.block != 1; });
    auto zeroed = weights;
    for (const char* w : {"model.layers.1.self_attn.o_proj.weight", "model.layers.1.mlp.down_proj.weight"})
      std::fill(zeroed.at(w).begin(), zeroed.at(w).end(), 0.0);
    auto full = build({}, a2, zeroed, arena);
    const Outcome ref = run(*full, batch, arena), got = run(*sub, batch, arena);
    REQUIRE(got.loss == Approx(ref.loss).epsilon(1e-12));
    for (const auto& [name, g] : got.grads) {
      CAPTURE(name);
      require_close(g, ref.grads.at(name), 1e-10);
    }
    REQUIRE(got.grads.count("model.layers.1.mlp.up_proj.weight") == 0);
  }
}

TEST_CASE("backward masking trains only owned parts, with the full model's gradients",
          "[model][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator a1, a2;
    auto full_model = build(layout, a1, weights, arena);
    auto masked_model = build(layout, a2, weights, arena, {}, [](const Component& comp) {
      return comp.kind == ComponentKind::shared || (comp.block + comp.index) % 2 == 0;
    });
    LlamaModel &full = *full_model, &masked = *masked_model;
    const Outcome ref = run(full, batch, arena), got = run(masked, batch, arena);
    REQUIRE(got.loss == ref.loss);  // same forward, bit for bit
    const ParameterSet& p = masked.params();
    require_masked_grads(p, full.params());
    // Gradients and moments only for what is trained.
    size_t expected = 0;
    for (int g = 0; g < p.group_count(); ++g)
      if (p.group_decl(g).trained)
        expected += a2.rounded(static_cast<size_t>(p.group_decl(g).numel) * sizeof(double));
    REQUIRE(a2.stats().current(MemCategory::grad) == expected);
  }
}

TEST_CASE("initial values do not depend on how the model is cut", "[model][subnet]") {
  Arena arena;
  CpuAllocator a1, a2;
  LlamaModel blocks(cut_config());
  blocks.materialize(a1, DType::f32);
  blocks.params().init_values(42);
  LlamaModel neurons(cut_config(), neuron_layout());
  neurons.materialize(a2, DType::f32);
  neurons.params().init_values(42);
  const auto a = full_values(blocks, false, arena), b = full_values(neurons, false, arena);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, v] : a) {
    CAPTURE(name);
    REQUIRE(b.at(name) == v);
  }
}

TEST_CASE("a subnetwork saves exactly the activations it plans for", "[model][subnet]") {
  Arena arena;
  const Batch batch = make_batch(arena);
  const std::vector<std::function<bool(const Component&)>> masks = {
      [](const Component&) { return true; },
      [](const Component& c) { return c.kind == ComponentKind::shared || c.index == 0; },
      [](const Component& c) { return c.kind != ComponentKind::head_group || c.block == 1; },
      [](const Component& c) { return c.kind != ComponentKind::ffn_group; },
      [](const Component& c) { return c.block != 0; }};
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()})
    for (size_t m = 0; m < masks.size(); ++m)
      for (const char* policy : {"none", "block", "every:2"}) {
        CAPTURE(granularity_name(layout.granularity), m, policy);
        CpuAllocator alloc;
        LlamaModel model(cut_config(), layout);
        model.materialize(alloc, DType::f32, held_components(model, masks[m]));
        model.params().allocate_grads();
        model.params().init_values(1);
        model.set_recompute(RecomputePolicy::parse(policy, "test"));
        model.forward(batch.tokens, batch.targets);
        REQUIRE(alloc.stats().current(MemCategory::activation) ==
                model.saved_activation_bytes({2, 6}));
        model.backward(0.1);
        REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
      }
}

TEST_CASE("checkpointed blocks plan only their input", "[model][subnet][recompute]") {
  CpuAllocator alloc;
  const LlamaConfig c = cut_config();
  LlamaModel model(c, neuron_layout());
  model.materialize(alloc, DType::f32);
  const BatchShape shape{2, 6};
  const size_t none = model.saved_activation_bytes(shape);
  model.set_recompute(RecomputePolicy::parse("block", "test"));
  const size_t block = model.saved_activation_bytes(shape);
  // Kept: each block's input, the last block's output, the final norm's
  // output and rstd, the logits and their log-sum-exp (f32, 64-byte rounding).
  auto bytes = [&](int64_t n) { return alloc.rounded(static_cast<size_t>(n) * 4); };
  const int64_t N = shape.tokens();
  REQUIRE(block == static_cast<size_t>(c.n_layers + 2) * bytes(N * c.dim) + 2 * bytes(N) +
                       bytes(N * c.vocab));
  REQUIRE(block < none);
  model.set_recompute(RecomputePolicy::parse("every:2", "test"));  // block 0 of 2
  const size_t every2 = model.saved_activation_bytes(shape);
  REQUIRE(every2 > block);
  REQUIRE(every2 < none);
}
