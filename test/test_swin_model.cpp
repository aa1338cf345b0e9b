// The Swin Transformers: parameter counts, timm's names and shapes, and
// components; whole-model gradients of swin-micro against finite
// differences (f64), with and without stochastic depth; head and MLP groups
// compute the same network as whole blocks; forward masking (B-SDP, N-SDP)
// equals the full network with the dropped parts zeroed; backward masking
// trains only owned parts with the full gradients; split backward and
// recomputation equal the plain backward; drop path is a function of the
// global sample index (two half batches keyed as two ranks equal the whole
// batch); a resumed run is bit-identical (the meta device's bytes:
// test_family_invariants.cpp); the bias tables are not weight-decayed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/optim/adamw.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "models/common/parameter_pieces.h"
#include "models/registry.h"
#include "swin_test_util.h"
#include "test/test_checkpoint_support.h"
#include "test/test_temp_dir.h"
#include "test/train_config_util.h"

using namespace sdp;
using namespace sdp::swin;
using namespace sdp::testing;
namespace fs = std::filesystem;

namespace {

// The floor: the key bias's gradient is zero in exact arithmetic (softmax
// does not see a constant added to every score of a row), so only roundoff
// (~1e-17) is compared there.
void require_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  REQUIRE(max_rel_error(a, b, 1e-6) < tol);
}

std::vector<int64_t> sample_indices(int64_t numel, int64_t samples) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numel; i += std::max<int64_t>(1, numel / samples)) out.push_back(i);
  return out;
}

// Every analytic gradient of `m` (after one backward at scale 1 / B) against
// central differences of loss().
template <typename LossFn>
void check_gradients(SwinModel& m, LossFn&& loss) {
  ParameterSet& p = m.params();
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_trained(id)) continue;
    CAPTURE(p.decl(id).name);
    const auto analytic = to_vector(p.grad(id));
    const auto at = sample_indices(p.param(id).numel(), 10);
    const auto numeric = numeric_gradient_at(p.param(id), loss, at);
    // The floor keeps the key bias (zero gradient, see require_close) from
    // judging finite-difference roundoff (~1e-10).
    double scale = 1e-3, diff = 0;
    for (size_t k = 0; k < at.size(); ++k) {
      diff = std::max(diff, std::abs(analytic[static_cast<size_t>(at[k])] - numeric[k]));
      scale = std::max(scale, std::abs(numeric[k]));
    }
    REQUIRE(diff / scale < 1e-6);
  }
}

// timm's state_dict names of a SwinTransformer with these stages.
std::vector<std::string> timm_names(const SwinConfig& c) {
  std::vector<std::string> n{"patch_embed.proj.weight", "patch_embed.proj.bias",
                             "patch_embed.norm.weight", "patch_embed.norm.bias"};
  for (int s = 0; s < c.stage_count(); ++s) {
    const std::string layer = "layers." + std::to_string(s) + ".";
    if (s > 0)
      for (const char* t :
           {"downsample.norm.weight", "downsample.norm.bias", "downsample.reduction.weight"})
        n.push_back(layer + t);
    for (int64_t j = 0; j < c.depths[static_cast<size_t>(s)]; ++j)
      for (const char* t :
           {"norm1.weight", "norm1.bias", "attn.relative_position_bias_table", "attn.qkv.weight",
            "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", "norm2.weight", "norm2.bias",
            "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
        n.push_back(layer + "blocks." + std::to_string(j) + "." + t);
  }
  for (const char* t : {"norm.weight", "norm.bias", "head.fc.weight", "head.fc.bias"})
    n.push_back(t);
  return n;
}

Model::SampleKey key(int64_t first, int64_t stride, int64_t step = 1) {
  return {77, step, first, stride, 0};
}

TrainConfig micro_run() { return sdp::testing::micro_swin_run(); }

}  // namespace

TEST_CASE("Swin Transformers have timm's parameter counts, names and components", "[model][swin]") {
  // timm 1.0.9's SwinTransformer with these arguments counts the same.
  REQUIRE(SwinConfig::named("swin-t").parameter_count() == 27505108);
  REQUIRE(SwinConfig::named("swin-mini").parameter_count() == 2280486);
  REQUIRE(SwinConfig::named("swin-micro").parameter_count() == 9790);
  for (const std::string name : {"swin-micro", "swin-mini", "swin-t"}) {
    CAPTURE(name);
    const auto m = make_model(name);
    REQUIRE(m->params().total_numel() == m->parameter_count());
    const auto& sm = dynamic_cast<const SwinModel&>(*m);
    std::vector<std::string> names;
    for (const FullTensor& f : full_tensors(m->params())) names.push_back(f.name);
    // Declared shared parts first, so compared as sets (each name once).
    const std::vector<std::string> timm = timm_names(sm.config());
    REQUIRE(names.size() == timm.size());
    REQUIRE(std::set<std::string>(names.begin(), names.end()) ==
            std::set<std::string>(timm.begin(), timm.end()));
    REQUIRE(static_cast<int64_t>(m->components().size()) == 1 + sm.config().block_count());
    int64_t covered = 0;
    for (const Component& c : m->components()) covered += c.numel;
    REQUIRE(covered == m->params().total_numel());
    // Neuron groups cut the same tensors.
    ModelLayout neuron;
    neuron.granularity = Granularity::neuron;
    neuron.ffn_groups = neuron.head_groups = 0;
    const auto n = make_model(name, neuron);
    REQUIRE(n->params().total_numel() == m->params().total_numel());
    std::vector<std::string> cut;
    for (const FullTensor& f : full_tensors(n->params())) cut.push_back(f.name);
    REQUIRE(std::set<std::string>(cut.begin(), cut.end()) ==
            std::set<std::string>(names.begin(), names.end()));
  }
  // Shapes where timm's rules bite: the last stage of swin-mini is 2x2, so
  // its window shrinks to 2 (a 3x3 bias table); swin-micro's stage 1 (4x4)
  // does not shift.
  const auto mini = make_model("swin-mini");
  const ParameterSet& p = mini->params();
  REQUIRE(p.decl(*p.find("layers.3.blocks.1.attn.relative_position_bias_table")).shape ==
          Shape{9, 16});
  REQUIRE(p.decl(*p.find("layers.0.blocks.0.attn.relative_position_bias_table")).shape ==
          Shape{49, 2});
  REQUIRE(p.decl(*p.find("layers.1.downsample.reduction.weight")).shape == Shape{64, 128});
  REQUIRE(p.decl(*p.find("patch_embed.proj.weight")).shape == Shape{32, 3, 2, 2});
  const SwinConfig micro = swin_micro();
  REQUIRE(micro.block_shift(0, 1) == 2);
  REQUIRE(micro.block_shift(1, 1) == 0);
  REQUIRE(micro.stage_window(1) == 4);
  // timm's linspace(0, rate, blocks).
  SwinConfig t = SwinConfig::named("swin-t");
  REQUIRE(t.drop_path_rate == 0.2);
  REQUIRE(t.block_drop_path(0) == 0.0);
  REQUIRE(t.block_drop_path(11) == Approx(0.2));
  REQUIRE(t.block_drop_path(1) == Approx(0.2 / 11));
  // Default groups: the largest count up to 4 dividing every stage's heads / units.
  const ModelLayout automatic = swin_neuron_layout(0, 0);
  REQUIRE(with_default_groups("swin-t", automatic).head_groups == 3);
  REQUIRE(with_default_groups("swin-t", automatic).ffn_groups == 4);
  REQUIRE(with_default_groups("swin-mini", automatic).head_groups == 2);
  REQUIRE_THROWS_WITH(SwinModel(micro, swin_neuron_layout(3, 2)),
                      Catch::Contains("head_groups = 3 must divide every stage's heads"));
  // config.json: what timm is built from; drop_path_rate is not architecture.
  const nlohmann::json j = mini->config_json();
  REQUIRE(j.at("model_type") == "sdp-swin");
  REQUIRE(j.at("depths") == nlohmann::json::array({2, 2, 2, 2}));
  REQUIRE(SwinConfig::from_json(j).to_json() == j);
  REQUIRE(model_architecture(j).count("drop_path_rate") == 0);
  REQUIRE(describe_model_config(j).find("swin-mini") == 0);
}

TEST_CASE("Swin gradients of every parameter match finite differences (f64)", "[model][swin]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch batch = swin_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, swin_neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    for (const double drop : {0.0, 0.6}) {
      CAPTURE(drop);
      CpuAllocator alloc;
      auto model = swin_build(layout, alloc, weights, arena);
      SwinModel& m = *model;
      m.set_drop_path(drop);
      m.set_sample_key(key(0, 1));
      m.forward(batch.images, batch.labels);
      m.backward(1.0 / 3);
      auto loss = [&] { return m.forward(batch.images, batch.labels) / 3; };
      check_gradients(m, loss);
    }
  }
}

TEST_CASE("Swin head and MLP groups compute the same network as whole blocks",
          "[model][swin][subnet]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch batch = swin_batch(arena);
  CpuAllocator a1, a2;
  auto blocks = swin_build({}, a1, weights, arena);
  auto groups = swin_build(swin_neuron_layout(), a2, weights, arena);
  const SwinOutcome ref = swin_run(*blocks, batch, arena), cut = swin_run(*groups, batch, arena);
  REQUIRE(cut.loss == Approx(ref.loss).epsilon(1e-12));
  REQUIRE(cut.grads.size() == ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    CAPTURE(name);
    require_close(cut.grads.at(name), g, 1e-10);
  }
}

TEST_CASE("Swin forward masking equals the full network with dropped parts zeroed",
          "[model][swin][subnet]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch batch = swin_batch(arena);
  auto check_subnet = [&](SwinModel& sub, SwinModel& full) {
    const SwinOutcome ref = swin_run(full, batch, arena), got = swin_run(sub, batch, arena);
    REQUIRE(got.loss == Approx(ref.loss).epsilon(1e-12));
    const ParameterSet& p = sub.params();
    require_part_grads(p, ref.grads, 1e-10, 1e-6);
    REQUIRE(p.materialized_numel() < full.params().materialized_numel());
  };
  // Zeroes columns [c0, c1) of every row of a [rows, cols] full tensor.
  auto zero_columns = [](std::vector<double>& w, int64_t cols, int64_t c0, int64_t c1) {
    for (size_t r = 0; r < w.size() / static_cast<size_t>(cols); ++r)
      for (int64_t c = c0; c < c1; ++c)
        w[r * static_cast<size_t>(cols) + static_cast<size_t>(c)] = 0;
  };

  SECTION("N-SDP: head group 1 of block 1 and MLP group 0 of block 2 dropped") {
    auto keep = [](const Component& c) {
      if (c.kind == ComponentKind::head_group) return !(c.block == 1 && c.index == 1);
      if (c.kind == ComponentKind::ffn_group) return !(c.block == 2 && c.index == 0);
      return true;
    };
    CpuAllocator a1, a2;
    auto sub = swin_build(swin_neuron_layout(), a1, weights, arena, keep);
    // A dropped head group writes nothing: proj's input columns of its
    // head (block 1: 2 heads of 4 channels); a dropped MLP group: fc2's
    // columns of its units (block 2: 64 units, 32 per group).
    auto zeroed = weights;
    zero_columns(zeroed.at("layers.0.blocks.1.attn.proj.weight"), 8, 4, 8);
    zero_columns(zeroed.at("layers.1.blocks.0.mlp.fc2.weight"), 64, 0, 32);
    auto full = swin_build({}, a2, zeroed, arena);
    check_subnet(*sub, *full);
  }

  SECTION("B-SDP: a shifted block and a merging block dropped") {
    auto keep = [](const Component& c) { return c.block != 1 && c.block != 2; };
    CpuAllocator a1, a2;
    auto sub = swin_build({}, a1, weights, arena, keep);
    REQUIRE_FALSE(sub->block_runs(1));
    REQUIRE(sub->block_runs(2));  // its shared patch merging still runs
    // A dropped block is the identity: both branches zero.
    auto zeroed = weights;
    for (const std::string b : {"layers.0.blocks.1.", "layers.1.blocks.0."})
      for (const char* t : {"attn.proj.weight", "attn.proj.bias", "mlp.fc2.weight", "mlp.fc2.bias"})
        std::fill(zeroed.at(b + t).begin(), zeroed.at(b + t).end(), 0.0);
    auto full = swin_build({}, a2, zeroed, arena);
    check_subnet(*sub, *full);
  }
}

TEST_CASE("Swin backward masking trains only owned parts, with the full gradients",
          "[model][swin][subnet]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch batch = swin_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, swin_neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator a1, a2;
    auto full = swin_build(layout, a1, weights, arena);
    auto masked = swin_build(layout, a2, weights, arena, {}, [](const Component& c) {
      return c.kind == ComponentKind::shared || (c.block + c.index) % 2 == 0;
    });
    const SwinOutcome ref = swin_run(*full, batch, arena), got = swin_run(*masked, batch, arena);
    REQUIRE(got.loss == ref.loss);
    require_masked_grads(masked->params(), full->params());
  }
}

TEST_CASE("Swin split backward and recomputation equal the plain backward",
          "[model][swin][recompute]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch batch = swin_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, swin_neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator a1, a2, a3;
    auto plain = swin_build(layout, a1, weights, arena);
    auto split = swin_build(layout, a2, weights, arena);
    auto recompute = swin_build(layout, a3, weights, arena);
    for (SwinModel* m : {plain.get(), split.get(), recompute.get()}) {
      m->set_drop_path(0.5);  // the recomputed forward must draw the same samples
      m->set_sample_key(key(3, 1));
    }
    recompute->set_recompute(RecomputePolicy::parse("block", "test"));
    const SwinOutcome a = swin_run(*plain, batch, arena), b = swin_run(*split, batch, arena, true),
                      c = swin_run(*recompute, batch, arena);
    REQUIRE(a.loss == b.loss);
    REQUIRE(a.loss == c.loss);
    for (const auto& [name, g] : a.grads) {
      CAPTURE(name);
      REQUIRE(b.grads.at(name) == g);
      REQUIRE(c.grads.at(name) == g);
    }
    for (CpuAllocator* al : {&a1, &a2, &a3}) {
      REQUIRE(al->stats().current(MemCategory::activation) == 0);
    }
    REQUIRE(a3.stats().peak(MemCategory::activation) < a1.stats().peak(MemCategory::activation));
  }
}

TEST_CASE("Swin drop path is a function of the global sample index", "[model][swin][droppath]") {
  Arena arena;
  const auto weights = swin_random_weights(arena);
  const SwinBatch whole = swin_batch(arena, 4);
  // Samples 0, 2 and 1, 3: what ranks 0 and 1 of two read.
  SwinBatch halves[2];
  for (int r = 0; r < 2; ++r) {
    halves[r] = {arena.make({2, 3, 16, 16}, DType::f64), arena.make({2}, DType::i32)};
    for (int i = 0; i < 2; ++i) {
      const int64_t sample = r + 2 * i, n = 3 * 16 * 16;
      std::copy_n(whole.images.data<double>() + sample * n, n,
                  halves[r].images.data<double>() + i * n);
      halves[r].labels.data<int32_t>()[i] = whole.labels.data<int32_t>()[sample];
    }
  }
  CpuAllocator a1, a2;
  auto one = swin_build({}, a1, weights, arena);
  auto two = swin_build({}, a2, weights, arena);
  for (SwinModel* m : {one.get(), two.get()}) m->set_drop_path(0.6);

  one->set_sample_key(key(0, 1));
  one->params().zero_grads();
  const double loss = one->forward(whole.images, whole.labels);
  one->backward(0.25);
  const Weights grads = full_values(one->params(), true, arena);

  two->params().zero_grads();
  double split_loss = 0;
  for (int r = 0; r < 2; ++r) {
    two->set_sample_key(key(r, 2));
    split_loss += two->forward(halves[r].images, halves[r].labels);
    two->backward(0.25);
  }
  REQUIRE(split_loss == Approx(loss).epsilon(1e-12));
  for (const auto& [name, g] : grads) {
    CAPTURE(name);
    require_close(full_values(two->params(), true, arena).at(name), g, 1e-10);
  }
  // The draws depend on the step, and evaluation never drops.
  one->set_sample_key(key(0, 1, 2));
  REQUIRE(one->forward(whole.images, whole.labels) != loss);
  REQUIRE(one->forward(whole.images, whole.labels, false) != loss);
  // Some sample of the last block is dropped, some kept, at rate 0.6.
  const auto f = SwinBlock::drop_factors({true, 77, 1, 0, 1}, 3, 0, 0.6, 64);
  REQUIRE(std::count(f.begin(), f.end(), 0.0) > 10);
  REQUIRE(std::count(f.begin(), f.end(), 1.0 / 0.4) > 10);
  // A model without stochastic depth refuses a rate.
  REQUIRE_THROWS_WITH(make_model("resnet-tiny")->set_drop_path(0.1),
                      Catch::Contains("has no stochastic depth"));
}

TEST_CASE("Swin forward rejects images of the wrong shape", "[model][swin][errors]") {
  Arena arena;
  CpuAllocator alloc;
  SwinModel m(swin_micro());
  m.materialize(alloc, DType::f64);
  m.params().allocate_grads();
  Tensor labels = arena.make({2}, DType::i32);
  REQUIRE_THROWS_WITH(m.forward(arena.make({2, 3, 32, 32}), labels),
                      Catch::Contains("needs images [batch, 3, 16, 16]"));
  REQUIRE_THROWS_WITH(m.forward(arena.make({3, 3, 16, 16}), labels), Catch::Contains("labels"));
}

TEST_CASE("Swin relative position bias tables are not weight-decayed", "[model][swin][optim]") {
  CpuAllocator alloc;
  SwinModel m(swin_micro());
  const auto state = TrainingState::materialize(m, alloc, DType::f64);
  state->init_values(3);
  state->allocate_grads();
  Arena arena;
  const Weights before = full_values(m.params(), false, arena);
  AdamW opt(*state, AdamWSettings{0.9, 0.95, 1e-8, 0.5});
  opt.update(1, 0.1);  // zero gradients: only the decay moves values
  const Weights after = full_values(m.params(), false, arena);
  const std::string table = "layers.0.blocks.0.attn.relative_position_bias_table";
  REQUIRE(after.at(table) == before.at(table));
  REQUIRE(after.at("layers.0.blocks.0.attn.qkv.weight") !=
          before.at("layers.0.blocks.0.attn.qkv.weight"));
}

TEST_CASE("resuming a Swin from a checkpoint gives bit-identical losses",
          "[trainer][checkpoint][swin]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "resume";
  require_bit_identical_resume(micro_run(), dir);
  const checkpoint::SafetensorsFile weights(resolve_checkpoint(dir) / "model.safetensors");
  for (const char* name : {"patch_embed.proj.weight", "layers.1.downsample.reduction.weight",
                           "layers.0.blocks.1.attn.relative_position_bias_table", "head.fc.bias"})
    REQUIRE(weights.contains(name));
  // The run's drop path rate is in config.json, and a rate for a model
  // without stochastic depth is refused.
  TrainConfig bad;
  bad.model = "tiny";
  bad.drop_path = 0.1;
  bad.progress = false;
  REQUIRE_THROWS_WITH(Trainer(bad), Catch::Contains("has no stochastic depth"));
}
