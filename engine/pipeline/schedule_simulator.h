#pragma once
// Times a pipeline schedule: each stage runs its list in order, an action
// starting when the stage is free and its dependencies (schedule.h) have
// ended, plus one hop of latency for those from a neighbouring stage.
//
// Memory model (kept simple): a micro-batch holds one activation set on a
// stage from the start of its F until the end of its B, or of its W when the
// backward is split. I is taken to free nothing, so deferring W keeps the
// whole set alive; the peak counts whole sets.
#include <vector>

#include "engine/pipeline/schedule.h"

namespace sdp::pipeline {

// Defaults: uniform, I = W = F and B = I + W.
struct StageCosts {
  double forward = 1.0;
  double backward = 2.0;
  double input_grad = 1.0;
  double weight_grad = 1.0;
};

struct SimulationCosts {
  std::vector<StageCosts> stages;  // [P], or empty for the defaults on every stage
  double hop_latency = 0.0;        // per activation or gradient sent between adjacent stages
};

struct ActionTiming {
  double start = 0.0;
  double end = 0.0;
};

struct SimulationResult {
  std::vector<std::vector<ActionTiming>> timings;  // [P][actions], as the schedule lists them
  double makespan = 0.0;                           // last end; the step starts at 0
  std::vector<double> busy;                        // [P] time spent computing
  std::vector<double> bubble_fraction;             // [P] (makespan - busy) / makespan
  std::vector<int> peak_live_activations;          // [P] most activation sets held at once
};

// Validates the schedule first (validate), then simulates it. Fails for a
// cost list whose length is not P or a negative cost or latency.
SimulationResult simulate(const Schedule& schedule, const SimulationCosts& costs = {});

}  // namespace sdp::pipeline
