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
  const int replica = layout.mesh.replica_of(rank);
  std::string key = std::to_string(layout.mesh.stage_of(rank)) + ":";
  key.reserve(key.size() + static_cast<size_t>(layout.plan.components()));
  for (int k = 0; k < layout.plan.components(); ++k)
    key += layout.plan.owns(replica, k) ? '1' : '0';
  if (const auto it = roots.find(rank); it != roots.end()) key += ":roots:" + it->second;
  return key;
}

// A measured step as rank `rank`'s, for a rank of the same class. A
// pipeline record names the replica (the rank's mesh coordinate), the one
// figure in it that is the rank's own.
RankStep copied_step(const RankStep& measured, int rank, const RankMesh& mesh) {
  RankStep r = measured;
  r.rank = rank;
  r.measured_as = measured.rank;
  r.seconds = 0;
  if (measured.pipeline) {
    auto pipeline = std::make_shared<StageStats>(*measured.pipeline);
    pipeline->replica = mesh.replica_of(rank);
    r.pipeline = std::move(pipeline);
  }
  return r;
}

// FLOPs of one meta step of `config` (one rank).
double step_flops(const TrainConfig& config) {
  Trainer trainer(config);
  return trainer.train_step().flops;
}

}  // namespace

nlohmann::json RankStep::comm_json() const {
  nlohmann::json out = comm->to_json();
  if (copied()) out.erase("by_group");
  return out;
}

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

namespace {

// One meta step of `rank` (and its twin without recomputation).
RankStep run_step(const PlannerJob& job, const StrategyRequest& request, int rank,
                  const MeasureOptions& options, std::optional<SubnetLayout>* layout_out) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // One trainer at a time: each is a whole (meta) model, and ranks share
  // nothing, so holding them all would only cost host memory.
  const TrainConfig config = rank_config(job, request, rank);
  Trainer trainer(config);
  const StepResult step = trainer.train_step();
  RankStep r;
  r.rank = rank;
  r.measured_as = rank;
  r.memory = std::make_shared<const MemorySnapshot>(step.memory);
  r.comm = std::make_shared<const comm::CommStats>(step.comm);
  if (step.pipeline) r.pipeline = std::make_shared<const StageStats>(*step.pipeline);
  r.peak_bytes = static_cast<double>(step.memory.peak_total);
  r.sent_bytes = step.comm.total().sent_bytes;
  r.gathered_peak_bytes = static_cast<double>(step.memory.peak[MemCategory::gathered]);
  r.flops = step.flops;
  r.activation_peak_bytes = static_cast<double>(step.memory.peak[MemCategory::activation]);
  r.replica_bytes_sent = r.sent_bytes;
  if (step.pipeline) {
    r.stage = step.pipeline->stage;
    r.activation_bytes_sent = static_cast<double>(step.pipeline->activation_bytes_sent);
    r.gradient_bytes_sent = static_cast<double>(step.pipeline->gradient_bytes_sent);
    // The sends to the neighbours are counted among the step's sends too.
    r.replica_bytes_sent -= r.activation_bytes_sent + r.gradient_bytes_sent;
  }
  if (request.recompute.enabled() && !options.skip_recompute_twin) {
    // The twin without recomputation: the difference is what recomputing
    // costs (the checkpointed blocks' forwards), counted rather than modelled.
    TrainConfig twin = config;
    twin.parallel.activation_checkpointing = RecomputePolicy{}.name();
    r.recompute_flops = step.flops - step_flops(twin);
  }
  r.seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (layout_out) *layout_out = trainer.layout();
  return r;
}

// The estimate of every measured rank's step; the slowest sets the step.
void estimate_time(const PlannerJob& job, StrategySteps& out) {
  const StepTimeModel& model = job.time_model;
  if (!job.pipelined()) {
    for (const RankStep& r : out.ranks) {
      if (r.copied()) continue;
      const StepTimeEstimate e = estimate_step(model, r.flops, *r.comm, job.world);
      if (e.seconds > out.step_time.seconds) {
        out.step_time = e;
        out.step_time_rank = r.rank;
      }
    }
    return;
  }
  // The pipeline: each stage at its busiest rank, each boundary's message
  // from the stage before it, and the replica averaging that takes longest.
  const int P = static_cast<int>(job.base.parallel.pipeline_stages);
  const int M = static_cast<int>(job.base.grad_accum);
  std::vector<double> stage_flops(static_cast<size_t>(P), 0.0);
  std::vector<int64_t> boundary(static_cast<size_t>(P - 1), 0);
  const RankStep* slowest_replicas = nullptr;
  double slowest = -1;
  for (const RankStep& r : out.ranks) {
    if (r.copied()) continue;
    const auto s = static_cast<size_t>(r.stage);
    stage_flops[s] = std::max(stage_flops[s], r.flops);
    if (s + 1 < static_cast<size_t>(P))
      boundary[s] = std::max(boundary[s], static_cast<int64_t>(r.activation_bytes_sent / M));
    const double t = replica_comm_seconds(model, *r.comm, job.world);
    if (t > slowest) {
      slowest = t;
      slowest_replicas = &r;
    }
  }
  out.step_time = estimate_pipeline_step(model, stage_flops, boundary, job.base.parallel.schedule,
                                         M, *slowest_replicas->comm, job.world);
  out.step_time_rank = slowest_replicas->rank;
}

}  // namespace

StrategySteps measure_strategy(const PlannerJob& job, const StrategyRequest& request,
                               const MeasureOptions& options) {
  StrategySteps out;
  out.request = request;
  std::optional<SubnetLayout> layout;
  RankStep first = run_step(job, request, 0, options, &layout);
  const SubnetLayout& L = *layout;
  const ParallelSettings settings = rank_config(job, request, 0).parallel;
  out.description = L.describe();
  out.label = settings.composition_label();
  out.granularity = granularity_name(L.spec.granularity);
  out.masking = masking_name(L.spec.masking);
  out.shard = shard_level_name(settings.shard_level());
  out.activation_checkpointing = settings.recompute().name();
  out.components = L.plan.components();
  out.owners = out.owners_max = job.replicas();
  for (int k = 0; k < L.plan.components(); ++k) {
    const int owners = static_cast<int>(L.plan.owners(k).size());
    out.owners = k == 0 ? owners : std::min(out.owners, owners);
    out.owners_max = k == 0 ? owners : std::max(out.owners_max, owners);
  }
  out.held_fraction = L.plan.components() > 0 ? L.plan.held_fraction() : 1.0;
  out.coverage_warning = L.plan.coverage_warning(L.component_names);
  out.spectral_gap = L.plan.spectral_gap();
  out.plan = L.plan;
  std::vector<int> owned(static_cast<size_t>(L.plan.world()));  // [replica] components owned
  for (int d = 0; d < L.plan.world(); ++d)
    owned[static_cast<size_t>(d)] = static_cast<int>(L.plan.owned(d).size());
  out.owned_min = *std::min_element(owned.begin(), owned.end());
  out.owned_max = *std::max_element(owned.begin(), owned.end());

  // The class of every rank (the plan is the same on every rank: the
  // trainer checks its hash), and one representative of each.
  const std::unordered_map<int, std::string> roots = roots_by_rank(L);
  std::vector<int> representative(static_cast<size_t>(job.world));
  std::vector<int> measured_ranks;  // representatives other than rank 0
  {
    std::unordered_map<std::string, int> first_of_class;
    for (int rank = 0; rank < job.world; ++rank) {
      const int rep = job.every_rank
                          ? rank
                          : first_of_class.try_emplace(step_class(L, roots, rank), rank).first->second;
      representative[static_cast<size_t>(rank)] = rep;
      if (rep == rank && rank > 0) measured_ranks.push_back(rank);
    }
  }
  const bool budgeted = options.budget_bytes > 0;
  if (budgeted) {
    // Classes that own more hold more: a budget is tested on them first.
    const auto owned_by = [&](int rank) {
      return owned[static_cast<size_t>(L.mesh.replica_of(rank))];
    };
    std::stable_sort(measured_ranks.begin(), measured_ranks.end(),
                     [&](int a, int b) { return owned_by(a) > owned_by(b); });
  }
  std::unordered_map<int, RankStep> steps;
  steps.emplace(0, std::move(first));
  out.steps_run = 1;
  auto over = [&](const RankStep& r) {
    if (!budgeted || r.peak_bytes <= options.budget_bytes) return false;
    out.over_budget_rank = r.rank;
    out.over_budget_peak = r.peak_bytes;
    return true;
  };
  if (over(steps.at(0))) return out;
  for (int rank : measured_ranks) {
    RankStep r = run_step(job, request, rank, options, nullptr);
    ++out.steps_run;
    if (over(r)) return out;
    steps.emplace(rank, std::move(r));
  }

  out.ranks.reserve(static_cast<size_t>(job.world));
  for (int rank = 0; rank < job.world; ++rank) {
    const int rep = representative[static_cast<size_t>(rank)];
    const RankStep& measured = steps.at(rep);
    if (rep == rank) {
      out.ranks.push_back(measured);
      continue;
    }
    out.ranks.push_back(copied_step(measured, rank, L.mesh));
  }
  estimate_time(job, out);
  return out;
}

}  // namespace sdp::planner
