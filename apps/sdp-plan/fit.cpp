#include "apps/sdp-plan/fit.h"

#include "apps/sdp-plan/number_text.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/core/error.h"
#include "engine/parallel/strategy.h"
#include "engine/parallel/strategy_table.h"
#include "models/registry.h"

namespace sdp::planner {

namespace {

// One (strategy, shard, recompute, stages) combination of the search.
struct Combination {
  std::string strategy;
  std::optional<ShardLevel> shard;
  bool recompute = false;
  int stages = 1;
};

std::vector<Combination> combinations(const PlannerJob& job, int blocks) {
  const std::vector<std::optional<ShardLevel>> shards = {
      std::nullopt, ShardLevel::optimizer, ShardLevel::grad, ShardLevel::full};
  std::vector<Combination> out;
  for (int P = 1; P <= blocks && P <= job.world; P *= 2) {
    if (job.world % P != 0) continue;
    // One replica per stage has nothing to shard over: every level is the
    // unsharded job.
    const bool one_replica = job.world / P == 1;
    for (const char* strategy : {"ddp", "b-sdp", "n-sdp", "bb-sdp", "nb-sdp"})
      for (const auto& shard : shards)
        for (bool ac : {false, true})
          if (!one_replica || !shard) out.push_back({strategy, shard, ac, P});
  }
  return out;
}

// In --strategies syntax: "b-sdp+fsdp+ac", "n-sdp+zero2"; " x PP2" for stages.
std::string describe(const Combination& c) {
  std::string s = c.strategy;
  if (c.shard)
    s += *c.shard == ShardLevel::full       ? "+fsdp"
         : *c.shard == ShardLevel::grad     ? "+zero2"
                                            : "+zero1";
  if (c.recompute) s += "+ac";
  if (c.stages > 1) s += " x PP" + std::to_string(c.stages);
  return s;
}

// The job of one point: micro-batch m, E / m accumulation steps (a
// pipeline's M) and P stages; the strategy list is the point's alone.
PlannerJob point_job(const PlannerJob& job, int micro_batch, int stages) {
  PlannerJob j = job;
  j.base.batch = micro_batch;
  j.base.grad_accum = job.fit_examples_per_rank / micro_batch;
  j.base.parallel.pipeline_stages = stages;
  j.base.parallel.stage_blocks.clear();  // balanced by counted FLOPs
  return j;
}

// The maskable components K of a strategy's plan over the whole model (a
// pipeline stage's plan covers its own share of them).
int plan_components(const PlannerJob& job, const std::string& strategy) {
  ParallelSettings p = job.base.parallel;
  p.strategy = strategy;
  const StrategySpec spec = StrategySpec::from_settings(p, job.base.model);
  ModelLayout layout;
  layout.granularity = spec.granularity;
  layout.ffn_groups = spec.ffn_groups;
  layout.head_groups = spec.head_groups;
  layout.channel_groups = spec.channel_groups;
  const auto model = make_model(job.base.model, layout);
  const auto& comps = model->components();
  return static_cast<int>(std::count_if(comps.begin(), comps.end(), [](const Component& comp) {
    return comp.kind != ComponentKind::shared;
  }));
}

// An SDP point holds `per_rank` of the plan's K components on each rank: C =
// per_rank / K, which the plan rounds back to exactly per_rank.
StrategyRequest request(const Combination& c, int per_rank, int components) {
  StrategyRequest r;
  r.strategy = c.strategy;
  r.active_fraction = find_strategy(c.strategy)->takes_fraction
                          ? static_cast<double>(per_rank) / components
                          : 1.0;
  r.shard = c.shard;
  if (c.recompute) r.recompute = RecomputePolicy::parse("block", "--fit");
  r.text = describe(c);
  return r;
}

struct Search {
  const PlannerJob& job;
  FitResult& result;

  int components = 1;  // K of the combination being searched

  FitRow measure(const Combination& c, int micro_batch, int per_rank) {
    const PlannerJob j = point_job(job, micro_batch, c.stages);
    MeasureOptions options;
    options.budget_bytes = result.budget_bytes;
    options.skip_recompute_twin = true;
    FitRow row;
    row.micro_batch = micro_batch;
    row.grad_accum = static_cast<int>(j.base.grad_accum);
    row.stages = c.stages;
    try {
      row.steps = measure_strategy(j, request(c, per_rank, components), options);
    } catch (const Error&) {
      // A point the engine refuses (a pipeline's stages over too few
      // blocks, a plan with no owner): it does not exist, so it cannot fit.
      row.fits = false;
      row.peak = -1;
      return row;
    }
    ++result.measurements;
    result.meta_steps += row.steps.steps_run;
    row.fits = row.steps.fits();
    row.peak = row.fits ? row.steps.peak().max : row.steps.over_budget_peak;
    return row;
  }

  void run(const Combination& c) {
    const int replicas = RankMesh(job.world, c.stages).replicas();
    const bool sdp = find_strategy(c.strategy)->takes_fraction;
    // Candidates: m of the K components per rank, C = m / K. m = K is DDP's
    // plan, so an SDP name covers m = 1 .. K - 1, and every component needs
    // an owner: m N >= K (m = ceil(K / N) on).
    components = sdp ? plan_components(job, c.strategy) : 1;
    const int K = components;
    int lo = sdp ? std::max({1, static_cast<int>(std::ceil(job.fit_min_active_fraction * K - 1e-9)),
                             (K + replicas - 1) / replicas})
                 : 1;
    const int hi = sdp ? K - 1 : 1;
    if (lo > hi) return;
    // The largest micro-batch that fits at the smallest C.
    FitRow smallest;
    bool tried = false;
    int m = 0;
    for (int cand = job.fit_examples_per_rank; cand >= 1; cand /= 2) {
      if (job.fit_examples_per_rank % cand != 0) break;
      if (c.stages > 1 && job.fit_examples_per_rank / cand < c.stages) continue;
      FitRow row = measure(c, cand, lo);
      if (row.peak < 0) continue;
      if (!tried || row.peak < smallest.peak) smallest = row;
      tried = true;
      if (row.fits) {
        m = cand;
        result.fitting.push_back(std::move(row));
        break;
      }
      if (cand % 2 != 0) break;
    }
    if (m == 0) {
      if (tried) {
        smallest.steps.request.text = describe(c);
        result.refused.push_back(std::move(smallest));
      }
      return;
    }
    // The largest per-rank count that fits at m: hi itself when it does (many sharded or
    // recomputing combinations fit whole), else bisection between lo, which
    // fits, and hi, which does not.
    if (hi == lo) return;
    FitRow top = measure(c, m, hi);
    if (top.fits) {
      result.fitting.push_back(std::move(top));
      return;
    }
    int fits_at = lo, fails_at = hi;
    while (fails_at - fits_at > 1) {
      const int mid = fits_at + (fails_at - fits_at) / 2;
      FitRow row = measure(c, m, mid);
      if (row.fits) {
        fits_at = mid;
        result.fitting.push_back(std::move(row));
      } else {
        fails_at = mid;
      }
    }
  }
};

double active(const FitRow& r) { return r.steps.request.active_fraction; }

// a dominates b: no worse in peak, step time and C, better in one.
bool dominates(const FitRow& a, const FitRow& b) {
  const double ta = a.steps.step_time.seconds, tb = b.steps.step_time.seconds;
  const bool no_worse = a.peak <= b.peak && ta <= tb && active(a) >= active(b);
  const bool better = a.peak < b.peak || ta < tb || active(a) > active(b);
  return no_worse && better;
}

// Bytes in GiB, or MiB under a 1 GiB budget (where GiB would print zeros).
struct MemoryUnit {
  double bytes;
  const char* name;
};
MemoryUnit unit_for(double budget) {
  return budget >= 1024.0 * 1024.0 * 1024.0 ? MemoryUnit{1024.0 * 1024.0 * 1024.0, "GiB"}
                                             : MemoryUnit{1024.0 * 1024.0, "MiB"};
}

std::string in_unit(double bytes, const MemoryUnit& u) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / u.bytes);
  return buf;
}


}  // namespace

FitResult fit(const PlannerJob& job) {
  const auto start = std::chrono::steady_clock::now();
  FitResult result;
  result.budget_bytes = job.fit_budget_bytes;
  result.examples_per_rank = job.fit_examples_per_rank;
  const int blocks = make_model(job.base.model)->block_count();
  Search search{job, result};
  for (const Combination& c : combinations(job, blocks)) search.run(c);

  for (FitRow& a : result.fitting) {
    a.pareto = true;
    for (const FitRow& b : result.fitting)
      if (dominates(b, a)) {
        a.pareto = false;
        break;
      }
    // One owner per component is no data parallelism for it at all, and a
    // tiny C trains tiny subnetworks: what fits fastest is rarely what a
    // researcher wants first.
    a.preferred = a.steps.owners >= job.fit_prefer_owners &&
                  active(a) >= job.fit_prefer_active_fraction - 1e-12;
  }
  std::stable_sort(result.fitting.begin(), result.fitting.end(),
                   [](const FitRow& a, const FitRow& b) {
                     if (a.preferred != b.preferred) return a.preferred;
                     if (a.steps.step_time.seconds != b.steps.step_time.seconds)
                       return a.steps.step_time.seconds < b.steps.step_time.seconds;
                     return active(a) > active(b);
                   });
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

nlohmann::json fit_config(const PlannerJob& job, const FitRow& row) {
  const PlannerJob j = point_job(job, row.micro_batch, row.stages);
  TrainConfig c = rank_config(j, row.steps.request, 0);
  c.emulate_world = 0;
  c.emulate_rank = 0;
  c.device = job.fit_device;
  // What the planner turned off to measure one step; a run of the config
  // gets the trainer's defaults back.
  const TrainConfig defaults;
  c.steps = defaults.steps;
  c.eval_every = defaults.eval_every;
  c.progress = defaults.progress;
  // The world it was chosen for: sdp-train refuses it on another (C and the
  // per-rank batch were chosen for this one).
  c.world = job.world;
  nlohmann::json out = c.to_json();
  // Every field but the job's own: the caller names its world with mpirun -n.
  out.erase("emulate_world");
  out.erase("emulate_rank");
  // Not chosen by the planner: left out, so that sdp-train derives it from
  // lr (0.1 x lr) and an --lr given on top of this file moves it too.
  out.erase("min_lr");
  return out;
}

std::string render_fit(const PlannerJob& job, const FitResult& r) {
  const int N = job.world;
  if (job.format == OutputFormat::json) {
    nlohmann::json rows = nlohmann::json::array(), refused = nlohmann::json::array();
    for (const FitRow& f : r.fitting)
      rows.push_back({{"composition", f.steps.request.text},
                      {"label", f.steps.label},
                      {"strategy", f.steps.request.strategy},
                      {"active_fraction", active(f)},
                      {"shard", f.steps.shard},
                      {"activation_checkpointing", f.steps.activation_checkpointing},
                      {"micro_batch", f.micro_batch},
                      {"grad_accum", f.grad_accum},
                      {"pipeline_stages", f.stages},
                      {"peak_bytes", f.peak},
                      {"sent_bytes_mean", f.steps.sent().mean},
                      {"spectral_gap", f.steps.spectral_gap},
                      {"step_time", f.steps.step_time.to_json()},
                      {"pareto", f.pareto},
                      {"owners", f.steps.owners},
                      {"preferred", f.preferred},
                      {"config", fit_config(job, f)}});
    for (const FitRow& f : r.refused)
      refused.push_back({{"composition", f.steps.request.text},
                         {"micro_batch", f.micro_batch},
                         {"smallest_peak_bytes", f.peak}});
    nlohmann::json out = {{"tool", "sdp-plan --fit"},
                          {"model", job.base.model},
                          {"world", N},
                          {"budget_bytes", r.budget_bytes},
                          {"examples_per_rank", r.examples_per_rank},
                          {"prefer_owners", job.fit_prefer_owners},
                          {"prefer_active_fraction", job.fit_prefer_active_fraction},
                          {"seq", job.base.seq},
                          {"step_time_model", job.time_model.to_json()},
                          {"fitting", rows},
                          {"refused", refused},
                          {"measurements", r.measurements},
                          {"meta_steps", r.meta_steps},
                          {"seconds", r.seconds}};
    return out.dump(2) + "\n";
  }
  if (job.format == OutputFormat::csv) {
    std::string out =
        "rank,composition,label,active_fraction,micro_batch,grad_accum,pipeline_stages,"
        "peak_bytes,sent_bytes_mean,step_seconds,pareto,owners,preferred\n";
    for (size_t i = 0; i < r.fitting.size(); ++i) {
      const FitRow& f = r.fitting[i];
      out += format(i + 1, ",", f.steps.request.text, ",", f.steps.label, ",", active(f), ",",
                    f.micro_batch, ",", f.grad_accum, ",", f.stages, ",",
                    static_cast<int64_t>(f.peak), ",",
                    static_cast<int64_t>(f.steps.sent().mean), ",",
                    nlohmann::json(f.steps.step_time.seconds).dump(), ",",
                    f.pareto ? "true" : "false", ",", f.steps.owners, ",",
                    f.preferred ? "true" : "false", "\n");
    }
    return out;
  }
  const MemoryUnit u = unit_for(r.budget_bytes);
  std::string out = format("## sdp-plan --fit: ", job.base.model, " on ", N, " ranks in ",
                           in_unit(r.budget_bytes, u), " ", u.name, " per rank\n\n");
  const bool language_model = model_family(job.base.model) == ModelFamily::llama;
  out += format(r.examples_per_rank, " ", language_model ? "sequences" : "images",
                " per rank per step (micro-batch x accumulation",
                language_model ? format(", ", job.base.seq, " tokens each") : std::string(),
                "). Every peak is a meta step's (the bytes the allocator will hold); step time "
                "from the model (engine/plan/step_time.h). ",
                r.fitting.size(), " configurations fit, ranked: first those where every "
                "component is averaged over at least ", job.fit_prefer_owners, " ranks and C >= ",
                fixed(job.fit_prefer_active_fraction, 2), " (--prefer-owners, "
                "--prefer-active-fraction), each part by step time; the Pareto front over "
                "(peak, step time, C) is marked *. `--write-config FILE [--choose K]` writes row "
                "K as an sdp-train --config file.\n\n");
  out += format("| # | composition | C | owners | micro-batch x accum | stages | peak ", u.name,
                " | of budget | sent MB/step | step s | Pareto |\n"
                "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n");
  for (size_t i = 0; i < r.fitting.size(); ++i) {
    const FitRow& f = r.fitting[i];
    out += format("| ", i + 1, " | ", f.steps.label, " | ", fixed(active(f), 4), " | ",
                  f.steps.owners, " | ", f.micro_batch, " x ", f.grad_accum, " | ", f.stages, " | ", in_unit(f.peak, u),
                  " | ", fixed(100 * f.peak / r.budget_bytes, 1), "% | ",
                  fixed(f.steps.sent().mean / 1e6, 1), " | ",
                  significant(f.steps.step_time.seconds), " | ", f.pareto ? "*" : "", " |\n");
  }
  const auto preferred = static_cast<size_t>(
      std::count_if(r.fitting.begin(), r.fitting.end(), [](const FitRow& f) { return f.preferred; }));
  if (preferred < r.fitting.size())
    out += preferred == 0
               ? format("\nNo configuration that fits has every component averaged over ",
                        job.fit_prefer_owners, " ranks with C >= ",
                        fixed(job.fit_prefer_active_fraction, 2), ".\n")
               : format("\nRows ", preferred + 1, " on have a component with fewer than ",
                        job.fit_prefer_owners, " owners or C < ",
                        fixed(job.fit_prefer_active_fraction, 2), ".\n");
  if (!r.refused.empty()) {
    out += "\nNo point fits (the smallest peak measured, at the smallest C and micro-batch "
           "tried):\n\n| composition | micro-batch | peak " + std::string(u.name) +
           " |\n|---|---:|---:|\n";
    for (const FitRow& f : r.refused)
      out += format("| ", f.steps.request.text, " | ", f.micro_batch, " | ",
                    f.peak > 0 ? in_unit(f.peak, u) : std::string("n/a"), " |\n");
  }
  out += format("\n", r.measurements, " points measured (", r.meta_steps, " meta steps) in ",
                fixed(r.seconds, 2), " s.\n");
  return out;
}

}  // namespace sdp::planner
