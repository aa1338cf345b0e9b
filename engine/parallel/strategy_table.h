#pragma once
// The strategy vocabulary: one row per --strategy name, read by everything
// that parses, validates, describes or documents a strategy (StrategySpec,
// ParallelSettings, the front ends' help texts and item parsers), so that a
// name is spelled in one place only.
//   ddp     every rank trains the whole model (C = 1)
//   fsdp    ddp with --shard full (parameters, gradients and AdamW state
//           partitioned over the ranks)
//   b-sdp   blocks, forward masking: a rank builds only its blocks
//   n-sdp   FFN unit groups and head groups (LLaMA) or inner-channel groups
//           (ResNet), forward masking: narrower matrices
//   bb-sdp  blocks, backward masking: full model, weight gradients only for owned
//   nb-sdp  neuron groups, backward masking
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "models/common/component.h"
#include "engine/optim/shard_level.h"

namespace sdp {

// Forward masking drops the activations of unowned components too (a rank
// runs its subnetwork only); backward masking runs the whole model forward
// and computes weight gradients only for what the rank owns.
enum class Masking : uint8_t { forward, backward };

constexpr std::string_view masking_name(Masking m) {
  return m == Masking::forward ? "forward" : "backward";
}

struct StrategyRow {
  std::string_view name;     // --strategy value: "b-sdp"
  std::string_view display;  // in descriptions and labels: "B-SDP"
  Granularity granularity;
  Masking masking;
  // Whether ranks train subnetworks: C (active_fraction) may be below 1.
  // Without it the strategy is C = 1 (every rank owns every component).
  bool takes_fraction;
  // The shard level the strategy stands for (fsdp: full); nullopt = none
  // implied, --shard chooses.
  std::optional<ShardLevel> implied_shard;
  std::string_view help;     // a few words for help texts: "blocks"
};

// Every strategy, in the order help texts list them (ddp first).
std::span<const StrategyRow> strategy_table();

// The row of `name`; nullptr when no strategy has that name.
const StrategyRow* find_strategy(std::string_view name);

// "ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp": the valid names, for messages.
std::string strategy_names();

// "ddp (...), fsdp (...), ...": every name with its help words, for help texts.
std::string strategy_help();

// How a composition's sharding is written in labels: "" (none), "ZeRO-1"
// (optimizer), "ZeRO-2" (grad), "FSDP" (full).
std::string_view shard_label(ShardLevel level);

}  // namespace sdp
