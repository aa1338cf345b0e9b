// Pipeline stages of the LLaMA, ResNet and Swin models: a model cut into 2 or 3
// stages, one model object per stage holding only its stage's storage
// groups (split_shared layouts), chained forward_stage -> stage_output ->
// the next stage's received and back through backward_stage, with several
// micro-batches in flight in a 1F1B order, gives the whole model's losses,
// gradients and BatchNorm running statistics (f64, gradient accumulation
// over the same micro-batches); hooks and GradsReady reports cover the
// span's sites only; the meta device predicts a stage's bytes exactly; the
// split_shared component lists keep the unsplit layout's names and values;
// set_stage and the whole-model calls refuse what they cannot do; on the
// whole span the stage calls are forward() / backward() bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.h"
#include "models/llama/llama_model.h"
#include "models/resnet/resnet_model.h"
#include "models/swin/swin_model.h"
#include "model_test_util.h"
#include "test_support.h"
#include "trunk_test_util.h"

using namespace sdp;
using sdp::testing::Arena;
using sdp::testing::Peaks;
using sdp::testing::peaks_of;
using sdp::testing::Weights;

namespace {

constexpr int64_t kClasses = 5;

// What the stage tests need of a model family.
struct Family {
  std::string name;
  std::function<std::unique_ptr<Model>(const ModelLayout&)> make;
  ModelLayout neuron;                      // a neuron layout the model divides
  Shape input_shape, target_shape;         // one micro-batch
  DType input_dtype = DType::i32;
  std::function<void(const Tensor&, uint64_t)> fill_inputs, fill_targets;
  double loss_scale = 1;                   // 1 / targets of the whole batch
  std::vector<std::vector<int>> cuts;      // first blocks of stages 1, 2, ...
};

constexpr int kMicroBatches = 3;

Family llama_family(const std::string& name) {
  const llama::LlamaConfig config = llama::LlamaConfig::named(name);
  Family f;
  f.name = "LLaMA " + name;
  f.make = [config](const ModelLayout& l) { return std::make_unique<llama::LlamaModel>(config, l); };
  f.neuron = {Granularity::neuron, 4, 2, 8, {}, {}};
  f.input_shape = {2, 8};   // tokens [B, T]
  f.target_shape = {2, 8};  // next tokens [B, T]
  f.input_dtype = DType::i32;
  const auto vocab = static_cast<int32_t>(config.vocab);
  f.fill_inputs = [vocab](const Tensor& t, uint64_t seed) { sdp::testing::fill_tokens(t, seed, vocab); };
  f.fill_targets = f.fill_inputs;
  f.loss_scale = 1.0 / (kMicroBatches * 16);
  if (config.n_layers == 2)
    f.cuts = {{1}};
  else
    f.cuts = {{1}, {3}, {1, 2}, {1, 3}};
  return f;
}

// resnet-tiny: blocks 0, 1 identity (layer1), 2, 3, 4 downsampling.
Family resnet_family() {
  const resnet::ResNetConfig config = resnet::ResNetConfig::named("resnet-tiny", kClasses);
  Family f;
  f.name = "ResNet tiny";
  f.make = [config](const ModelLayout& l) { return std::make_unique<resnet::ResNetModel>(config, l); };
  f.neuron.granularity = Granularity::neuron;
  f.neuron.channel_groups = 2;
  f.input_shape = {3, 3, 8, 8};  // images [B, C, H, W]
  f.target_shape = {3};          // labels [B]
  f.input_dtype = DType::f64;
  f.fill_inputs = [](const Tensor& t, uint64_t seed) { sdp::testing::fill_uniform(t, seed, -1.0, 1.0); };
  f.fill_targets = [](const Tensor& t, uint64_t seed) {
    sdp::testing::fill_tokens(t, seed, static_cast<int32_t>(kClasses));
  };
  f.loss_scale = 1.0 / (kMicroBatches * 3);
  f.cuts = {{2}, {4}, {1, 3}, {2, 4}};
  return f;
}

// swin-micro: blocks 0, 1 (block 1 shifted) at 8x8, 2 (patch merging), 3 at 4x4.
Family swin_family() {
  const swin::SwinConfig config = swin::SwinConfig::named("swin-micro", kClasses);
  Family f;
  f.name = "Swin micro";
  f.make = [config](const ModelLayout& l) { return std::make_unique<swin::SwinModel>(config, l); };
  f.neuron.granularity = Granularity::neuron;
  f.neuron.head_groups = 2;
  f.neuron.ffn_groups = 2;
  f.input_shape = {3, 3, 16, 16};  // images [B, C, H, W]
  f.target_shape = {3};            // labels [B]
  f.input_dtype = DType::f64;
  f.fill_inputs = [](const Tensor& t, uint64_t seed) {
    sdp::testing::fill_uniform(t, seed, -1.0, 1.0);
  };
  f.fill_targets = [](const Tensor& t, uint64_t seed) {
    sdp::testing::fill_tokens(t, seed, static_cast<int32_t>(kClasses));
  };
  f.loss_scale = 1.0 / (kMicroBatches * 3);
  f.cuts = {{1}, {2}, {1, 2}, {2, 3}};
  return f;
}

std::vector<Family> families() {
  return {llama_family("tiny"), llama_family("mini"), resnet_family(), swin_family()};
}

struct MicroBatch {
  Tensor inputs, targets;
};

std::vector<MicroBatch> make_batches(const Family& f, Arena& arena) {
  std::vector<MicroBatch> out;
  for (int k = 0; k < kMicroBatches; ++k) {
    MicroBatch mb{arena.make(f.input_shape, f.input_dtype), arena.make(f.target_shape, DType::i32)};
    f.fill_inputs(mb.inputs, 40 + 2 * static_cast<uint64_t>(k));
    f.fill_targets(mb.targets, 41 + 2 * static_cast<uint64_t>(k));
    out.push_back(mb);
  }
  return out;
}

// Random full weights of the whole unsplit model (gains near 1, running
// statistics at their initial values).
Weights random_weights(const Family& f, Arena& arena) {
  CpuAllocator alloc;
  std::unique_ptr<Model> ref = f.make({});
  ref->materialize(alloc, DType::f64);
  ParameterSet& p = ref->params();
  for (int id = 0; id < p.count(); ++id) {
    const ParamDecl& d = p.decl(id);
    Tensor t = p.param(id);
    const uint64_t seed = 500 + static_cast<uint64_t>(id);
    if (d.buffer)
      ops::fill(t, d.name.find("running_var") != std::string::npos ? 1.0 : 0.0);
    else if (d.shape.ndim() == 1 && d.name.find("weight") != std::string::npos)
      sdp::testing::fill_uniform(t, seed, 0.5, 1.5);  // norm and BatchNorm gains
    else
      sdp::testing::fill_uniform(t, seed, -0.5, 0.5);
  }
  return sdp::testing::full_values(p, false, arena);
}

struct Result {
  std::vector<double> losses;  // per micro-batch
  Weights grads;
  Weights values;  // parameters and running statistics afterwards
};

// The whole model, micro-batch after micro-batch (gradient accumulation).
Result whole_run(const Family& f, const ModelLayout& layout, const Weights& weights,
                 const std::vector<MicroBatch>& mbs, Arena& arena) {
  CpuAllocator alloc;
  std::unique_ptr<Model> m = f.make(layout);
  m->materialize(alloc, DType::f64);
  m->params().allocate_grads();
  sdp::testing::load_full(m->params(), weights, arena);
  m->params().zero_grads();
  Result r;
  for (const MicroBatch& mb : mbs) {
    r.losses.push_back(m->forward(mb.inputs, mb.targets));
    m->backward(f.loss_scale);
  }
  r.grads = sdp::testing::grads_of(*m, arena);
  r.values = sdp::testing::full_values(m->params(), false, arena);
  return r;
}

// One stage's model; the allocator outlives it.
struct StageModel {
  std::unique_ptr<CpuAllocator> alloc = std::make_unique<CpuAllocator>();
  std::unique_ptr<Model> model;
  StageSpan span;
};

// A split_shared model holding the groups of the span's sites (every group
// when hold_all) with `weights` loaded, set to the span.
StageModel build_stage(const Family& f, ModelLayout layout, const StageSpan& span,
                       const Weights& weights, Arena& arena, const char* policy, bool hold_all) {
  layout.split_shared = true;
  StageModel s;
  s.span = span;
  s.model = f.make(layout);
  Model& m = *s.model;
  const int L = m.block_count();
  std::vector<bool> held;
  if (!hold_all)
    held = sdp::testing::groups_where(m.components(), m.params().group_count(),
                                      [&](const Component& c) { return span.contains_site(c.site, L); });
  m.materialize(*s.alloc, DType::f64, held);
  m.params().allocate_grads();
  sdp::testing::load_full(m.params(), weights, arena);
  m.params().zero_grads();
  m.set_stage(span);
  m.set_recompute(RecomputePolicy::parse(policy, "test"));
  return s;
}

// Spans of the stages that start at 0 and at each of `cuts`.
std::vector<StageSpan> spans_of(const std::vector<int>& cuts) {
  std::vector<StageSpan> spans;
  int first = 0;
  for (int c : cuts) {
    spans.push_back({first, c});
    first = c;
  }
  spans.push_back({first, -1});
  return spans;
}

enum class Step { F, B, W };
struct Action {
  Step step;
  int mb;
};

// 1F1B: stage s of S warms up with S - 1 - s forwards, then alternates a
// forward and a backward, then drains the backwards. With split weight
// gradients every W comes after the stage's last backward, so the weight
// gradients of every micro-batch are pending at once.
std::vector<Action> one_f_one_b(int s, int S, int M, bool split) {
  std::vector<Action> out;
  const int warm = std::min(S - 1 - s, M);
  for (int k = 0; k < warm; ++k) out.push_back({Step::F, k});
  for (int k = 0; k < M - warm; ++k) {
    out.push_back({Step::F, warm + k});
    out.push_back({Step::B, k});
  }
  for (int k = M - warm; k < M; ++k) out.push_back({Step::B, k});
  if (split)
    for (int k = 0; k < M; ++k) out.push_back({Step::W, k});
  return out;
}

// A copy of `t` on `alloc`, as a transfer between stages delivers it.
OwnedTensor transfer(const Tensor& t, Allocator& alloc) {
  OwnedTensor out(alloc, t.shape(), t.dtype(), MemCategory::activation);
  ops::copy(t, *out);
  return out;
}

bool same_shape(const Tensor& t, const Shape& shape) { return t.shape() == shape; }

// Runs the micro-batches through the stages (each action as soon as what it
// receives has arrived) and checks on the way that each stage's hooks and
// GradsReady reports cover its span only and that it keeps nothing at the
// end. Returns the losses and, merged over the stages, the gradients and
// values of the parameters each stage's span holds.
Result pipeline_run(const Family& f, const ModelLayout& layout, const std::vector<int>& cuts,
                    const Weights& weights, const std::vector<MicroBatch>& mbs, bool split,
                    const char* policy, bool hold_all, Arena& arena) {
  const std::vector<StageSpan> spans = spans_of(cuts);
  const int S = static_cast<int>(spans.size()), M = static_cast<int>(mbs.size());
  std::vector<StageModel> stages;
  for (const StageSpan& span : spans)
    stages.push_back(build_stage(f, layout, span, weights, arena, policy, hold_all));
  const int L = stages[0].model->block_count();

  // The parameters (and buffers) of each span's sites.
  std::vector<std::set<int>> span_ids(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s)
    for (const Component& c : stages[static_cast<size_t>(s)].model->components())
      if (spans[static_cast<size_t>(s)].contains_site(c.site, L))
        span_ids[static_cast<size_t>(s)].insert(c.params.begin(), c.params.end());

  std::vector<std::unique_ptr<sdp::testing::ParamWindows>> windows;
  std::vector<std::map<int, int>> reports(static_cast<size_t>(S));
  for (StageModel& st : stages)
    windows.push_back(std::make_unique<sdp::testing::ParamWindows>(*st.model));

  std::vector<std::vector<Action>> schedule;
  for (int s = 0; s < S; ++s) schedule.push_back(one_f_one_b(s, S, M, split));
  std::vector<size_t> next(static_cast<size_t>(S), 0);
  std::map<std::pair<int, int>, OwnedTensor> acts, grads;  // (receiving stage, micro-batch)
  Result r;
  r.losses.assign(static_cast<size_t>(M), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < S; ++s) {
      const auto su = static_cast<size_t>(s);
      if (next[su] == schedule[su].size()) continue;
      const Action a = schedule[su][next[su]];
      const bool first = s == 0, last = s == S - 1;
      if (a.step == Step::F && !first && !acts.count({s, a.mb})) continue;
      if (a.step == Step::B && !last && !grads.count({s, a.mb})) continue;
      ++next[su];
      progress = true;
      Model& m = *stages[su].model;
      const MicroBatch& mb = mbs[static_cast<size_t>(a.mb)];
      GradsReady ready = [&reports, su](std::span<const int> ids) {
        for (int id : ids) ++reports[su][id];
      };
      if (a.step == Step::F) {
        OwnedTensor received;
        if (!first) {
          received = std::move(acts.at({s, a.mb}));
          acts.erase({s, a.mb});
        }
        // A stage reads only what it needs: the others get empty tensors.
        const double loss = m.forward_stage(first ? mb.inputs : Tensor(),
                                            last ? mb.targets : Tensor(), std::move(received), a.mb);
        if (last) {
          r.losses[static_cast<size_t>(a.mb)] = loss;
        } else {
          REQUIRE(loss == 0);
          const Tensor& out = m.stage_output(a.mb);
          REQUIRE(same_shape(out, m.stage_input_shape(mb.inputs, spans[su + 1].first_block)));
          acts[{s + 1, a.mb}] = transfer(out, *stages[su + 1].alloc);
        }
      } else if (a.step == Step::B) {
        OwnedTensor output_grad;
        if (!last) {
          output_grad = std::move(grads.at({s, a.mb}));
          grads.erase({s, a.mb});
        }
        OwnedTensor dx = m.backward_stage(std::move(output_grad), f.loss_scale, split, ready, a.mb);
        if (first) {
          REQUIRE(!dx);
        } else {
          REQUIRE(dx);
          REQUIRE(same_shape(*dx, m.stage_input_shape(mbs[0].inputs, spans[su].first_block)));
          grads[{s - 1, a.mb}] = transfer(*dx, *stages[su - 1].alloc);
        }
      } else {
        m.backward_weight(ready, a.mb);
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    const auto su = static_cast<size_t>(s);
    CAPTURE(s);
    REQUIRE(next[su] == schedule[su].size());
    StageModel& st = stages[su];
    // Nothing kept: every context, received tensor and output freed.
    REQUIRE(st.alloc->stats().current(MemCategory::activation) == 0);
    // Hooks for the span's sites only, every one of them in forward.
    std::set<int> forward_sites;
    for (const sdp::testing::HookCall& c : windows[su]->calls) {
      REQUIRE(spans[su].contains_site(c.site, L));
      if (c.pass == ParamPass::forward) forward_sites.insert(c.site);
    }
    for (int site = 0; site < L + 2; ++site)
      REQUIRE(forward_sites.count(site) == (spans[su].contains_site(site, L) ? 1u : 0u));
    REQUIRE(windows[su]->none_open());
    // GradsReady: every trained parameter of the span once per micro-batch,
    // nothing else (held blocks outside the span included).
    const ParameterSet& p = st.model->params();
    for (int id = 0; id < p.count(); ++id) {
      CAPTURE(p.decl(id).name);
      const bool expected = span_ids[su].count(id) && p.is_trained(id) && !p.decl(id).buffer;
      REQUIRE(reports[su][id] == (expected ? M : 0));
    }
  }
  windows.clear();  // parameter values back

  for (int s = 0; s < S; ++s) {
    const auto su = static_cast<size_t>(s);
    const ParameterSet& p = stages[su].model->params();
    std::set<std::string> names;
    for (int id : span_ids[su]) names.insert(p.decl(id).full_name);
    const Weights g = sdp::testing::grads_of(*stages[su].model, arena);
    const Weights v = sdp::testing::full_values(p, false, arena);
    for (const auto& [name, values] : g)
      if (names.count(name)) REQUIRE(r.grads.emplace(name, values).second);
    for (const auto& [name, values] : v)
      if (names.count(name)) REQUIRE(r.values.emplace(name, values).second);
  }
  return r;
}

void require_same_losses(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    CAPTURE(k, a[k], b[k]);
    REQUIRE(std::isfinite(a[k]));
    REQUIRE(std::abs(a[k] - b[k]) <= 1e-12 * std::abs(b[k]));
  }
}

std::string describe_cuts(const std::vector<int>& cuts) {
  std::string out = "cut before block";
  for (int c : cuts) {
    out.push_back(' ');
    out.append(std::to_string(c));
  }
  return out;
}

}  // namespace

TEST_CASE("Pipeline stages chained in 1F1B give the whole model's losses and gradients (f64)",
          "[stages]") {
  for (const Family& f : families()) {
    Arena arena;
    const Weights weights = random_weights(f, arena);
    const std::vector<MicroBatch> mbs = make_batches(f, arena);
    for (const ModelLayout& layout : {ModelLayout{}, f.neuron}) {
      const Result whole = whole_run(f, layout, weights, mbs, arena);
      for (size_t c = 0; c < f.cuts.size(); ++c) {
        // Neuron layouts: one cut per stage count keeps the run short.
        if (layout.granularity == Granularity::neuron && c != 0 && c != 2) continue;
        for (const char* policy : {"none", "block"})
          for (const bool split : {false, true}) {
            const bool hold_all = c == 0 && !split;
            CAPTURE(f.name, granularity_name(layout.granularity), describe_cuts(f.cuts[c]), policy,
                    split, hold_all);
            const Result piped =
                pipeline_run(f, layout, f.cuts[c], weights, mbs, split, policy, hold_all, arena);
            require_same_losses(piped.losses, whole.losses);
            sdp::testing::require_same(piped.grads, whole.grads, 1e-12);
            // Parameters untouched; ResNet's running statistics moved as in
            // the whole model, one micro-batch = one BatchNorm batch.
            sdp::testing::require_same(piped.values, whole.values, 1e-12);
          }
      }
    }
  }
}

namespace {

// Peaks of two micro-batches through one stage (forward, forward, backward,
// backward), with the activation bytes after the forwards in `kept`.
Peaks stage_peaks(Allocator& alloc, const Family& f, const StageSpan& span, const char* policy,
                  bool split, size_t& kept) {
  ModelLayout layout;
  layout.split_shared = true;
  std::unique_ptr<Model> m = f.make(layout);
  const int L = m->block_count();
  m->materialize(alloc, DType::f64,
                 sdp::testing::groups_where(m->components(), m->params().group_count(),
                                            [&](const Component& c) {
                                              return span.contains_site(c.site, L);
                                            }));
  m->params().allocate_grads();
  m->params().init_values(1);
  m->set_stage(span);
  m->set_recompute(RecomputePolicy::parse(policy, "test"));
  const bool cpu = alloc.device() == Device::cpu;
  OwnedTensor inputs(alloc, f.input_shape, f.input_dtype, MemCategory::workspace);
  OwnedTensor targets(alloc, f.target_shape, DType::i32, MemCategory::workspace);
  if (cpu) {
    f.fill_inputs(*inputs, 1);
    f.fill_targets(*targets, 2);
  }
  alloc.stats().reset_peaks();
  for (int mb = 0; mb < 2; ++mb) {
    OwnedTensor received;
    if (!span.has_input_stage()) {
      received = OwnedTensor(alloc, m->stage_input_shape(*inputs, span.first_block), DType::f64,
                             MemCategory::activation);
      if (cpu) sdp::testing::fill_uniform(*received, 10 + static_cast<uint64_t>(mb));
    }
    const double loss = m->forward_stage(*inputs, *targets, std::move(received), mb);
    if (span.has_output_stage(L)) REQUIRE(std::isnan(loss) != cpu);
  }
  kept = alloc.stats().current(MemCategory::activation);
  for (int mb = 2; mb-- > 0;) {
    OwnedTensor output_grad;
    if (!span.has_output_stage(L)) {
      output_grad = OwnedTensor(alloc, m->stage_output(mb).shape(), DType::f64,
                                MemCategory::activation);
      if (cpu) sdp::testing::fill_uniform(*output_grad, 20 + static_cast<uint64_t>(mb));
    }
    OwnedTensor dx = m->backward_stage(std::move(output_grad), f.loss_scale, split, {}, mb);
    REQUIRE(static_cast<bool>(dx) == !span.has_input_stage());
  }
  if (split)
    for (int mb = 0; mb < 2; ++mb) m->backward_weight({}, mb);
  REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  return peaks_of(alloc.stats());
}

}  // namespace

// The stage calls on the whole span are forward() / backward(): the same
// losses, gradients, running statistics and allocator peaks, bit for bit,
// with every micro-batch in flight at once (forwards 0 .. M - 1, then
// backwards M - 1 .. 0) and with split weight gradients.
TEST_CASE("Whole-span stage calls equal forward and backward bit for bit", "[stages]") {
  for (const Family& f : families())
    for (const bool split : {false, true}) {
      CAPTURE(f.name, split);
      Arena arena;
      const Weights weights = random_weights(f, arena);
      const std::vector<MicroBatch> mbs = make_batches(f, arena);
      struct Run {
        std::vector<double> losses;
        Weights grads, values;
        Peaks peaks;
      };
      auto run = [&](bool stage_calls) {
        CpuAllocator alloc;
        std::unique_ptr<Model> m = f.make({});
        m->materialize(alloc, DType::f64);
        m->params().allocate_grads();
        sdp::testing::load_full(m->params(), weights, arena);
        m->params().zero_grads();
        Run r;
        for (int k = 0; k < kMicroBatches; ++k) {
          const MicroBatch& mb = mbs[static_cast<size_t>(k)];
          r.losses.push_back(stage_calls ? m->forward_stage(mb.inputs, mb.targets, OwnedTensor(), k)
                                         : m->forward(mb.inputs, mb.targets, true, k));
        }
        for (int k = kMicroBatches; k-- > 0;) {
          if (stage_calls)
            REQUIRE_FALSE(m->backward_stage(OwnedTensor(), f.loss_scale, split, {}, k));
          else
            m->backward(f.loss_scale, split, {}, k);
        }
        if (split)
          for (int k = 0; k < kMicroBatches; ++k) m->backward_weight({}, k);
        REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
        r.grads = sdp::testing::grads_of(*m, arena);
        r.values = sdp::testing::full_values(m->params(), false, arena);
        r.peaks = peaks_of(alloc.stats());
        return r;
      };
      const Run plain = run(false), staged = run(true);
      REQUIRE(staged.losses == plain.losses);
      sdp::testing::require_same(staged.grads, plain.grads, 0);
      sdp::testing::require_same(staged.values, plain.values, 0);
      REQUIRE(staged.peaks == plain.peaks);
    }
}

TEST_CASE("Meta dry runs of a pipeline stage predict the CPU's bytes exactly", "[stages][meta]") {
  for (const Family& f : {llama_family("mini"), resnet_family(), swin_family()})
    for (const StageSpan& span : {StageSpan{0, 2}, StageSpan{1, 3}, StageSpan{3, -1}})
      for (const char* policy : {"none", "block"})
        for (const bool split : {false, true}) {
          CAPTURE(f.name, span.first_block, span.end_block, policy, split);
          CpuAllocator cpu;
          MetaAllocator meta(64);
          size_t kept_cpu = 0, kept_meta = 0;
          const Peaks on_cpu = stage_peaks(cpu, f, span, policy, split, kept_cpu);
          const Peaks on_meta = stage_peaks(meta, f, span, policy, split, kept_meta);
          REQUIRE(kept_cpu > 0);
          REQUIRE(kept_cpu == kept_meta);
          REQUIRE(on_cpu == on_meta);
        }
}

TEST_CASE("LLaMA saved_activation_bytes counts what a stage keeps", "[stages]") {
  const llama::LlamaConfig config = llama::LlamaConfig::named("mini");
  for (const StageSpan& span : {StageSpan{0, 2}, StageSpan{1, 3}, StageSpan{3, -1}})
    for (const char* policy : {"none", "block"}) {
      CAPTURE(span.first_block, span.end_block, policy);
      CpuAllocator alloc;
      ModelLayout layout;
      layout.split_shared = true;
      llama::LlamaModel m(config, layout);
      const int L = m.block_count();
      m.materialize(alloc, DType::f64,
                    sdp::testing::groups_where(m.components(), m.params().group_count(),
                                               [&](const Component& c) {
                                                 return span.contains_site(c.site, L);
                                               }));
      m.params().allocate_grads();
      m.params().init_values(1);
      m.set_stage(span);
      m.set_recompute(RecomputePolicy::parse(policy, "test"));
      OwnedTensor tokens(alloc, {2, 8}, DType::i32, MemCategory::workspace);   // [B, T]
      OwnedTensor targets(alloc, {2, 8}, DType::i32, MemCategory::workspace);  // [B, T]
      sdp::testing::fill_tokens(*tokens, 1, 256);
      sdp::testing::fill_tokens(*targets, 2, 256);
      OwnedTensor received;
      if (!span.has_input_stage()) {
        received = OwnedTensor(alloc, {2, 8, config.dim}, DType::f64, MemCategory::activation);
        sdp::testing::fill_uniform(*received, 3);
      }
      m.forward_stage(*tokens, *targets, std::move(received), 0);
      REQUIRE(alloc.stats().current(MemCategory::activation) == m.saved_activation_bytes({2, 8}));
    }
}

TEST_CASE("split_shared layouts: one shared component per site, names and values unchanged",
          "[stages]") {
  auto names_of = [](const Model& m) {
    std::vector<std::string> out;
    for (const Component& c : m.components()) out.push_back(c.name);
    return out;
  };
  auto params_of = [](const Model& m, const std::string& component) {
    std::vector<std::string> out;
    for (const Component& c : m.components())
      if (c.name == component)
        for (int id : c.params) out.push_back(m.params().decl(id).name);
    return out;
  };
  ModelLayout split;
  split.split_shared = true;

  SECTION("LLaMA") {
    llama::LlamaConfig config = llama::LlamaConfig::named("tiny");  // 2 blocks
    ModelLayout neuron = llama_family("tiny").neuron;
    neuron.split_shared = true;
    llama::LlamaModel blocks(config, split), neurons(config, neuron);
    REQUIRE(names_of(blocks) ==
            std::vector<std::string>{"shared.input", "shared.output", "block.0", "block.1"});
    REQUIRE(params_of(blocks, "shared.input") == std::vector<std::string>{"model.embed_tokens.weight"});
    REQUIRE(params_of(blocks, "shared.output") ==
            std::vector<std::string>{"model.norm.weight", "lm_head.weight"});
    const std::vector<std::string> n = names_of(neurons);
    REQUIRE(std::vector<std::string>(n.begin(), n.begin() + 4) ==
            std::vector<std::string>{"shared.input", "shared.block.0", "shared.block.1",
                                     "shared.output"});
    REQUIRE(params_of(neurons, "shared.block.1") ==
            std::vector<std::string>{"model.layers.1.input_layernorm.weight",
                                     "model.layers.1.post_attention_layernorm.weight"});
    config.tie_embeddings = true;
    llama::LlamaModel tied(config, split);
    REQUIRE(params_of(tied, "shared.input") == std::vector<std::string>{"model.embed_tokens.weight"});
    REQUIRE(params_of(tied, "shared.output") == std::vector<std::string>{"model.norm.weight"});
    REQUIRE(tied.site_params(config.n_layers + 1).size() == 2);  // the norm and the tied head
  }
  SECTION("ResNet") {
    const resnet::ResNetConfig config = resnet::ResNetConfig::named("resnet-tiny", kClasses);
    ModelLayout neuron = resnet_family().neuron;
    neuron.split_shared = true;
    resnet::ResNetModel blocks(config, split), neurons(config, neuron);
    // Blocks 2, 3, 4 downsample: only they have shared parameters at block granularity.
    REQUIRE(names_of(blocks) ==
            std::vector<std::string>{"shared.input", "shared.block.2", "shared.block.3",
                                     "shared.block.4", "shared.output", "block.0", "block.1",
                                     "block.2", "block.3", "block.4"});
    REQUIRE(params_of(blocks, "shared.input") ==
            std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                                     "bn1.running_var"});
    REQUIRE(params_of(blocks, "shared.block.2") ==
            std::vector<std::string>{"layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
                                     "layer2.0.downsample.1.bias",
                                     "layer2.0.downsample.1.running_mean",
                                     "layer2.0.downsample.1.running_var"});
    REQUIRE(params_of(blocks, "shared.output") == std::vector<std::string>{"fc.weight", "fc.bias"});
    const std::vector<std::string> n = names_of(neurons);
    REQUIRE(std::vector<std::string>(n.begin(), n.begin() + 7) ==
            std::vector<std::string>{"shared.input", "shared.block.0", "shared.block.1",
                                     "shared.block.2", "shared.block.3", "shared.block.4",
                                     "shared.output"});
    REQUIRE(params_of(neurons, "shared.block.0") ==
            std::vector<std::string>{"layer1.0.bn2.weight", "layer1.0.bn2.bias",
                                     "layer1.0.bn2.running_mean", "layer1.0.bn2.running_var"});
    REQUIRE(params_of(neurons, "shared.block.3").size() == 9);  // shortcut conv + BN, bn2
  }
  SECTION("every family and granularity: sites, names and initial values") {
    for (const Family& f : families())
      for (ModelLayout layout : {ModelLayout{}, f.neuron}) {
        CAPTURE(f.name, granularity_name(layout.granularity));
        Arena arena;
        CpuAllocator a0, a1;
        std::unique_ptr<Model> whole = f.make(layout);
        layout.split_shared = true;
        std::unique_ptr<Model> cut = f.make(layout);
        const int L = cut->block_count();
        for (const Component& c : whole->components())
          REQUIRE(c.site == (c.kind == ComponentKind::shared ? -1 : 1 + c.block));
        size_t shared = 0;
        for (const Component& c : cut->components()) {
          CAPTURE(c.name);
          REQUIRE(c.site >= 0);
          REQUIRE(c.site <= L + 1);
          if (c.kind != ComponentKind::shared) {
            REQUIRE(shared > 0);  // every shared component comes first
            REQUIRE(c.site == 1 + c.block);
            shared = cut->components().size();  // no shared one after this
            continue;
          }
          REQUIRE(shared < cut->components().size());
          ++shared;
          // A split shared component holds parameters its site reads.
          const std::vector<int> reads = cut->site_params(c.site);
          for (int id : c.params)
            if (!cut->params().decl(id).buffer)
              REQUIRE(std::find(reads.begin(), reads.end(), id) != reads.end());
        }
        REQUIRE(cut->params().count() == whole->params().count());
        whole->materialize(a0, DType::f64);
        cut->materialize(a1, DType::f64);
        whole->params().init_values(7);
        cut->params().init_values(7);
        sdp::testing::require_same(sdp::testing::full_values(cut->params(), false, arena),
                                   sdp::testing::full_values(whole->params(), false, arena), 0);
      }
  }
}

TEST_CASE("set_stage and the whole-model calls refuse what a stage cannot do", "[stages]") {
  ModelLayout split;
  split.split_shared = true;
  for (const Family& f : {llama_family("mini"), resnet_family(), swin_family()}) {
    CAPTURE(f.name);
    CpuAllocator alloc;
    std::unique_ptr<Model> m = f.make(split);
    m->materialize(alloc, DType::f64);
    m->params().allocate_grads();
    m->params().init_values(1);
    const int L = m->block_count();
    for (const StageSpan& bad : {StageSpan{0, L + 1}, StageSpan{L, -1}, StageSpan{2, 2},
                                 StageSpan{-1, 2}, StageSpan{3, 1}})
      REQUIRE_THROWS_WITH(m->set_stage(bad), Catch::Contains("are not a stage of model"));
    Arena arena;
    const MicroBatch mb = make_batches(f, arena)[0];
    // Micro-batches in flight: the stage cannot change under them.
    m->forward(mb.inputs, mb.targets, true, 0);
    REQUIRE_THROWS_WITH(m->set_stage({0, 2}), Catch::Contains("between forward and backward"));
    m->backward(f.loss_scale, false, {}, 0);
    m->set_stage({0, 2});
    REQUIRE(m->stage().end(L) == 2);
    REQUIRE_THROWS_WITH(m->forward(mb.inputs, mb.targets, false, 0),
                        Catch::Contains("evaluation of a partial stage is not supported"));
    REQUIRE_THROWS_WITH(m->forward(mb.inputs, mb.targets, true, 0),
                        Catch::Contains("needs the whole model"));
    REQUIRE_THROWS_WITH(m->backward(f.loss_scale, false, {}, 0),
                        Catch::Contains("needs the whole model"));
    REQUIRE_THROWS_WITH(m->stage_input_shape(mb.inputs, 0), Catch::Contains("does not start a later stage"));
    // A later stage needs what the previous one sends.
    m->set_stage({2, -1});
    REQUIRE_THROWS_WITH(m->forward_stage(Tensor(), mb.targets, OwnedTensor(), 0),
                        Catch::Contains("needs the previous stage's output"));
    REQUIRE_THROWS_WITH(m->stage_output(0), Catch::Contains("hands nothing on"));
    // Back to the whole model: forward and backward work as before.
    m->set_stage({});
    m->forward(mb.inputs, mb.targets, false, 0);
    m->forward(mb.inputs, mb.targets, true, 0);
    m->backward(f.loss_scale, false, {}, 0);
    REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  }
  // A tied embedding is read by the input and the output stage.
  llama::LlamaConfig config = llama::LlamaConfig::named("tiny");
  config.tie_embeddings = true;
  CpuAllocator alloc;
  llama::LlamaModel tied(config, split);
  tied.materialize(alloc, DType::f64);
  REQUIRE_THROWS_WITH(tied.set_stage({0, 1}), Catch::Contains("ties its embedding"));
  REQUIRE_THROWS_WITH(tied.set_stage({1, -1}), Catch::Contains("ties its embedding"));
  tied.set_stage({0, -1});
}
