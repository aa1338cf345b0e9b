#pragma once
// How a job is parallelized, the part of a run's configuration that
// engine/parallel reads, on three axes:
//   ownership  which components each rank owns (strategy, C, plan, groups);
//              masking follows from the strategy (strategy_table.h)
//   sharding   how much of each storage group's training state is
//              partitioned over the ranks that share it (ZeRO-1/2/3, FSDP)
//   recompute  which blocks run their forward again before their backward
//              (activation checkpointing)
//   pipeline   how many stages the model is cut into, where, and the
//              schedule the stages run their micro-batches by; the ranks
//              of a stage are its data-parallel replicas and run the
//              ownership plan among themselves
// The fields keep the names (and JSON keys) they have as flat config fields
// of TrainConfig, which holds one of these as `parallel`.
#include <cstdint>
#include <string>

#include "engine/parallel/strategy_table.h"
#include "models/common/recompute_policy.h"
#include "engine/optim/shard_level.h"

namespace sdp {

// Every field once, X(field): TrainConfig's JSON form and its unknown-key
// check iterate them, so a new field cannot be forgotten there.
#define SDP_PARALLEL_SETTINGS_FIELDS(X)                                                   \
  X(strategy) X(active_fraction) X(plan) X(plan_seed) X(ffn_groups) X(head_groups)        \
  X(channel_groups) X(shard) X(reshard_after_forward) X(activation_checkpointing)          \
  X(pipeline_stages) X(schedule) X(stage_blocks)  \
  X(deferred_weight_grads)

struct ParallelSettings {
  // C of an SDP strategy given without one (sdp-train without
  // --active-fraction, an sdp-plan item without ":C"): a real subnetwork,
  // half the components per rank, never silently the whole model.
  static constexpr double kDefaultSubnetFraction = 0.5;
  // The C a job of `strategy` runs with when none is given:
  // kDefaultSubnetFraction for an SDP strategy, 1 for ddp and fsdp (and for
  // an unknown name, which validate() refuses).
  static double default_active_fraction(const std::string& strategy);

  // ownership plan: every rank trains its subnet of the plan; gradients are
  // averaged among each component's owners
  std::string strategy = "ddp";         // a name of strategy_table(): ddp | fsdp | b-sdp | ...
  // C: share of components each rank owns (ddp, fsdp: 1). An app that
  // reads a config without it takes default_active_fraction(strategy).
  double active_fraction = 1.0;
  // cyclic | random | file:PATH: a JSON file {"matrix": ["1010", "0101"]},
  // one string of 0/1 per rank (replica), one character per maskable
  // component (the "matrix" a run's plan JSON has), e.g. to give a job
  // without a pipeline the plan of one with.
  std::string plan = "cyclic";
  uint64_t plan_seed = 0;               // random plans
  int64_t ffn_groups = 0;               // neuron strategies: FFN unit groups per block
  int64_t head_groups = 0;              //   and attention head groups per block
                                        //   (0 = the largest count <= 4 that divides)
  int64_t channel_groups = 0;           // ResNet: inner-channel groups per basic block
                                        //   (0 = the largest count <= 8 dividing every width)
  // sharding: none | optimizer | grad | full; empty = the strategy's level
  // (full for fsdp, none otherwise). Kept apart from "none" so that an
  // explicit --shard none with fsdp is refused, not silently overridden.
  std::string shard;
  // Shard full only: free each gathered parameter after the forward of its
  // site and gather it again for the backward (false: keep it until then).
  // Accepted and ignored at other levels.
  bool reshard_after_forward = true;
  // none | block | every:K (RecomputePolicy::parse)
  std::string activation_checkpointing = "none";
  // pipeline: P stages (1 = none); world = P x D, stage s on world ranks
  // s D .. s D + D - 1. Each step runs grad_accum micro-batches (the
  // pipeline's M) per replica by `schedule`: a name of
  // pipeline::schedule_names() or file:PATH (a schedule JSON). stage_blocks:
  // blocks per stage, "3,3,3,3"; empty = balanced by counted FLOPs.
  int64_t pipeline_stages = 1;
  std::string schedule = "1f1b";
  std::string stage_blocks;
  // How a split schedule's W actions run: per-micro-batch (one W, one
  // accumulating GEMM per weight, each) or batched (each run of adjacent W
  // actions of a stage as one W whose linear weight gradients are one GEMM
  // over the micro-batches' rows concatenated: engine/pipeline/
  // deferred_weight_grads.h). Batched needs a schedule with W actions.
  std::string deferred_weight_grads = "per-micro-batch";

  // The table row of `strategy`; throws ConfigFieldError for an unknown name.
  const StrategyRow& strategy_row() const;
  Masking masking() const { return strategy_row().masking; }
  Granularity granularity() const { return strategy_row().granularity; }
  // Whether ranks train different subnetworks (an SDP strategy).
  bool subnetworks() const { return strategy_row().takes_fraction; }
  // The effective level: `shard`, or the strategy's own when it is empty.
  ShardLevel shard_level() const;
  RecomputePolicy recompute() const;
  // The composition in a few characters, for reports: "DDP", "FSDP",
  // "FSDP+AC", "B-SDP+FSDP+AC", "N-SDP+ZeRO-2", "DDP+ZeRO-1", "Bb-SDP+AC:2"
  // (AC = every block, AC:K = every K-th), "B-SDP+PP4" (4 pipeline stages).
  std::string composition_label() const;
  bool pipelined() const { return pipeline_stages > 1; }

  // Throws ConfigFieldError naming the first invalid field (its JSON key)
  // and what is valid. Combinations that only the trainer can judge (a plan
  // against a model and a world) are left to it.
  void validate() const;
};

}  // namespace sdp
