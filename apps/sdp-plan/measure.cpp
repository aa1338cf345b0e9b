#include "apps/sdp-plan/measure.h"

#include <chrono>

#include "engine/core/error.h"
#include "engine/train/trainer.h"

namespace sdp::planner {

Summary summarize(const std::vector<double>& v) {
  SDP_CHECK(!v.empty(), "summarize: no values");
  Summary s{v[0], 0, v[0], 0};
  double sum = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    s.min = std::min(s.min, v[i]);
    if (v[i] > s.max) {
      s.max = v[i];
      s.argmax = static_cast<int>(i);
    }
  }
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

namespace {

Summary over_ranks(const std::vector<RankStep>& ranks, double RankStep::*field) {
  std::vector<double> v;
  for (const RankStep& r : ranks) v.push_back(r.*field);
  return summarize(v);
}

// FLOPs of one meta step of `config` (one rank).
double step_flops(const TrainConfig& config) {
  Trainer trainer(config);
  return trainer.train_step().flops;
}

}  // namespace

Summary StrategySteps::peak() const { return over_ranks(ranks, &RankStep::peak_bytes); }
Summary StrategySteps::sent() const { return over_ranks(ranks, &RankStep::sent_bytes); }
Summary StrategySteps::gathered_peak() const {
  return over_ranks(ranks, &RankStep::gathered_peak_bytes);
}
Summary StrategySteps::flops() const { return over_ranks(ranks, &RankStep::flops); }
Summary StrategySteps::recompute_flops() const {
  return over_ranks(ranks, &RankStep::recompute_flops);
}
int StrategySteps::meta_steps() const {
  return static_cast<int>(ranks.size()) * (request.recompute.enabled() ? 2 : 1);
}

StrategySteps measure_strategy(const PlannerJob& job, const StrategyRequest& request) {
  using clock = std::chrono::steady_clock;
  StrategySteps out;
  out.request = request;
  for (int rank = 0; rank < job.world; ++rank) {
    const auto start = clock::now();
    // One trainer at a time: each is a whole (meta) model, and ranks share
    // nothing, so holding them all would only cost host memory.
    const TrainConfig config = rank_config(job, request, rank);
    Trainer trainer(config);
    const StepResult step = trainer.train_step();
    RankStep r;
    r.rank = rank;
    r.memory = step.memory;
    r.comm = step.comm;
    r.peak_bytes = step.memory["peak"]["total"].get<double>();
    r.sent_bytes = step.comm["sent_bytes"].get<double>();
    r.gathered_peak_bytes = step.memory["peak"]["by_category"]["gathered"].get<double>();
    r.flops = step.flops;
    r.activation_peak_bytes = step.memory["peak"]["by_category"]["activation"].get<double>();
    r.replica_bytes_sent = r.sent_bytes;
    if (!step.pipeline.is_null()) {
      r.pipeline = step.pipeline;
      r.stage = step.pipeline["stage"].get<int>();
      r.activation_bytes_sent = step.pipeline["activation_bytes_sent"].get<double>();
      r.gradient_bytes_sent = step.pipeline["gradient_bytes_sent"].get<double>();
      // The sends to the neighbours are counted among the step's sends too.
      r.replica_bytes_sent -= r.activation_bytes_sent + r.gradient_bytes_sent;
    }
    if (request.recompute.enabled()) {
      // The twin without recomputation: the difference is what recomputing
      // costs (the checkpointed blocks' forwards), counted rather than modelled.
      TrainConfig twin = config;
      twin.parallel.activation_checkpointing = RecomputePolicy{}.name();
      r.recompute_flops = step.flops - step_flops(twin);
    }
    r.seconds = std::chrono::duration<double>(clock::now() - start).count();
    out.ranks.push_back(std::move(r));
    if (rank > 0) continue;
    // The plan is the same on every rank (the trainer checks its hash).
    const SubnetLayout& L = trainer.layout();
    out.description = L.spec.describe();
    out.label = config.parallel.composition_label();
    out.granularity = granularity_name(L.spec.granularity);
    out.masking = masking_name(L.spec.masking);
    out.shard = shard_level_name(config.parallel.shard_level());
    out.activation_checkpointing = config.parallel.recompute().name();
    out.components = L.plan.components();
    out.owners = L.plan.components() > 0 ? static_cast<int>(L.plan.owners(0).size()) : job.replicas();
    out.spectral_gap = L.plan.spectral_gap();
  }
  return out;
}

}  // namespace sdp::planner
