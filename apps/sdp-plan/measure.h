#pragma once
// The planner's measurements: one meta-device training step of each rank of
// a strategy, each rank emulated in this process (no MPI, no memory, no
// arithmetic), one Trainer at a time. See docs/ARCHITECTURE.md "Measurements" for what
// the bytes mean.
//
// Ranks that hold the same row of the plan at the same pipeline stage, and
// are roots of the same storage groups (a root broadcasts its group's values
// under backward masking; most ranks are root of none), take the same step: the same pieces of the model, the same owner-group sizes
// (sharded buffers are padded to equal chunks, so a rank's position in its
// group changes which chunk it keeps, not its size), and collectives of the
// same payloads, whose ring traffic is the same for every member. So one rank
// of each such class is measured and the others take its figures
// (RankStep::measured_as); a cyclic plan has at most about twice as many
// classes as components, whatever the world. PlannerJob::every_rank measures
// every rank instead, which the tests use to hold the two equal.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/sdp-plan/plan_options.h"
#include "comm/communicator.h"
#include "engine/metrics/memory_report.h"
#include "engine/metrics/stage_stats.h"
#include "engine/plan/step_time.h"
#include "engine/plan/subnet_plan.h"

namespace sdp::planner {

struct RankStep {
  int rank = 0;
  double peak_bytes = 0;   // memory->peak_total
  double sent_bytes = 0;   // comm->total().sent_bytes
  double gathered_peak_bytes = 0;  // memory->peak[gathered]
  double flops = 0;        // StepResult::flops: recomputation included
  // flops minus the FLOPs of the same rank and composition without
  // recomputation (a second meta step); 0 when nothing is recomputed.
  double recompute_flops = 0;
  // Pipelined jobs (stage -1 and zeros otherwise). The activation peak is
  // that category's own peak in the step: where 2BP's deferred weight
  // gradients show, their inputs kept after I until W runs.
  int stage = -1;
  double activation_peak_bytes = 0;  // memory->peak[activation]
  double activation_bytes_sent = 0;  // to the next stage: M boundary activations
  double gradient_bytes_sent = 0;    // to the previous stage: M boundary gradients
  // Everything else the rank sends: the averaging among the stage's
  // replicas (owner groups) and the step's all-reduce of the loss.
  double replica_bytes_sent = 0;
  // The step's figures, shared by the ranks of a class (a 65,536-rank
  // plan holds one copy of each per class, not per rank).
  std::shared_ptr<const StageStats> pipeline;  // StepResult::pipeline; null without one
  std::shared_ptr<const MemorySnapshot> memory;
  std::shared_ptr<const comm::CommStats> comm;
  double seconds = 0;      // building the trainer and running the step (and its twin)
  // The rank whose measured step this is: `rank` itself, or the first rank
  // of its class. A copied step has seconds 0 and shares the measured rank's
  // comm, whose groups name that rank's owner groups, not this rank's: its
  // reports leave them out (comm_json).
  int measured_as = 0;
  bool copied() const { return measured_as != rank; }
  // The comm record the reports write: CommStats::to_json(), without
  // "by_group" for a copied step.
  nlohmann::json comm_json() const;
};

struct Summary {
  double min = 0, mean = 0, max = 0;
  int argmax = 0;  // first rank with the maximum
};
Summary summarize(const std::vector<double>& values);

struct StrategySteps {
  StrategyRequest request;
  std::string label;        // the composition: "B-SDP", "FSDP+AC", "N-SDP+ZeRO-2"
  std::string description;  // "B-SDP (C = 0.5, cyclic)"
  std::string granularity;  // block | neuron
  std::string masking;      // forward | backward
  std::string shard;        // none | optimizer | grad | full (the effective level)
  std::string activation_checkpointing;  // none | block | every:K
  int components = 0;       // maskable components in the plan
  // Owners per component: the fewest and the most (a plan with C K whole
  // components per rank gives floor or ceil of m N / K).
  int owners = 0, owners_max = 0;
  double held_fraction = 1;  // the C the plan holds (owned fraction), beside the one asked for
  std::string coverage_warning;  // SubnetPlan::coverage_warning: ranks missing a sublayer, or ""
  int owned_min = 0, owned_max = 0;  // components a replica owns (the plan's rows)
  SubnetPlan plan;          // the ownership plan (shared, not copied)
  double spectral_gap = 1;
  std::vector<RankStep> ranks;  // by rank; empty when a budget stopped the measuring
  // The step-time model's estimate (engine/plan/step_time.h) of the slowest
  // measured rank, which every rank waits for; step_time_rank is that rank.
  StepTimeEstimate step_time;
  int step_time_rank = 0;
  // Measuring with a memory budget: the first rank found above it (its
  // peak in over_budget_peak) ends the measuring; -1 when every rank fits.
  int over_budget_rank = -1;
  double over_budget_peak = 0;
  int steps_run = 0;  // meta steps of ranks measured (twins not counted)
  bool fits() const { return over_budget_rank < 0; }

  Summary peak() const;
  Summary sent() const;
  Summary gathered_peak() const;
  Summary flops() const;
  Summary recompute_flops() const;
  // Meta steps run for this strategy: one per rank, two with recomputation.
  int meta_steps() const;
  int measured_ranks() const;  // ranks whose step ran: one per class, or all
};

struct MeasureOptions {
  // Stop at the first rank whose peak exceeds this many bytes (0: none).
  // Classes are then measured most-owning first, the likeliest to exceed it.
  double budget_bytes = 0;
  // Skip the twin step without recomputation (recompute_flops stay 0).
  bool skip_recompute_twin = false;
};

// The steps of every rank of `strategy` in rank order, one measured per class
// (every one with job.every_rank), and the estimated step time.
StrategySteps measure_strategy(const PlannerJob& job, const StrategyRequest& strategy,
                               const MeasureOptions& options = {});

}  // namespace sdp::planner
