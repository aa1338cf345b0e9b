#pragma once
// sdp-plan --fit BUDGET: the configurations of a job that fit a per-rank
// memory budget, measured (every figure is a meta step's, as in the rest of
// the planner), with their estimated step time (engine/plan/step_time.h),
// ranked as a researcher would pick (fits, then the configurations where
// every component is averaged over at least --prefer-owners ranks and C is
// at least --prefer-active-fraction, by step time; then the rest), the
// Pareto front over (peak memory, step time, C) marked beside.
//
// The search, per rank E = batch x grad-accum examples a step:
//   strategy  ddp, b-sdp, n-sdp, bb-sdp, nb-sdp
//   shard     none, zero1, zero2, full
//   recompute none, every block
//   stages    1, and every P in 2, 4, 8, ... dividing N, at most the model's
//             blocks, with M = E / m >= P micro-batches (a shard level only
//             where a stage has more than one replica)
//   micro-batch m: E, E / 2, E / 4, ... (grad-accum E / m)
//   C         m / K: each rank holds m of the plan's K components, m =
//             max(1, ceil(K / N)) .. K - 1 (SDP), or 1 (DDP)
// pruned by monotonicity: a smaller micro-batch never holds more, so each
// (strategy, shard, recompute, stages) takes the largest m that fits at its
// smallest C; a smaller C never holds more, so the largest C that fits at
// that m is K - 1 components per rank when that fits, else found by bisection. Every point
// measured on the way that fits is a configuration that fits; combinations
// with none are reported as refused with the smallest peak seen. Each measurement stops at the first rank over the
// budget (most-owning classes first) and skips the twin without
// recomputation.
#include <string>
#include <vector>

#include "apps/sdp-plan/measure.h"
#include "apps/sdp-plan/plan_options.h"

namespace sdp::planner {

struct FitRow {
  StrategySteps steps;     // the measured point (ranks empty when it did not fit)
  int micro_batch = 0;     // m
  int grad_accum = 0;      // E / m (a pipeline's M)
  int stages = 1;          // P
  double peak = 0;         // max over ranks (when it did not fit: the rank over budget's)
  bool fits = false;
  bool pareto = false;
  bool preferred = false;  // owners and C at least the job's preference
};

struct FitResult {
  double budget_bytes = 0;
  int examples_per_rank = 0;  // E
  std::vector<FitRow> fitting;  // ranked: preferred first, each part by step time
  // Combinations with no fitting point: the smallest-peak point tried.
  std::vector<FitRow> refused;
  int measurements = 0;    // points measured
  int meta_steps = 0;      // meta steps they ran
  double seconds = 0;
};

FitResult fit(const PlannerJob& job);

// Markdown, CSV or JSON (job.format).
std::string render_fit(const PlannerJob& job, const FitResult& result);

// The sdp-train --config JSON of fitting row `index` (0-based) of `result`.
nlohmann::json fit_config(const PlannerJob& job, const FitRow& row);

}  // namespace sdp::planner
