#include "engine/parallel/strategy_table.h"

#include <array>

namespace sdp {

namespace {

using G = Granularity;
using M = Masking;

constexpr std::array<StrategyRow, 6> kRows = {{
    {"ddp", "DDP", G::block, M::forward, false, std::nullopt, "the whole model on every rank"},
    {"fsdp", "FSDP", G::block, M::forward, false, ShardLevel::full, "= ddp with --shard full"},
    {"b-sdp", "B-SDP", G::block, M::forward, true, std::nullopt, "blocks"},
    {"n-sdp", "N-SDP", G::neuron, M::forward, true, std::nullopt,
     "FFN units + heads, or ResNet channels"},
    {"bb-sdp", "Bb-SDP", G::block, M::backward, true, std::nullopt, "blocks, backward masking"},
    {"nb-sdp", "Nb-SDP", G::neuron, M::backward, true, std::nullopt,
     "neuron groups, backward masking"},
}};

}  // namespace

std::span<const StrategyRow> strategy_table() { return kRows; }

const StrategyRow* find_strategy(std::string_view name) {
  for (const StrategyRow& row : kRows)
    if (row.name == name) return &row;
  return nullptr;
}

std::string strategy_names() {
  std::string out;
  for (const StrategyRow& row : kRows) {
    if (!out.empty()) out += ", ";
    out += row.name;
  }
  return out;
}

std::string strategy_help() {
  std::string out;
  for (const StrategyRow& row : kRows) {
    if (!out.empty()) out += ", ";
    out += std::string(row.name) + " (" + std::string(row.help) + ")";
  }
  return out;
}

std::string_view shard_label(ShardLevel level) {
  switch (level) {
    case ShardLevel::none: return "";
    case ShardLevel::optimizer: return "ZeRO-1";
    case ShardLevel::grad: return "ZeRO-2";
    case ShardLevel::full: return "FSDP";
  }
  return "";
}

}  // namespace sdp
