// ResNet through the shared trunk loop: several micro-batches in flight give
// the gradients of each in turn; activation checkpointing gives the same
// gradients and the same BatchNorm running statistics as keeping everything
// (the recomputation normalizes with the same batch statistics and does not
// move the running ones again), counts exactly the recomputed blocks'
// forward FLOPs again and lowers the activation peak, with the meta device
// predicting the CPU's bytes exactly; the parameter hooks come in the
// documented order and every parameter read happens inside its window.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/flop_count.h"
#include "kernels/ops.h"
#include "models/resnet/resnet_model.h"
#include "model_test_util.h"
#include "test_support.h"
#include "trunk_test_util.h"

using namespace sdp;
using namespace sdp::resnet;
using sdp::testing::Arena;
using sdp::testing::ComponentFilter;
using sdp::testing::HookCall;
using sdp::testing::Peaks;
using sdp::testing::peaks_of;
using sdp::testing::require_recompute_peaks;
using sdp::testing::Weights;

namespace {

constexpr int64_t kClasses = 5;

// resnet-tiny: blocks 0, 1 identity (layer1), 2, 3, 4 downsampling.
ResNetConfig tiny() { return ResNetConfig::named("resnet-tiny", kClasses); }

ModelLayout neuron_layout() {
  ModelLayout l;
  l.granularity = Granularity::neuron;
  l.channel_groups = 2;
  return l;
}

struct Batch {
  Tensor images;  // [3, 3, 8, 8] f64
  Tensor labels;  // [3] i32
};
Batch make_batch(Arena& arena, uint64_t seed) {
  Batch b{arena.make({3, 3, 8, 8}, DType::f64), arena.make({3}, DType::i32)};
  sdp::testing::fill_uniform(b.images, seed, -1.0, 1.0);
  sdp::testing::fill_tokens(b.labels, seed + 1, static_cast<int32_t>(kClasses));
  return b;
}

// Random full weights (BatchNorm gains near 1, running statistics at their
// initial values).
Weights random_weights(Arena& arena) {
  CpuAllocator alloc;
  ResNetModel ref(tiny());
  ref.materialize(alloc, DType::f64);
  ParameterSet& p = ref.params();
  for (int id = 0; id < p.count(); ++id) {
    const ParamDecl& d = p.decl(id);
    const bool gain = d.name.find("bn") != std::string::npos ||
                      d.name.find("downsample.1") != std::string::npos;
    if (d.buffer) {
      Tensor t = p.param(id);
      ops::fill(t, d.name.find("running_var") != std::string::npos ? 1.0 : 0.0);
    } else if (gain && d.name.find("weight") != std::string::npos) {
      sdp::testing::fill_uniform(p.param(id), 300 + static_cast<uint64_t>(id), 0.5, 1.5);
    } else {
      sdp::testing::fill_uniform(p.param(id), 300 + static_cast<uint64_t>(id), -0.5, 0.5);
    }
  }
  return sdp::testing::full_values(p, false, arena);
}

std::unique_ptr<ResNetModel> build(const ModelLayout& layout, CpuAllocator& alloc,
                                   const Weights& weights, Arena& arena,
                                   const ComponentFilter& held = {},
                                   const ComponentFilter& trained = {}) {
  return sdp::testing::build_model<ResNetModel>(tiny(), layout, alloc, weights, arena, held,
                                                trained);
}

struct Step {
  double loss = 0;
  Weights grads;
  Weights values;  // parameters and running statistics after the step
};
Step step(ResNetModel& m, const Batch& b, Arena& arena, bool split = false) {
  m.params().zero_grads();
  Step s;
  s.loss = m.forward(b.images, b.labels);
  m.backward(1.0 / 3, split);
  if (split) m.backward_weight();
  s.grads = sdp::testing::grads_of(m, arena);
  s.values = sdp::testing::full_values(m.params(), false, arena);
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
      {"B-SDP: identity block 1 and downsampling block 3 dropped", ModelLayout{},
       [](const Component& c) { return c.block != 1 && c.block != 3; }},
      {"N-SDP: channel group 1 of blocks 0 and 2 dropped", neuron_layout(),
       [](const Component& c) {
         return c.kind != ComponentKind::channel_group ||
                !(c.index == 1 && (c.block == 0 || c.block == 2));
       }},
  };
}

// The running statistics (buffers) of a model's values.
Weights buffers_of(const ResNetModel& m, const Weights& values) {
  Weights out;
  for (const auto& [name, v] : values)
    if (name.find("running_") != std::string::npos) out[name] = v;
  (void)m;
  return out;
}

}  // namespace

TEST_CASE("ResNet micro-batches in flight give the gradients of each in turn (f64)",
          "[model][resnet][trunk]") {
  Arena arena;
  const Weights weights = random_weights(arena);
  const Batch a = make_batch(arena, 3), b = make_batch(arena, 9);
  for (const Cut& cut : cuts())
    for (const char* policy : {"none", "block"})
      for (const bool split : {false, true}) {
        CAPTURE(cut.name, policy, split);
        CpuAllocator a1, a2;
        auto one = build(cut.layout, a1, weights, arena, cut.held);
        auto two = build(cut.layout, a2, weights, arena, cut.held);
        for (ResNetModel* m : {one.get(), two.get()})
          m->set_recompute(RecomputePolicy::parse(policy, "test"));
        // In turn: a, then b.
        one->params().zero_grads();
        const double la = one->forward(a.images, a.labels);
        one->backward(1.0 / 3);
        const double lb = one->forward(b.images, b.labels);
        one->backward(1.0 / 3);
        // Both forwards first (the running statistics move in the same
        // order), then the backwards in the other order.
        two->params().zero_grads();
        REQUIRE(two->forward(a.images, a.labels, true, 0) == la);
        REQUIRE(two->forward(b.images, b.labels, true, 1) == lb);
        REQUIRE(two->micro_batches_in_flight() == 2);
        two->backward(1.0 / 3, split, {}, 1);
        two->backward(1.0 / 3, split, {}, 0);
        if (split) {
          two->backward_weight({}, 0);
          two->backward_weight({}, 1);
        }
        REQUIRE(two->micro_batches_in_flight() == 0);
        sdp::testing::require_same(sdp::testing::grads_of(*two, arena),
                                   sdp::testing::grads_of(*one, arena), 1e-12);
        REQUIRE(a2.stats().current(MemCategory::activation) == 0);
      }
}

TEST_CASE("ResNet gradients and running statistics with checkpointing equal those without (f64)",
          "[model][resnet][trunk][recompute]") {
  Arena arena;
  const Weights weights = random_weights(arena);
  const Batch batch = make_batch(arena, 5);
  for (const Cut& cut : cuts()) {
    CAPTURE(cut.name);
    CpuAllocator a0;
    auto ref_model = build(cut.layout, a0, weights, arena, cut.held);
    const Step ref = step(*ref_model, batch, arena);
    for (const char* policy : {"block", "every:2"})
      for (const bool split : {false, true}) {
        CAPTURE(policy, split);
        CpuAllocator alloc;
        auto m = build(cut.layout, alloc, weights, arena, cut.held);
        m->set_recompute(RecomputePolicy::parse(policy, "test"));
        const Step got = step(*m, batch, arena, split);
        REQUIRE(got.loss == ref.loss);
        sdp::testing::require_same(got.grads, ref.grads, 1e-12);
        // Values include the running statistics: moved once, as without.
        sdp::testing::require_same(got.values, ref.values, 1e-12);
        REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
      }
  }
}

TEST_CASE("ResNet running statistics would differ if the recomputation moved them again",
          "[model][resnet][trunk][recompute]") {
  // The counter-test of the one above: a second training forward of the
  // same batch (what a recomputation in training mode would do to the
  // statistics) moves them again, so the equality above can fail.
  Arena arena;
  const Weights weights = random_weights(arena);
  const Batch batch = make_batch(arena, 5);
  CpuAllocator a0, a1;
  auto once = build({}, a0, weights, arena), twice = build({}, a1, weights, arena);
  once->forward(batch.images, batch.labels);
  once->backward(1.0 / 3);
  twice->forward(batch.images, batch.labels);
  twice->forward(batch.images, batch.labels);
  twice->backward(1.0 / 3);
  const Weights initial = buffers_of(*once, weights);
  const Weights moved_once = buffers_of(*once, sdp::testing::full_values(once->params(), false, arena));
  const Weights moved_twice =
      buffers_of(*twice, sdp::testing::full_values(twice->params(), false, arena));
  REQUIRE(moved_once.size() == initial.size());
  int differ = 0;
  for (const auto& [name, v] : moved_once) {
    REQUIRE(v != initial.at(name));  // every statistic moved in one step
    differ += v != moved_twice.at(name);
  }
  REQUIRE(differ == static_cast<int>(moved_once.size()));
}

TEST_CASE("ResNet recomputation counts exactly the checkpointed blocks' forward FLOPs again",
          "[model][resnet][trunk][recompute][flops]") {
  Arena arena;
  const Weights weights = random_weights(arena);
  const Batch batch = make_batch(arena, 5);
  CpuAllocator alloc;
  auto m = build({}, alloc, weights, arena);
  std::map<int, double> site_forward;
  double plain = 0;
  {
    sdp::testing::SiteFlops sites(*m);
    ops::reset_flop_count();
    m->forward(batch.images, batch.labels);
    m->backward(1.0 / 3);
    plain = ops::flops_counted();
    site_forward = sites.forward;
  }
  REQUIRE(site_forward.size() == static_cast<size_t>(m->site_count()));
  for (const auto& [policy, blocks] :
       std::vector<std::pair<const char*, std::vector<int>>>{{"block", {0, 1, 2, 3, 4}},
                                                             {"every:2", {0, 2, 4}}}) {
    CAPTURE(policy);
    double again = 0;
    for (int b : blocks) again += site_forward.at(b + 1);
    REQUIRE(again > 0);
    m->set_recompute(RecomputePolicy::parse(policy, "test"));
    ops::reset_flop_count();
    m->forward(batch.images, batch.labels);
    m->backward(1.0 / 3);
    REQUIRE(ops::flops_counted() - plain == Approx(again).epsilon(1e-12));
  }
}

namespace {

Peaks measure(Allocator& alloc, const ModelLayout& layout, const char* policy, bool split) {
  ResNetModel m(ResNetConfig::named("resnet-mini", kClasses), layout);
  m.materialize(alloc, DType::f64);
  m.params().allocate_grads();
  m.params().init_values(1);
  m.set_recompute(RecomputePolicy::parse(policy, "test"));
  OwnedTensor images(alloc, {4, 3, 8, 8}, DType::f64, MemCategory::workspace);  // [B, C, H, W]
  OwnedTensor labels(alloc, {4}, DType::i32, MemCategory::workspace);           // [B]
  if (alloc.device() == Device::cpu) {
    sdp::testing::fill_uniform(*images, 4, -1.0, 1.0);
    sdp::testing::fill_tokens(*labels, 5, static_cast<int32_t>(kClasses));
  }
  alloc.stats().reset_peaks();
  m.forward(*images, *labels);
  m.backward(1.0 / 4, split);
  if (split) m.backward_weight();
  REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  return peaks_of(alloc.stats());
}

}  // namespace

TEST_CASE("ResNet meta dry runs predict the CPU's peaks exactly, with and without recomputation",
          "[model][resnet][trunk][recompute][meta]") {
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()})
    for (const bool split : {false, true}) {
      CAPTURE(granularity_name(layout.granularity), split);
      require_recompute_peaks(
          [&](Allocator& alloc, const char* policy) { return measure(alloc, layout, policy, split); },
          split);
    }
}

TEST_CASE("ResNet sites list the parameters each part reads", "[model][resnet][trunk][hooks]") {
  for (const ModelLayout& layout : {ModelLayout{}, neuron_layout()}) {
    CAPTURE(granularity_name(layout.granularity));
    ResNetModel m(tiny(), layout);
    const ParameterSet& p = m.params();
    REQUIRE(m.site_count() == 5 + 2);
    std::map<int, int> sites_of;
    for (int s = 0; s < m.site_count(); ++s)
      for (int id : m.site_params(s)) {
        REQUIRE_FALSE(p.decl(id).buffer);
        ++sites_of[id];
      }
    int params = 0;
    for (int id = 0; id < p.count(); ++id) params += !p.decl(id).buffer;
    REQUIRE(sites_of.size() == static_cast<size_t>(params));  // every parameter, once
    for (const auto& [id, n] : sites_of) REQUIRE(n == 1);
    // Block 2 (site 3) reads its downsampling shortcut, a shared component.
    const auto block2 = m.site_params(3);
    for (const char* name : {"layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
                             "layer2.0.downsample.1.bias", "layer2.0.bn2.weight"})
      REQUIRE(std::count(block2.begin(), block2.end(), *p.find(name)) == 1);
    REQUIRE(m.site_params(0).size() == 3);  // conv1, bn1 weight and bias
    REQUIRE_THROWS_WITH(m.site_params(-1), Catch::Contains("valid: 0 .. 6"));
  }
}

TEST_CASE("ResNet parameter hooks come in order and every read is inside its window",
          "[model][resnet][trunk][hooks]") {
  Arena arena;
  const Weights weights = random_weights(arena);
  const Batch batch = make_batch(arena, 5);
  const auto f = ParamPass::forward, b = ParamPass::backward;
  // B-SDP without the identity block 1 (site 2, skipped: no calls) and the
  // downsampling block 3 (site 4, still run through its shared shortcut).
  auto held = [](const Component& c) { return c.block != 1 && c.block != 3; };
  for (const char* policy : {"none", "block", "every:2"})
    for (const bool split : {false, true}) {
      CAPTURE(policy, split);
      CpuAllocator a0, a1;
      auto ref_model = build({}, a0, weights, arena, held);
      const Step ref = step(*ref_model, batch, arena);
      auto m = build({}, a1, weights, arena, held);
      m->set_recompute(RecomputePolicy::parse(policy, "test"));
      Step got;
      std::vector<HookCall> calls;
      {
        sdp::testing::ParamWindows windows(*m);
        got = step(*m, batch, arena, split);
        REQUIRE(windows.none_open());
        calls = windows.calls;
      }
      REQUIRE(got.loss == ref.loss);
      sdp::testing::require_same(got.grads, ref.grads, 1e-12);
      std::vector<HookCall> expected;
      for (int s : {0, 1, 3, 4, 5, 6}) {
        expected.push_back({s, f, true});
        expected.push_back({s, f, false});
      }
      for (int s : {6, 5, 4, 3, 1, 0}) {  // a trained stem reads bn1.weight in backward
        expected.push_back({s, b, true});
        expected.push_back({s, b, false});
      }
      CAPTURE(sdp::testing::describe(calls));
      REQUIRE(calls == expected);
    }

  // Evaluation and logits() make the forward calls only; an untrained stem
  // gets no backward calls.
  CpuAllocator alloc;
  auto m = build({}, alloc, weights, arena, held,
                 [](const Component& c) {
                   return c.kind != ComponentKind::shared && c.block != 1 && c.block != 3;
                 });
  std::vector<HookCall> eval_calls, logits_calls, backward_calls;
  Tensor logits = arena.make({3, kClasses}, DType::f64);
  {
    sdp::testing::ParamWindows windows(*m);
    m->forward(batch.images, batch.labels, false);
    eval_calls = windows.calls;
    windows.calls.clear();
    m->logits(batch.images, logits);
    logits_calls = windows.calls;
    windows.calls.clear();
    m->forward(batch.images, batch.labels);
    windows.calls.clear();
    m->backward(1.0 / 3);
    backward_calls = windows.calls;
  }
  std::vector<HookCall> forward_only, backward_only;
  for (int s : {0, 1, 3, 4, 5, 6}) {
    forward_only.push_back({s, f, true});
    forward_only.push_back({s, f, false});
  }
  for (int s : {6, 5, 4, 3, 1}) {
    backward_only.push_back({s, b, true});
    backward_only.push_back({s, b, false});
  }
  REQUIRE(eval_calls == forward_only);
  REQUIRE(logits_calls == forward_only);
  REQUIRE(backward_calls == backward_only);
  for (double v : sdp::testing::to_vector(logits)) REQUIRE(std::isfinite(v));
}

TEST_CASE("ResNet recomputation is bit-identical in f32", "[model][resnet][trunk][recompute]") {
  // The same ops on the same inputs: gradients and running statistics are
  // not merely close.
  Arena arena;
  Tensor images = arena.make({3, 3, 8, 8}, DType::f32);
  sdp::testing::fill_uniform(images, 7, -1.0, 1.0);
  Tensor labels = arena.make({3}, DType::i32);
  sdp::testing::fill_tokens(labels, 8, static_cast<int32_t>(kClasses));
  std::vector<std::vector<double>> state[2];
  for (int with = 0; with < 2; ++with) {
    CpuAllocator alloc;
    ResNetModel m(tiny(), neuron_layout());
    m.materialize(alloc, DType::f32);
    m.params().allocate_grads();
    m.params().init_values(4);
    if (with) m.set_recompute(RecomputePolicy::parse("block", "test"));
    m.forward(images, labels);
    m.backward(1.0 / 3);
    for (int id = 0; id < m.params().count(); ++id) {
      state[with].push_back(sdp::testing::to_vector(m.params().param(id)));
      if (!m.params().decl(id).buffer)
        state[with].push_back(sdp::testing::to_vector(m.params().grad(id)));
    }
  }
  REQUIRE(state[0] == state[1]);
}
