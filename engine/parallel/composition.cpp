#include "engine/parallel/composition.h"

#include <charconv>
#include <vector>

#include "engine/core/error.h"

namespace sdp {

namespace {

struct ShardToken {
  std::string_view token;
  ShardLevel level;
};
constexpr ShardToken kShardTokens[] = {{"fsdp", ShardLevel::full},
                                       {"zero1", ShardLevel::optimizer},
                                       {"zero2", ShardLevel::grad},
                                       {"zero3", ShardLevel::full}};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos
                                                                : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

std::optional<ShardLevel> shard_token(std::string_view token) {
  for (const ShardToken& t : kShardTokens)
    if (token == t.token) return t.level;
  return std::nullopt;
}

// "ac" or "ac:K"; nullopt for anything not starting with "ac".
std::optional<RecomputePolicy> ac_token(std::string_view token) {
  if (token == "ac") return RecomputePolicy{1};
  if (token.substr(0, 3) != "ac:") return std::nullopt;
  try {
    return RecomputePolicy::parse(format("every:", token.substr(3)), "");
  } catch (const Error&) {
    fail("'+", token, "' is invalid (valid: +ac, or +ac:K with K a positive integer)");
  }
}

}  // namespace

void Composition::apply_to(ParallelSettings& s) const {
  s.strategy = strategy;
  if (active_fraction) s.active_fraction = *active_fraction;
  s.shard = shard ? std::string(shard_level_name(*shard)) : std::string();
  s.activation_checkpointing = recompute.name();
}

Composition parse_composition(std::string_view item) {
  const std::vector<std::string_view> parts = split(item, '+');
  Composition c;
  const std::string_view head = parts.front();  // name[:C]
  const size_t colon = head.find(':');
  c.strategy = std::string(head.substr(0, colon));
  if (!find_strategy(c.strategy))
    fail("strategy '", c.strategy, "' is invalid (valid: ", strategy_names(), "; an item is ",
         kCompositionForms, ")");
  if (colon != std::string_view::npos) {
    const std::string_view text = head.substr(colon + 1);
    double v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
      fail("C = '", text, "' is not a number (expected ", kCompositionForms,
           " with C in (0, 1], e.g. b-sdp:0.5)");
    c.active_fraction = v;
  }
  std::string_view shard_written, ac_written;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view token = parts[i];
    if (const std::optional<ShardLevel> level = shard_token(token)) {
      if (!shard_written.empty())
        fail("two sharding parts ('+", shard_written, "' and '+", token, "'; at most one)");
      shard_written = token;
      c.shard = level;
    } else if (const std::optional<RecomputePolicy> ac = ac_token(token)) {
      if (!ac_written.empty())
        fail("two activation checkpointing parts ('+", ac_written, "' and '+", token,
             "'; at most one)");
      ac_written = token;
      c.recompute = *ac;
    } else {
      fail("'+", token, "' is invalid (valid after the strategy: +fsdp or +zero3 (full "
           "sharding), +zero2, +zero1, +ac or +ac:K (activation checkpointing); an item is ",
           kCompositionForms, ")");
    }
  }
  const StrategyRow& row = *find_strategy(c.strategy);
  if (row.implied_shard && c.shard && *c.shard != *row.implied_shard)
    fail(row.name, " means --shard ", shard_level_name(*row.implied_shard), "; for '+",
         shard_written, "' use ddp+", shard_written);
  return c;
}

}  // namespace sdp
