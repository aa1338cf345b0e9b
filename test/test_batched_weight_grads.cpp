// Batched deferred weight gradients (--deferred-weight-grads batched): the
// model's backward_weight_batched equals per-micro-batch backward_weight in
// f64 (whole model, and a neuron layout under backward masking where only
// some groups are trained), reports every parameter once per micro-batch,
// and the meta device predicts its bytes exactly; a one-stage executor
// running every split schedule (and a file schedule) batched gives the
// per-micro-batch gradients; the runs it batches are the maximal runs of
// adjacent W actions. The cool-down schedule's shape and the naive
// schedules are pinned here too. Multi-stage pipelines are compared in
// test/mpi/test_pipeline_training.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/pipeline/deferred_weight_grads.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/stage_executor.h"
#include "kernels/ops.h"
#include "models/registry.h"
#include "model_test_util.h"
#include "test_support.h"
#include "test_temp_dir.h"
#include "trunk_test_util.h"

using namespace sdp;
using sdp::testing::Arena;
using sdp::testing::Peaks;
using sdp::testing::peaks_of;
using sdp::testing::Weights;

namespace {

constexpr int kMicro = 3;
constexpr int64_t kBatch = 2, kSeq = 8;

// LLaMA mini, f64, on `alloc`; a neuron layout trains every other storage
// group (backward masking: packs only partly trained).
std::unique_ptr<Model> make_mini(Allocator& alloc, bool neuron) {
  ModelLayout layout;
  if (neuron) layout = {Granularity::neuron, 4, 2, 8, {}, {}};
  std::unique_ptr<Model> m = make_model("mini", layout);
  std::vector<bool> trained;
  if (neuron)
    for (int g = 0; g < m->params().group_count(); ++g) trained.push_back(g % 2 == 0);
  m->materialize(alloc, DType::f64, {}, trained);
  m->params().allocate_grads();
  m->params().init_values(7);
  m->params().zero_grads();
  return m;
}

struct Batches {
  std::vector<OwnedTensor> inputs, targets;  // [kMicro] of [B, T] i32
};

Batches make_batches(Allocator& alloc, int64_t vocab) {
  Batches b;
  const bool cpu = alloc.device() == Device::cpu;
  for (int k = 0; k < kMicro; ++k) {
    b.inputs.emplace_back(alloc, Shape{kBatch, kSeq}, DType::i32, MemCategory::workspace);
    b.targets.emplace_back(alloc, Shape{kBatch, kSeq}, DType::i32, MemCategory::workspace);
    if (cpu) {
      sdp::testing::fill_tokens(*b.inputs.back(), 100 + static_cast<uint64_t>(k),
                                static_cast<int32_t>(vocab));
      sdp::testing::fill_tokens(*b.targets.back(), 200 + static_cast<uint64_t>(k),
                                static_cast<int32_t>(vocab));
    }
  }
  return b;
}

struct Run {
  Weights grads;
  Peaks peaks;
  std::map<int, int> reports;  // parameter id -> times reported final
};

// Forwards 0 .. M-1, split backwards M-1 .. 0, then the weight gradients
// per micro-batch or batched (in the order given).
Run split_run(Allocator& alloc, bool neuron, bool batched, Arena& arena) {
  std::unique_ptr<Model> m = make_mini(alloc, neuron);
  const Batches b = make_batches(alloc, m->token_vocabulary());
  const double scale = 1.0 / (kMicro * kBatch * kSeq);
  Run r;
  const GradsReady ready = [&](std::span<const int> ids) {
    for (int id : ids) ++r.reports[id];
  };
  alloc.stats().reset_peaks();
  for (int k = 0; k < kMicro; ++k)
    m->forward(*b.inputs[static_cast<size_t>(k)], *b.targets[static_cast<size_t>(k)], true, k);
  for (int k = kMicro; k-- > 0;) m->backward(scale, true, ready, k);
  if (batched)
    m->backward_weight_batched({2, 0, 1}, ready);
  else
    for (int k = 0; k < kMicro; ++k) m->backward_weight(ready, k);
  REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
  r.peaks = peaks_of(alloc.stats());
  if (alloc.device() == Device::cpu) r.grads = sdp::testing::grads_of(*m, arena);
  return r;
}

}  // namespace

TEST_CASE("Batched deferred weight gradients equal per-micro-batch ones (f64)", "[batched-w]") {
  for (const bool neuron : {false, true}) {
    CAPTURE(neuron);
    Arena arena;
    CpuAllocator a, b;
    const Run per = split_run(a, neuron, false, arena);
    const Run batched = split_run(b, neuron, true, arena);
    REQUIRE_FALSE(per.grads.empty());
    // One GEMM over the rows concatenated sums them in another order.
    sdp::testing::require_same(batched.grads, per.grads, 1e-12);
    REQUIRE(batched.reports == per.reports);
    for (const auto& [id, times] : per.reports) REQUIRE(times % kMicro == 0);
  }
}

TEST_CASE("The meta device predicts batched weight gradients' bytes exactly",
          "[batched-w][meta]") {
  for (const bool neuron : {false, true}) {
    CAPTURE(neuron);
    Arena arena;
    CpuAllocator cpu;
    MetaAllocator meta(64);
    const Run on_cpu = split_run(cpu, neuron, true, arena);
    const Run on_meta = split_run(meta, neuron, true, arena);
    REQUIRE(on_cpu.peaks.total > 0);
    REQUIRE(on_cpu.peaks == on_meta.peaks);
  }
}

TEST_CASE("weight_grad_runs: maximal runs of adjacent W actions", "[batched-w]") {
  using pipeline::parse_action;
  std::vector<pipeline::Action> list;
  for (const char* a : {"F0", "I0", "W0", "F1", "I1", "W1", "W0", "SEND_B1", "W2", "W3"})
    list.push_back(parse_action(a));
  using Runs = std::vector<std::pair<size_t, size_t>>;
  REQUIRE(pipeline::weight_grad_runs(list) == Runs{{2, 3}, {5, 7}, {8, 10}});
  REQUIRE(pipeline::parse_deferred_weight_grads("batched") ==
          pipeline::DeferredWeightGrads::batched);
  REQUIRE_THROWS_WITH(pipeline::parse_deferred_weight_grads("all"),
                      Catch::Contains("valid: per-micro-batch, batched"));
}

TEST_CASE("A stage executor's batched W equals per-micro-batch W for every split schedule",
          "[batched-w][pipeline]") {
  // One stage (no communicator needed): each split schedule's lists at P =
  // 1 and a file schedule whose W runs have lengths 1, 2 and 1.
  const int M = 4;
  std::vector<std::pair<std::string, pipeline::Schedule>> schedules;
  for (const std::string& name : pipeline::schedule_names()) {
    pipeline::Schedule s = pipeline::make_schedule(name, 1, M);
    if (pipeline::has_weight_grads(s)) schedules.emplace_back(name, s);
  }
  REQUIRE(schedules.size() == 5);  // gpipe-2bp, 1f1b-2bp, zb-h1, the cool-down one, naive-2bp
  sdp::testing::TempDir dir;
  pipeline::save_schedule(
      pipeline::schedule_from_json(nlohmann::json::parse(
          R"({"microbatches": 4, "stages": [["F0","I0","F1","I1","W0","F2","I2","W1","W2","F3","I3","W3"]]})")),
      dir.file("s.json"));
  schedules.emplace_back("file", pipeline::load_valid_schedule(dir.file("s.json")));
  for (const auto& entry : schedules) {
    const std::string& name = entry.first;
    const pipeline::Schedule& schedule = entry.second;
    CAPTURE(name);
    Arena arena;
    auto run = [&](pipeline::DeferredWeightGrads mode, double& loss) {
      CpuAllocator alloc;
      std::unique_ptr<Model> m = make_mini(alloc, false);
      const Batches b = make_batches(alloc, m->token_vocabulary());
      std::vector<pipeline::MicroBatchData> data;
      for (int k = 0; k < M; ++k)
        data.push_back({*b.inputs[static_cast<size_t>(k % kMicro)],
                        *b.targets[static_cast<size_t>(k % kMicro)]});
      pipeline::validate(schedule);
      pipeline::StageExecutor executor(*m, schedule, 0, nullptr, mode);
      const pipeline::StageStepResult r = executor.run(data, 1.0 / (M * kBatch * kSeq));
      REQUIRE(r.timings.size() == schedule.stages[0].size());
      for (size_t i = 1; i < r.timings.size(); ++i)
        REQUIRE(r.timings[i].start >= r.timings[i - 1].end);
      REQUIRE(alloc.stats().current(MemCategory::activation) == 0);
      loss = r.loss_sum;
      return sdp::testing::grads_of(*m, arena);
    };
    double per_loss = 0, batched_loss = 0;
    const Weights per = run(pipeline::DeferredWeightGrads::per_micro_batch, per_loss);
    const Weights batched = run(pipeline::DeferredWeightGrads::batched, batched_loss);
    REQUIRE(batched_loss == per_loss);
    sdp::testing::require_same(batched, per, 1e-12);
  }
}

TEST_CASE("1f1b-2bp-cooldown: 1F1B's F and I, W in the cool-down's waits, the rest batched",
          "[pipeline]") {
  using pipeline::ActionKind;
  // P = 2, M = 4 at unit cost: stage 0 waits for I3's gradient once its
  // forwards are done, and runs W0 there.
  const pipeline::Schedule s = pipeline::make_schedule("1f1b-2bp-cooldown", 2, 4);
  REQUIRE(pipeline::to_json(s)["stages"] == nlohmann::json::parse(R"([
      ["F0","F1","I0","F2","I1","F3","I2","W0","I3","W1","W2","W3"],
      ["F0","I0","F1","I1","F2","I2","F3","I3","W0","W1","W2","W3"]])"));
  for (int P : {2, 3, 4, 8})
    for (int M : {1, 2, P, 2 * P, 3 * P + 1}) {
      CAPTURE(P, M);
      const pipeline::Schedule c = pipeline::make_schedule("1f1b-2bp-cooldown", P, M);
      const pipeline::Schedule base = pipeline::make_schedule("1f1b-2bp", P, M);
      REQUIRE_NOTHROW(pipeline::validate(pipeline::with_communication(c)));
      for (int st = 0; st < P; ++st) {
        // The same F and I in the same order; no W before the last F.
        std::vector<pipeline::Action> fi, base_fi;
        size_t last_f = 0, first_w = SIZE_MAX;
        const auto& list = c.stages[static_cast<size_t>(st)];
        for (size_t i = 0; i < list.size(); ++i) {
          if (list[i].kind == ActionKind::forward) last_f = i;
          if (list[i].kind == ActionKind::weight_grad) first_w = std::min(first_w, i);
          if (list[i].kind != ActionKind::weight_grad) fi.push_back(list[i]);
        }
        for (const auto& a : base.stages[static_cast<size_t>(st)])
          if (a.kind != ActionKind::weight_grad) base_fi.push_back(a);
        REQUIRE(fi == base_fi);
        REQUIRE(first_w > last_f);
      }
      // At unit cost the waits are filled: never slower than 1f1b-2bp,
      // and never more memory (a W runs no later than there).
      const pipeline::SimulationResult rc = pipeline::simulate(c), rb = pipeline::simulate(base);
      REQUIRE(rc.makespan <= rb.makespan);
      for (int st = 0; st < P; ++st)
        REQUIRE(rc.peak_memory_bytes[static_cast<size_t>(st)] <=
                rb.peak_memory_bytes[static_cast<size_t>(st)]);
    }
}

TEST_CASE("naive schedules run one micro-batch through the pipeline at a time", "[pipeline]") {
  // Unit costs F = 1, B = 2 (I = W = 1), no latency.
  for (int P : {1, 2, 4})
    for (int M : {1, 3, 8}) {
      CAPTURE(P, M);
      const pipeline::SimulationResult naive =
          pipeline::simulate(pipeline::make_schedule("naive", P, M));
      REQUIRE(naive.makespan == Approx(3.0 * P * M).epsilon(1e-12));
      // 2BP: each micro-batch's F and I pass every stage (2 P); the first
      // stage, last to finish the last I, then runs its M Ws.
      const pipeline::SimulationResult split =
          pipeline::simulate(pipeline::make_schedule("naive-2bp", P, M));
      REQUIRE(split.makespan == Approx(2.0 * P * M + M).epsilon(1e-12));
    }
}
