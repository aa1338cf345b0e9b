#pragma once
// Times a pipeline schedule: each stage runs its list in order, an action
// starting when the stage is free and its dependencies (schedule.h) have
// ended, plus the link time for those from a neighbouring stage.
//
// Time. F, B, I and W cost what StageCosts says on their stage; the send and
// receive kinds cost nothing themselves, their waiting comes from the
// dependencies. Every cross-stage dependency pays the link model once:
//   hop_latency + boundary_bytes[b] / link_bandwidth
// where b = min of the two stages (the boundary between stage b and b + 1)
// and link_bandwidth = 0 means an infinitely fast link (latency only).
//
// Memory. Per stage and micro-batch, from the simulated (or measured) times:
// - activation_bytes are held from the start of its F until the end of its B,
//   or the end of its I when the backward is split (I consumes what the
//   layers saved for backward);
// - weight_grad_bytes are held from the end of its I until the end of its W:
//   what a deferred W keeps alive (the layers' inputs and output gradients).
// The peak is the largest sum of both over time; intervals are half-open
// [acquire, release), so a set released at t and one acquired at t do not
// overlap, and actions of one stage that tie in time follow list order. A
// micro-batch is in flight on a stage from the start of its F until the end
// of its B or W; the peak count of those is kept beside the bytes. With the
// defaults (activation_bytes 1, weight_grad_bytes 0) the byte peak counts
// activation sets.
#include <cstdint>
#include <vector>

#include "engine/pipeline/schedule.h"
#include "engine/pipeline/timeline.h"

namespace sdp::pipeline {

// Defaults: uniform, I = W = F and B = I + W; memory counts activation sets.
struct StageCosts {
  double forward = 1.0;
  double backward = 2.0;
  double input_grad = 1.0;
  double weight_grad = 1.0;
  int64_t activation_bytes = 1;   // one micro-batch's saved activations on this stage
  int64_t weight_grad_bytes = 0;  // what one micro-batch's pending W keeps alive
};

struct SimulationCosts {
  std::vector<StageCosts> stages;       // [P], or empty for the defaults on every stage
  std::vector<int64_t> boundary_bytes;  // [P - 1] one message between stage s and s + 1; or empty (0)
  double hop_latency = 0.0;             // seconds (or the cost unit) per message, the link's latency
  double link_bandwidth = 0.0;          // bytes per second (or cost unit); 0 = infinite
};

// The link time of one message across boundary b (between stages b and b + 1).
double hop_time(const SimulationCosts& costs, int boundary);

struct MemoryPeaks {
  std::vector<int64_t> bytes;  // [P] peak of activation + weight-gradient bytes held
  std::vector<int> in_flight;  // [P] most micro-batches between F's start and B's or W's end
};

// The memory model above over any timeline of the schedule (simulated or
// measured); checks the timeline first (check_timeline) and the costs.
MemoryPeaks memory_peaks(const Schedule& schedule, const Timeline& timeline,
                         const SimulationCosts& costs = {});

// A Timeline (timings[s][k] for stages[s][k]) with what follows from it.
struct SimulationResult : Timeline {
  double makespan = 0.0;                      // last end; the step starts at 0
  std::vector<double> busy;                   // [P] time spent computing
  std::vector<double> bubble_fraction;        // [P] (makespan - busy) / makespan
  std::vector<int> peak_live_activations;     // [P] most micro-batches in flight at once
  std::vector<int64_t> peak_memory_bytes;     // [P] peak activation + weight-gradient bytes
};

// Validates the schedule first (validate), then simulates it. Fails for a
// cost list whose length is not P, a boundary list whose length is not
// P - 1, or a negative cost, size, latency or bandwidth.
SimulationResult simulate(const Schedule& schedule, const SimulationCosts& costs = {});

}  // namespace sdp::pipeline
