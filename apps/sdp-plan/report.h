#pragma once
// The planner's report in Markdown (tables for people), CSV (one row per
// strategy, and per rank with --per-rank) or JSON (everything, raw bytes).
// Column meanings: apps/sdp-plan/README.md.
#include <string>
#include <vector>

#include "apps/sdp-plan/measure.h"
#include "apps/sdp-plan/plan_options.h"

namespace sdp::planner {

struct PlanReport {
  PlannerJob job;
  std::vector<StrategySteps> strategies;  // in job.strategies order
  double seconds = 0;                     // all meta steps together
};

// In job.format.
std::string render(const PlanReport& report);

}  // namespace sdp::planner
