#pragma once
// Command-line options of sdp-plan and the job they describe: one model, a
// world of N ranks and the strategies to compare. Every check runs before the
// first meta step, so a bad item late in --strategies fails at once.
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/training_options.h"
#include "engine/parallel/rank_mesh.h"
#include "engine/plan/step_time.h"
#include "engine/train/train_config.h"
#include "models/common/recompute_policy.h"
#include "engine/optim/shard_level.h"

namespace sdp::planner {

inline constexpr const char* kDefaultStrategies = "ddp,b-sdp:0.5,n-sdp:0.5,bb-sdp:0.5,nb-sdp:0.5";
// C of an SDP item written without one (the default list's value).
inline constexpr double kDefaultActiveFraction = ParallelSettings::kDefaultSubnetFraction;

enum class OutputFormat { markdown, csv, json };

// One item of --strategies, a composition "name[:C][+shard][+ac]"
// (engine/parallel/composition.h).
struct StrategyRequest {
  std::string text;              // as written, for messages
  std::string strategy;          // a name of strategy_table(): ddp | fsdp | b-sdp | ...
  double active_fraction = 1.0;  // C
  std::optional<ShardLevel> shard;  // nullopt: the strategy's own level
  RecomputePolicy recompute;        // activation checkpointing; none unless +ac
  // False for the DDP baseline that the planner adds when --strategies has
  // none: every saving and ratio is against DDP.
  bool requested = true;

  // DDP with nothing sharded or recomputed: what the baseline must be.
  bool plain_ddp() const { return strategy == "ddp" && !shard && !recompute.enabled(); }
};

// The request of one --strategies item; throws sdp::Error naming the item
// and the valid forms.
StrategyRequest parse_strategy_item(const std::string& item);

// Values as given on the command line.
struct PlanOptions {
  // model, batch, seq, grad_accum (a pipeline's M), dtype; parallel: plan,
  // plan_seed, groups, pipeline_stages, schedule, stage_blocks
  TrainConfig base;
  app::ModelFieldFlags model_fields;  // --vocab-size, --layers: fields of the --model spec
  int64_t world = 0;
  std::string strategies = kDefaultStrategies;
  bool strategies_given = false;  // --strategies on the command line
  std::string format = "markdown";
  bool per_rank = false;
  bool every_rank = false;  // measure every rank, not one per class (measure.h)
  std::string output;  // empty: stdout
  // The step-time model (engine/plan/step_time.h).
  double flops_per_second = StepTimeModel{}.flops_per_second;
  double link_latency = LinkModel{}.latency_seconds;
  std::string intra_node_bandwidth = "400GB/s";
  std::string inter_node_bandwidth = "400Gb/s";
  int64_t ranks_per_node = LinkModel{}.ranks_per_node;
  std::string overlap = "auto";  // on | off | auto (on, off when calibrated)
  std::vector<std::string> calibrate;  // metrics JSONL files of real runs
  // --fit (apps/sdp-plan/fit.h)
  std::string fit;                 // the per-rank budget, e.g. "24GiB"; empty: no search
  int64_t tokens_per_rank = 0;     // LLaMA: examples per rank = this / seq
  double min_active_fraction = 0;  // smallest C the search may choose
  // Ranking --fit's list: configurations where every component has at least
  // this many owners and C is at least this come first.
  int prefer_owners = 2;
  double prefer_active_fraction = 0.25;
  std::string device = "cuda";     // planned for: cuda or cpu (meta or meta-cpu steps)
  std::string write_config;        // FILE: the chosen row as an sdp-train --config
  int64_t choose = 1;              // the row written (1 = the first)
  // Per-rank memory ("80GiBx8,40GiBx8"): a weighted plan and per-rank budgets.
  std::string rank_memory;
  std::string write_plan;  // FILE: the one SDP item's ownership matrix
  // --paper NAME: one of the paper's setups (apps/sdp-plan/paper_presets.h)
  // filled the fields above; "list" lists them. paper_overrides: the flags
  // given beside it, which replaced the preset's values.
  std::string paper;
  std::vector<std::string> paper_overrides;
};

void add_options(CLI::App& app, PlanOptions& options);

// The checked job. `strategies` starts with DDP: the requested one, or the
// added baseline.
struct PlannerJob {
  TrainConfig base;  // device meta, one step, no evaluation, no files
  int world = 1;
  std::vector<StrategyRequest> strategies;
  int baseline = 0;  // index of DDP in strategies
  // P > 1: every strategy runs on P stages x world / P replicas (the plan
  // over the replicas), base.parallel has the schedule and stage blocks.
  bool pipelined() const { return base.parallel.pipelined(); }
  // D, the ranks a plan is over: world / P (the whole world without a pipeline).
  int replicas() const {
    return RankMesh(world, static_cast<int>(base.parallel.pipeline_stages)).replicas();
  }
  OutputFormat format = OutputFormat::markdown;
  bool per_rank = false;
  bool every_rank = false;
  std::string output;
  StepTimeModel time_model;
  std::vector<std::string> calibrated_from;  // the --calibrate files, when given
  // --fit: 0 = no search
  double fit_budget_bytes = 0;
  int fit_examples_per_rank = 0;  // E = batch x grad-accum per rank per step
  double fit_min_active_fraction = 0;
  int fit_prefer_owners = 2;              // see PlanOptions
  double fit_prefer_active_fraction = 0.25;
  std::string fit_device = "cuda";
  std::string write_config;
  int choose = 1;
  // --rank-memory: each rank's budget in bytes ([N]); empty without it. The
  // plans are weighted by them (base.parallel.plan = "weighted:...").
  std::vector<double> rank_budgets;
  std::string write_plan;
  // --paper: the preset whose figures the report sets beside ours ("" none),
  // and the flags that replaced its values.
  std::string paper;
  std::vector<std::string> paper_overrides;
};

// "400Gb/s", "50GB/s", "1.5e10" (bytes/s): bytes per second; throws
// sdp::Error naming `what` and the valid forms.
double parse_bandwidth(const std::string& text, const std::string& what);

// Throws sdp::Error naming the flag (or the --strategies item) and what is
// valid; the plan of every strategy is built once here, so an impossible
// plan is refused before any step runs.
PlannerJob resolve_job(const PlanOptions& options);

// The config of rank `rank` of `job` running `strategy`.
TrainConfig rank_config(const PlannerJob& job, const StrategyRequest& strategy, int rank);

}  // namespace sdp::planner
