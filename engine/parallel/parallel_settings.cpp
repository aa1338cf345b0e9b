#include "engine/parallel/parallel_settings.h"

#include "engine/core/config_field_error.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/plan/rank_weights.h"

namespace sdp {

namespace {

constexpr const char* kValidShards =
    "none, optimizer, grad, full; empty = the strategy's level: full for fsdp, none otherwise";

[[noreturn]] void invalid_shard(const std::string& shard) {
  throw ConfigFieldError(
      "shard", format("config: shard = '", shard, "' is invalid (valid: ", kValidShards, ")"));
}

}  // namespace

double ParallelSettings::default_active_fraction(const std::string& strategy) {
  const StrategyRow* row = find_strategy(strategy);
  return row && row->takes_fraction ? kDefaultSubnetFraction : 1.0;
}

const StrategyRow& ParallelSettings::strategy_row() const {
  const StrategyRow* row = find_strategy(strategy);
  if (!row)
    throw ConfigFieldError("strategy", format("config: strategy = '", strategy,
                                              "' is invalid (valid: ", strategy_names(), ")"));
  return *row;
}

ShardLevel ParallelSettings::shard_level() const {
  if (shard.empty()) return strategy_row().implied_shard.value_or(ShardLevel::none);
  const std::optional<ShardLevel> level = parse_shard_level(shard);
  if (!level) invalid_shard(shard);
  return *level;
}

RecomputePolicy ParallelSettings::recompute() const {
  try {
    return RecomputePolicy::parse(activation_checkpointing, "config: activation_checkpointing");
  } catch (const Error& e) {
    throw ConfigFieldError("activation_checkpointing", e.what());
  }
}

std::string ParallelSettings::composition_label() const {
  const StrategyRow& row = strategy_row();
  const ShardLevel level = shard_level();
  std::string label;
  if (!row.takes_fraction && level == ShardLevel::full) {
    label = shard_label(ShardLevel::full);  // ddp with --shard full is fsdp
  } else {
    label = row.display;
    if (level != ShardLevel::none) label += format("+", shard_label(level));
  }
  const RecomputePolicy ac = recompute();
  if (ac.every == 1) label += "+AC";
  if (ac.every > 1) label += format("+AC:", ac.every);
  if (pipelined()) label += format("+PP", pipeline_stages);
  return label;
}

void ParallelSettings::validate() const {
  namespace L = config_limits;
  auto invalid = [](const char* field, const auto&... parts) {
    throw ConfigFieldError(field, format("config: ", field, " = ", parts...));
  };
  auto count = [&](const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) invalid(field, v, " is invalid (valid: [", lo, ", ", hi, "])");
  };
  const StrategyRow& row = strategy_row();
  if (!(active_fraction > 0 && active_fraction <= 1))
    invalid("active_fraction", active_fraction, " is invalid (valid: (0, 1])");
  if (!row.takes_fraction && active_fraction != 1.0)
    invalid("active_fraction", active_fraction, " needs an SDP strategy (", row.name,
            " trains the whole model on every rank: C = 1)");
  if (plan.rfind("weighted:", 0) == 0) {
    try {
      parse_rank_weights(plan.substr(9));
    } catch (const Error& e) {
      invalid("plan", e.what());
    }
  } else if (plan != "cyclic" && plan != "random" &&
             !(plan.rfind("file:", 0) == 0 && plan.size() > 5)) {
    invalid("plan", "'", plan, "' is invalid (valid: cyclic, random, file:PATH of an ownership "
            "matrix, weighted:W0,W1,... one weight per rank, e.g. weighted:80GiBx4,40GiBx4)");
  }
  count("ffn_groups", ffn_groups, 0, L::kGroups);
  count("head_groups", head_groups, 0, L::kGroups);
  count("channel_groups", channel_groups, 0, L::kGroups);
  const ShardLevel level = shard_level();
  // A strategy that stands for a level admits only that level: fsdp with
  // another one is a contradiction, not a refinement.
  if (row.implied_shard && level != *row.implied_shard)
    invalid("shard", "'", shard, "' with strategy ", row.name, " is invalid: ", row.name,
            " means --shard ", shard_level_name(*row.implied_shard),
            "; use --strategy ddp --shard ", shard);
  (void)recompute();  // throws for a malformed activation_checkpointing
  count("pipeline_stages", pipeline_stages, 1, L::kPipelineStages);
  if (schedule.empty())
    invalid("schedule", "'' is invalid (valid: a schedule name, or file:PATH)");
  if (deferred_weight_grads != "per-micro-batch" && deferred_weight_grads != "batched")
    invalid("deferred_weight_grads", "'", deferred_weight_grads,
            "' is invalid (valid: per-micro-batch, batched)");
}

}  // namespace sdp
