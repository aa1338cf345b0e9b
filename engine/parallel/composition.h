#pragma once
// A parallel composition written as one word, as sdp-plan's --strategies
// items are: name[:C][+shard][+ac]
//   name   a strategy of strategy_table() (ddp, fsdp, b-sdp, ...)
//   C      its active fraction (SDP strategies)
//   shard  +fsdp or +zero3 (full), +zero2 (grad), +zero1 (optimizer)
//   ac     +ac (every block checkpointed) or +ac:K (every K-th block)
// e.g. fsdp, fsdp+ac, b-sdp:0.6875+fsdp+ac, n-sdp:0.5+zero2, ddp+zero1,
// bb-sdp:0.5+ac:2. The suffixes may come in either order, each at most once.
#include <optional>
#include <string>
#include <string_view>

#include "engine/parallel/parallel_settings.h"
#include "models/common/recompute_policy.h"
#include "engine/optim/shard_level.h"

namespace sdp {

// The valid forms, for messages and help texts.
inline constexpr const char* kCompositionForms =
    "name[:C][+fsdp|+zero1|+zero2|+zero3][+ac|+ac:K]";

struct Composition {
  std::string strategy;                   // a name of strategy_table()
  std::optional<double> active_fraction;  // C as written; nullopt: not written
  std::optional<ShardLevel> shard;        // nullopt: the strategy's own level
  RecomputePolicy recompute;              // none unless +ac

  // Whether this is the strategy alone, nothing sharded or recomputed.
  bool plain() const { return !shard && !recompute.enabled(); }
  // Sets the strategy, C (when written), shard and activation_checkpointing
  // of `s`; the plan and group fields stay as they are.
  void apply_to(ParallelSettings& s) const;
};

// Throws sdp::Error saying which part of `item` is wrong and what is valid
// (the caller names the item). C is only parsed here; its range and whether
// the strategy takes one are ParallelSettings::validate's to judge.
Composition parse_composition(std::string_view item);

}  // namespace sdp
