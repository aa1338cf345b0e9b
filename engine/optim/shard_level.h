#pragma once
// How much of a storage group's training state is partitioned over the
// ranks that share it (ZeRO stages; FSDP is `full`):
//   none       parameters, gradients and AdamW state whole on every holder
//   optimizer  (ZeRO-1) AdamW moments and f32 master values as shards;
//              gradients and parameters whole
//   grad       (ZeRO-2) gradients too: whole only while backward produces
//              them, then reduce-scattered into shards
//   full       (ZeRO-3 / FSDP) parameters too: whole only while a site of
//              the model reads them (gathered before, freed after)
// A group is cut into `parts` equal shards (its flat buffer padded with
// zeros to a multiple of parts); this rank keeps shard `index`. A group cut
// into one part is stored whole, whatever the level.
#include <cstdint>
#include <optional>
#include <string_view>

namespace sdp {

enum class ShardLevel : uint8_t { none, optimizer, grad, full };

constexpr std::string_view shard_level_name(ShardLevel s) {
  constexpr std::string_view names[] = {"none", "optimizer", "grad", "full"};
  return names[static_cast<size_t>(s)];
}

// "none" | "optimizer" | "grad" | "full"; nullopt for anything else.
constexpr std::optional<ShardLevel> parse_shard_level(std::string_view s) {
  for (ShardLevel l : {ShardLevel::none, ShardLevel::optimizer, ShardLevel::grad, ShardLevel::full})
    if (s == shard_level_name(l)) return l;
  return std::nullopt;
}

// The partition of one storage group on this rank.
struct GroupShard {
  ShardLevel level = ShardLevel::none;
  int parts = 1;  // ranks the group is partitioned over
  int index = 0;  // this rank's shard, in [0, parts)
  // Whether anything is actually cut (a level over one part is whole).
  bool sharded() const { return level != ShardLevel::none && parts > 1; }
  bool shards_optimizer() const { return sharded(); }
  bool shards_grads() const { return sharded() && level >= ShardLevel::grad; }
  bool shards_params() const { return sharded() && level == ShardLevel::full; }
};

}  // namespace sdp
