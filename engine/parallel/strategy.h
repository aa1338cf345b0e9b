#pragma once
// Parallel strategies as data: what each rank holds, trains and exchanges.
// The strategies themselves are the rows of strategy_table.h; ddp (and fsdp,
// which is ddp with sharding) is the plan with C = 1, no separate code path.
// A SubnetLayout turns a strategy, a model and a world into the plan over
// the model's maskable components and the storage groups of one rank: every
// component with the same owner set shares one group (one bucket, one
// collective on that owner set's communicator). Shared components are owned
// by every rank.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/parallel/parallel_settings.h"
#include "engine/parallel/rank_mesh.h"
#include "engine/parallel/strategy_table.h"
#include "engine/plan/subnet_plan.h"
#include "models/common/component.h"
#include "engine/optim/shard_level.h"
#include "models/common/stage_span.h"
#include "models/registry.h"

namespace sdp {

struct StrategySpec {
  std::string name = "ddp";
  Granularity granularity = Granularity::block;
  Masking masking = Masking::forward;
  double active_fraction = 1.0;
  PlanConstruction construction = PlanConstruction::cyclic;
  std::string plan_file;  // a given ownership matrix (plan = file:PATH); empty = construct
  std::vector<double> rank_weights;  // plan = weighted:LIST, one per replica
  uint64_t plan_seed = 0;
  int ffn_groups = 4, head_groups = 4;  // LLaMA neuron granularity
  int channel_groups = 8;               // ResNet neuron granularity
  // Sharding (shard_level.h): every trained group is cut over its owners.
  // Sharded layouts keep each block's components of one owner set in a
  // group of their own (the unit gathered before that block runs).
  ShardLevel shard = ShardLevel::none;

  // The ownership plan of `settings` for `model` (a registry name, which
  // resolves group counts of 0 to the model's defaults).
  static StrategySpec from_settings(const ParallelSettings& settings, const std::string& model);
  // "B-SDP (C = 0.5, cyclic)" / "DDP" / "FSDP": the ownership plan only
  // (ParallelSettings::composition_label adds sharding and recomputation).
  // held_fraction > 0: the owned fraction of the built plan, shown beside C
  // where rounding to whole components per rank moved it:
  // "B-SDP (C = 0.7, held 0.6875, cyclic)".
  std::string describe(double held_fraction = 0) const;
};

// One storage group: the components of one owner set (of one block, when
// sharded).
struct StorageGroup {
  std::string name;         // "owners:all", "owners:0,2", "owners:0-7,12" (sharded: "owners:0,2/block.3")
  std::vector<int> owners;  // sorted world ranks
  bool held = false;        // parameters exist on this rank
  bool trained = false;     // this rank owns it: gradients, optimizer state
  // The owner that broadcasts its values after each update (backward
  // masking) and sends them for checkpoints and evaluation: balanced by
  // bytes over the owners (largest groups first, each to the owner that
  // sends least so far) so no rank sends much more than its share.
  int root = 0;
};

// A shared parameter that serves one sublayer of a block (component.h's
// SublayerParam) and is used by fewer ranks than its storage group is
// averaged over: forward masking, with some rank holding none of the
// sublayer's groups. Its gradient is averaged over `users` only
// (OwnerGroups::average_over_users).
struct SublayerUsers {
  int param = -1;          // parameter id in the model's ParameterSet
  std::string name;        // its name, for the run summary
  std::vector<int> users;  // sorted world ranks that run the sublayer
};

// A pipelined layout (SubnetLayout::build with stage spans): the world is
// the mesh of P stages x D replicas (rank_mesh.h). The plan is over the D
// replicas; every component lives on the ranks of the stage that runs its
// site, its owners there being the plan's owners among the replicas (shared
// components: all D), so no rank holds another stage's parameters and
// gradients are averaged among one stage's replicas. Backward masking holds
// every group of the rank's own stage; sharding cuts over the stage's
// replicas what it would cut over the world without a pipeline.
struct SubnetLayout {
  StrategySpec spec;
  int world = 1, rank = 0;
  RankMesh mesh;                  // P stages x D replicas
  std::vector<StageSpan> stages;  // [P]; one whole span without a pipeline
  int stage = 0;                  // this rank's stage (mesh coordinate)
  int replicas = 1;               // D
  int replica = 0;                // this rank's replica (mesh coordinate)
  int stage_count() const { return static_cast<int>(stages.size()); }
  bool pipelined() const { return stage_count() > 1; }
  SubnetPlan plan;                     // over the maskable components
  std::vector<std::string> component_names;  // maskable components, plan order
  ModelLayout model_layout;            // component -> storage group
  std::vector<StorageGroup> groups;
  // The sublayer parameters whose users are fewer than their group's
  // owners; empty where every rank runs every sublayer (DDP, block
  // granularity, backward masking, plans that give every rank a group of
  // every sublayer).
  std::vector<SublayerUsers> sublayer_users;

  // `model` by registry name (models/registry.h); `facts` as the data gives them.
  // `stages`: the pipeline's spans, in order, tiling the model's blocks;
  // empty = no pipeline (one whole span).
  static SubnetLayout build(const std::string& model, const StrategySpec& spec, int world,
                            int rank, const ModelDataFacts& facts = {},
                            const std::vector<StageSpan>& stages = {});
  std::vector<bool> held_mask() const;
  // spec.describe() with the C the plan holds beside the one asked for.
  std::string describe() const { return spec.describe(plan.held_fraction()); }
  std::vector<bool> trained_mask() const;
  // Each group's partition on this rank: over its owners, at the spec's
  // shard level, for the groups this rank trains (others whole).
  std::vector<GroupShard> shard_plan() const;
  bool all_ranks(const StorageGroup& g) const { return static_cast<int>(g.owners.size()) == world; }
  // The stage whose ranks own (and, under backward masking, hold) a group.
  int stage_of(const StorageGroup& g) const { return mesh.stage_of(g.owners.front()); }
  // Whether world rank `r` holds a group's parameters: its owners, and
  // under backward masking every rank of its stage.
  bool held_by(const StorageGroup& g, int r) const;
  // Whether a group is cut into shards over its whole stage rather than
  // over its owners (backward masking with full sharding: every rank of the
  // stage holds a shard, owner or not).
  bool cut_over_stage() const {
    return spec.masking == Masking::backward && spec.shard == ShardLevel::full;
  }
  // Plan table, strategy and groups, for the run summary and start-up print.
  nlohmann::json to_json() const;
};

}  // namespace sdp
