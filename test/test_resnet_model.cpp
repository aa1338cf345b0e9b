// The CIFAR ResNets: parameter counts and components; whole-model gradients
// against finite differences (f64); channel groups compute the same network
// as whole blocks; forward masking (B-SDP, N-SDP) equals the full network
// with the dropped parts zeroed; backward masking trains only owned parts
// with the full network's gradients; split backward equals fused; BatchNorm
// running statistics and evaluation mode; every activation freed after
// backward.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kernels/ops.h"
#include "models/common/parameter_pieces.h"
#include "models/registry.h"
#include "models/resnet/resnet_model.h"
#include "model_test_util.h"
#include "test_support.h"

using namespace sdp;
using namespace sdp::resnet;
using sdp::testing::Arena;

namespace {

constexpr int64_t kClasses = 5;

ModelLayout neuron_layout(int groups = 2) {
  ModelLayout l;
  l.granularity = Granularity::neuron;
  l.channel_groups = groups;
  return l;
}

ResNetConfig tiny() { return ResNetConfig::named("resnet-tiny", kClasses); }

using sdp::testing::require_masked_grads;
using sdp::testing::require_part_grads;
using sdp::testing::Weights;

Weights full_values(const ResNetModel& m, bool grads, Arena& arena) {
  return sdp::testing::full_values(m.params(), grads, arena);
}

// Random weights of a whole-block tiny network (BatchNorm gains near 1).
Weights random_full_weights(Arena& arena) {
  CpuAllocator alloc;
  ResNetModel ref(tiny());
  ref.materialize(alloc, DType::f64);
  ParameterSet& p = ref.params();
  for (int id = 0; id < p.count(); ++id) {
    const ParamDecl& d = p.decl(id);
    const bool gain = d.name.find("bn") != std::string::npos || d.name.find("downsample.1") != std::string::npos;
    if (d.buffer) {
      Tensor b = p.param(id);
      ops::fill(b, d.name.find("running_var") != std::string::npos ? 1.0 : 0.0);
    } else if (gain && d.name.find("weight") != std::string::npos) {
      sdp::testing::fill_uniform(p.param(id), 100 + static_cast<uint64_t>(id), 0.5, 1.5);
    } else {
      sdp::testing::fill_uniform(p.param(id), 100 + static_cast<uint64_t>(id), -0.5, 0.5);
    }
  }
  return full_values(ref, false, arena);
}

struct Batch {
  Tensor images;  // [3, 3, 8, 8] f64
  Tensor labels;  // [3] i32
};
Batch make_batch(Arena& arena) {
  Batch b{arena.make({3, 3, 8, 8}, DType::f64), arena.make({3}, DType::i32)};
  sdp::testing::fill_uniform(b.images, 7, -1.0, 1.0);
  b.labels.data<int32_t>()[0] = 1;
  b.labels.data<int32_t>()[1] = 4;
  b.labels.data<int32_t>()[2] = 0;
  return b;
}

using sdp::testing::ComponentFilter;

std::unique_ptr<ResNetModel> build(const ModelLayout& layout, CpuAllocator& alloc,
                                   const Weights& weights, Arena& arena,
                                   const ComponentFilter& held = {},
                                   const ComponentFilter& trained = {}) {
  return sdp::testing::build_model<ResNetModel>(tiny(), layout, alloc, weights, arena, held,
                                                trained);
}

struct Outcome {
  double loss = 0;
  Weights grads;
};
Outcome run(ResNetModel& m, const Batch& b, Arena& arena, bool split = false) {
  m.params().zero_grads();
  Outcome o;
  o.loss = m.forward(b.images, b.labels);
  m.backward(1.0 / 3, split);
  if (split) m.backward_weight();
  o.grads = full_values(m, true, arena);
  return o;
}

void require_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  REQUIRE(sdp::testing::max_rel_error(a, b) < tol);
}

// Up to `samples` entries of a tensor, spread evenly.
std::vector<int64_t> sample_indices(int64_t numel, int64_t samples) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < numel; i += std::max<int64_t>(1, numel / samples)) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("CIFAR ResNets have the stated parameter counts and components", "[model][resnet]") {
  // The CIFAR ResNet-18 (3x3 stem, no max pooling) with 10 classes.
  REQUIRE(ResNetConfig::named("resnet18").parameter_count() == 11173962);
  REQUIRE(ResNetConfig::named("resnet18", 100).parameter_count() == 11220132);
  REQUIRE(ResNetConfig::named("wrn18").parameter_count() == 44662922);
  for (const std::string name : {"resnet-tiny", "resnet18", "wrn18"}) {
    CAPTURE(name);
    const ResNetModel m(ResNetConfig::named(name));
    REQUIRE(m.params().total_numel() == m.config().parameter_count());
    REQUIRE(m.components().size() == 1 + static_cast<size_t>(m.config().block_count()));
    int64_t covered = 0;
    for (const Component& c : m.components()) covered += c.numel;
    REQUIRE(covered == m.params().total_numel());
    const ResNetModel n(ResNetConfig::named(name), with_default_groups(name, neuron_layout(0)));
    REQUIRE(n.components().size() ==
            1 + static_cast<size_t>(n.config().block_count() * n.layout().channel_groups));
    REQUIRE(n.params().total_numel() == m.params().total_numel());
  }
  REQUIRE(with_default_groups("resnet18", neuron_layout(0)).channel_groups == 8);
  REQUIRE(with_default_groups("resnet-tiny", neuron_layout(0)).channel_groups == 4);
  REQUIRE_THROWS_WITH(ResNetModel(tiny(), neuron_layout(3)),
                      Catch::Contains("channel_groups = 3 must divide every basic block's width"));
  REQUIRE_THROWS_WITH(make_model("resnet19"), Catch::Contains("valid: tiny") &&
                                                  Catch::Contains("resnet18, wrn18"));
}

TEST_CASE("ResNet gradients of every parameter match finite differences (f64)",
          "[model][resnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator alloc;
    auto model = build(layout, alloc, weights, arena);
    ResNetModel& m = *model;
    m.forward(batch.images, batch.labels);
    m.backward(1.0 / 3);
    auto loss = [&] { return m.forward(batch.images, batch.labels) / 3; };
    ParameterSet& p = m.params();
    for (int id = 0; id < p.count(); ++id) {
      if (p.decl(id).buffer) continue;
      CAPTURE(p.decl(id).name);
      const auto analytic = sdp::testing::to_vector(p.grad(id));
      // The floor keeps an all-zero sample (a 3x3 tap that only sees padding
      // on layer4's 1x1 maps) from judging finite-difference roundoff (~1e-10).
      double scale = 1e-4, diff = 0;
      const auto at = sample_indices(p.param(id).numel(), 12);
      const auto numeric = sdp::testing::numeric_gradient_at(p.param(id), loss, at);
      for (size_t k = 0; k < at.size(); ++k) {
        diff = std::max(diff, std::abs(analytic[static_cast<size_t>(at[k])] - numeric[k]));
        scale = std::max(scale, std::abs(numeric[k]));
      }
      REQUIRE(diff / scale < 1e-5);
    }
  }
}

TEST_CASE("channel groups compute the same ResNet and gradients as whole blocks",
          "[model][resnet][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  CpuAllocator a1, a2;
  auto blocks = build({}, a1, weights, arena);
  auto groups = build(neuron_layout(), a2, weights, arena);
  const Outcome ref = run(*blocks, batch, arena), cut = run(*groups, batch, arena);
  REQUIRE(cut.loss == Approx(ref.loss).epsilon(1e-12));
  REQUIRE(cut.grads.size() == ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    CAPTURE(name);
    require_close(cut.grads.at(name), g, 1e-10);
  }
  // Running statistics moved the same way, piece by piece.
  Arena scratch;
  const auto rb = full_values(*blocks, false, scratch), rg = full_values(*groups, false, scratch);
  require_close(rg.at("layer1.0.bn1.running_var"), rb.at("layer1.0.bn1.running_var"), 1e-12);
  REQUIRE(rb.at("layer1.0.bn1.running_var") != weights.at("layer1.0.bn1.running_var"));
}

TEST_CASE("ResNet forward masking equals the full network with dropped parts zeroed",
          "[model][resnet][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);

  auto check_subnet = [&](ResNetModel& sub, ResNetModel& full) {
    const Outcome ref = run(full, batch, arena), got = run(sub, batch, arena);
    REQUIRE(got.loss == Approx(ref.loss).epsilon(1e-12));
    const ParameterSet& p = sub.params();
    require_part_grads(p, ref.grads, 1e-10);
    REQUIRE(p.materialized_numel() < full.params().materialized_numel());
  };

  SECTION("N-SDP: channel group 1 of blocks 0 and 2 dropped") {
    auto keep = [](const Component& c) {
      return c.kind != ComponentKind::channel_group || !(c.index == 1 && (c.block == 0 || c.block == 2));
    };
    CpuAllocator a1, a2;
    auto sub = build(neuron_layout(), a1, weights, arena, keep);
    // Dropping a group = zeroing its input channels of conv2.
    auto zeroed = weights;
    for (const auto& [name, out, c] : {std::tuple{"layer1.0.conv2.weight", 4, 4},
                                       std::tuple{"layer2.0.conv2.weight", 8, 8}}) {
      auto& w = zeroed.at(name);
      for (int o = 0; o < out; ++o)
        for (int i = c / 2; i < c; ++i)
          for (int k = 0; k < 9; ++k) w[static_cast<size_t>((o * c + i) * 9 + k)] = 0;
    }
    auto full = build({}, a2, zeroed, arena);
    check_subnet(*sub, *full);
  }

  SECTION("B-SDP: an identity block and a downsampling block dropped") {
    // Block 1 = layer1.1 (identity shortcut), block 2 = layer2.0 (projection).
    auto keep = [](const Component& c) { return c.block != 1 && c.block != 2; };
    CpuAllocator a1, a2;
    auto sub = build({}, a1, weights, arena, keep);
    REQUIRE_FALSE(sub->block_runs(1));
    REQUIRE(sub->block_runs(2));  // its shared shortcut still changes the shape
    // Dropping a block = a zero branch: bn2 with zero gain and shift.
    auto zeroed = weights;
    for (const char* name : {"layer1.1.bn2.weight", "layer1.1.bn2.bias", "layer2.0.bn2.weight",
                             "layer2.0.bn2.bias"})
      std::fill(zeroed.at(name).begin(), zeroed.at(name).end(), 0.0);
    auto full = build({}, a2, zeroed, arena);
    check_subnet(*sub, *full);
  }
}

TEST_CASE("ResNet backward masking trains only owned parts, with the full gradients",
          "[model][resnet][subnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator a1, a2;
    auto full = build(layout, a1, weights, arena);
    auto masked = build(layout, a2, weights, arena, {}, [](const Component& c) {
      return c.kind == ComponentKind::shared || (c.block + c.index) % 2 == 0;
    });
    const Outcome ref = run(*full, batch, arena), got = run(*masked, batch, arena);
    REQUIRE(got.loss == ref.loss);
    require_masked_grads(masked->params(), full->params());
  }
}

TEST_CASE("ResNet split backward equals fused backward and frees every activation",
          "[model][resnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    CpuAllocator a1, a2;
    auto fused = build(layout, a1, weights, arena);
    auto split = build(layout, a2, weights, arena);
    const Outcome a = run(*fused, batch, arena), b = run(*split, batch, arena, true);
    REQUIRE(a.loss == b.loss);
    for (const auto& [name, g] : a.grads) {
      CAPTURE(name);
      REQUIRE(b.grads.at(name) == g);
    }
    REQUIRE(a1.stats().current(MemCategory::activation) == 0);
    REQUIRE(a2.stats().current(MemCategory::activation) == 0);
    REQUIRE(a1.stats().current(MemCategory::workspace) == 0);
  }
}

TEST_CASE("BatchNorm running statistics follow training; evaluation uses them", "[model][resnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch batch = make_batch(arena);
  CpuAllocator alloc;
  auto model = build({}, alloc, weights, arena);
  const int mean_id = *model->params().find("bn1.running_mean");
  REQUIRE(sdp::testing::to_vector(model->params().param(mean_id)) == std::vector<double>(4, 0.0));
  const double eval_before = model->forward(batch.images, batch.labels, false);
  REQUIRE(sdp::testing::to_vector(model->params().param(mean_id)) == std::vector<double>(4, 0.0));
  const double train = model->forward(batch.images, batch.labels, true);
  model->backward(1.0 / 3);
  // One training forward moved the statistics by momentum 0.1 toward the batch's.
  const auto moved = sdp::testing::to_vector(model->params().param(mean_id));
  REQUIRE(moved != std::vector<double>(4, 0.0));
  const double eval_after = model->forward(batch.images, batch.labels, false);
  REQUIRE(eval_after != eval_before);
  REQUIRE(train != eval_after);
  REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  // Logits of an evaluation forward give the same loss.
  Tensor logits = arena.make({3, kClasses}, DType::f64);
  model->logits(batch.images, logits);
  Tensor losses = arena.make({3}, DType::f64), lse = arena.make({3}, DType::f64);
  ops::cross_entropy_forward(logits, batch.labels, losses, lse);
  REQUIRE(ops::sum(losses) == Approx(eval_after).epsilon(1e-12));
}

TEST_CASE("ResNet initial values do not depend on how the model is cut", "[model][resnet]") {
  Arena arena;
  CpuAllocator a1, a2;
  ResNetModel blocks(tiny());
  blocks.materialize(a1, DType::f32);
  blocks.params().init_values(42);
  ResNetModel groups(tiny(), neuron_layout(4));
  groups.materialize(a2, DType::f32);
  groups.params().init_values(42);
  const auto a = full_values(blocks, false, arena), b = full_values(groups, false, arena);
  REQUIRE(a.size() == b.size());
  for (const auto& [name, v] : a) {
    CAPTURE(name);
    REQUIRE(b.at(name) == v);
  }
  // Kaiming (fan out) for convolutions: std sqrt(2 / (9 * 16)) in layer4.
  const auto& w = a.at("layer4.0.conv2.weight");
  double sq = 0;
  for (double x : w) sq += x * x;
  REQUIRE(std::sqrt(sq / static_cast<double>(w.size())) ==
          Approx(std::sqrt(2.0 / 144)).epsilon(0.1));
}

TEST_CASE("ResNet forward rejects images of the wrong shape or dtype", "[model][resnet][errors]") {
  Arena arena;
  CpuAllocator alloc;
  ResNetModel m(tiny());
  m.materialize(alloc, DType::f64);
  m.params().allocate_grads();
  Tensor labels = arena.make({2}, DType::i32);
  REQUIRE_THROWS_WITH(m.forward(arena.make({2, 1, 8, 8}), labels),
                      Catch::Contains("images must be [batch, 3, height, width]"));
  REQUIRE_THROWS_WITH(m.forward(arena.make({2, 3, 8, 8}, DType::f32), labels),
                      Catch::Contains("images"));
  REQUIRE_THROWS_WITH(m.forward(arena.make({3, 3, 8, 8}), labels), Catch::Contains("labels"));
}

TEST_CASE("recalibrated BatchNorm statistics are the plain mean over the batches",
          "[model][resnet]") {
  Arena arena;
  const auto weights = random_full_weights(arena);
  const Batch a = make_batch(arena);
  Batch b = make_batch(arena);
  sdp::testing::fill_uniform(b.images, 99, -2.0, 1.0);
  // Statistics after recalibrating on the given batches.
  auto recalibrated = [&](std::vector<const Batch*> batches) {
    CpuAllocator alloc;
    auto m = build({}, alloc, weights, arena);
    size_t next = 0;
    m->recalibrate_statistics([&](Tensor& images, Tensor& labels) {
      if (next == batches.size()) return false;
      images = batches[next]->images;
      labels = batches[next]->labels;
      ++next;
      return true;
    });
    REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
    Arena scratch;
    Weights stats;
    for (const auto& [name, v] : full_values(*m, false, scratch))
      if (name.find("running_") != std::string::npos) stats[name] = v;
    return stats;
  };
  const Weights both = recalibrated({&a, &b}), only_a = recalibrated({&a}),
                only_b = recalibrated({&b});
  REQUIRE(both.size() == 2 * (1 + 5 + 5 + 3));  // stem, 5 blocks x (bn1, bn2), 3 shortcuts
  for (const auto& [name, v] : both) {
    CAPTURE(name);
    std::vector<double> mean(v.size());
    for (size_t i = 0; i < v.size(); ++i) mean[i] = 0.5 * (only_a.at(name)[i] + only_b.at(name)[i]);
    require_close(v, mean, 1e-12);
    REQUIRE(only_a.at(name) != only_b.at(name));
  }
}
