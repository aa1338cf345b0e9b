#include "apps/sdp-plan/measure.h"

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>

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

// Under backward masking, the storage groups each rank is the root of
// (StorageGroup::root), for the ranks that are one: a root broadcasts its
// groups' updated values, so its step differs from the rest of its plan
// row's. Forward masking sends nothing from roots in a step.
std::unordered_map<int, std::string> roots_by_rank(const SubnetLayout& layout) {
  std::unordered_map<int, std::string> out;
  if (layout.spec.masking != Masking::backward) return out;
  for (size_t g = 0; g < layout.groups.size(); ++g)
    out[layout.groups[g].root] += std::to_string(g) + ",";
  return out;
}

// The class of `rank` (see measure.h): its pipeline stage, the plan row of
// its replica (one character per component) and the groups it is root of.
std::string step_class(const SubnetLayout& layout,
                       const std::unordered_map<int, std::string>& roots, int rank) {
  const int replica = rank % layout.replicas;
  std::string key = std::to_string(rank / layout.replicas) + ":";
  key.reserve(key.size() + static_cast<size_t>(layout.plan.components()));
  for (int k = 0; k < layout.plan.components(); ++k)
    key += layout.plan.owns(replica, k) ? '1' : '0';
  if (const auto it = roots.find(rank); it != roots.end()) key += ":roots:" + it->second;
  return key;
}

// A measured step as rank `rank`'s, for a rank of the same class; `comm` is
// the measured comm without its "by_group". A pipeline record names the
// replica (rank mod D), the one figure in it that is the rank's own.
RankStep copied_step(const RankStep& measured, int rank, int replicas, const RankStep::Json& comm) {
  RankStep r = measured;
  r.rank = rank;
  r.measured_as = measured.rank;
  r.seconds = 0;
  r.comm = comm;
  if (!measured.pipeline->is_null()) {
    auto pipeline = std::make_shared<nlohmann::json>(*measured.pipeline);
    (*pipeline)["replica"] = rank % replicas;
    r.pipeline = std::move(pipeline);
  }
  return r;
}

RankStep::Json without_groups(const nlohmann::json& comm) {
  auto out = std::make_shared<nlohmann::json>(comm);
  out->erase("by_group");
  return out;
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
int StrategySteps::measured_ranks() const {
  int n = 0;
  for (const RankStep& r : ranks) n += r.measured_as == r.rank;
  return n;
}
int StrategySteps::meta_steps() const {
  return measured_ranks() * (request.recompute.enabled() ? 2 : 1);
}

StrategySteps measure_strategy(const PlannerJob& job, const StrategyRequest& request) {
  using clock = std::chrono::steady_clock;
  StrategySteps out;
  out.request = request;
  std::optional<SubnetLayout> layout;                // rank 0's, once measured
  std::unordered_map<int, std::string> roots;        // of that layout
  // class -> index in out.ranks of its measured rank
  std::unordered_map<std::string, size_t> measured;
  std::unordered_map<size_t, RankStep::Json> copied_comm;  // by that index
  for (int rank = 0; rank < job.world; ++rank) {
    if (layout && !job.every_rank) {
      const auto [it, added] = measured.try_emplace(step_class(*layout, roots, rank), out.ranks.size());
      if (!added) {
        const RankStep& first = out.ranks[it->second];
        auto& comm = copied_comm[it->second];
        if (!comm) comm = without_groups(*first.comm);
        out.ranks.push_back(copied_step(first, rank, layout->replicas, comm));
        continue;
      }
    }
    const auto start = clock::now();
    // One trainer at a time: each is a whole (meta) model, and ranks share
    // nothing, so holding them all would only cost host memory.
    const TrainConfig config = rank_config(job, request, rank);
    Trainer trainer(config);
    const StepResult step = trainer.train_step();
    RankStep r;
    r.rank = rank;
    r.measured_as = rank;
    r.memory = std::make_shared<const nlohmann::json>(step.memory);
    r.comm = std::make_shared<const nlohmann::json>(step.comm);
    r.pipeline = std::make_shared<const nlohmann::json>(step.pipeline);
    r.peak_bytes = step.memory["peak"]["total"].get<double>();
    r.sent_bytes = step.comm["sent_bytes"].get<double>();
    r.gathered_peak_bytes = step.memory["peak"]["by_category"]["gathered"].get<double>();
    r.flops = step.flops;
    r.activation_peak_bytes = step.memory["peak"]["by_category"]["activation"].get<double>();
    r.replica_bytes_sent = r.sent_bytes;
    if (!step.pipeline.is_null()) {
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
    layout = L;
    roots = roots_by_rank(L);
    measured.emplace(step_class(L, roots, 0), 0);
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
