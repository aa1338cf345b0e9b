#include "comm/value_difference.h"

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sdp::comm {

ValueDifference describe_text_difference(const std::string& first, const std::string& second) {
  // Short values are shown whole; long ones from a little before the first
  // differing character, so that the difference fits in one line.
  constexpr size_t kShown = 60, kBefore = 20;
  size_t at = 0;
  while (at < first.size() && at < second.size() && first[at] == second[at]) ++at;
  auto excerpt = [&](const std::string& s) {
    if (s.size() <= kShown) return "'" + s + "'";
    const size_t start = at > kBefore ? at - kBefore : 0;
    return format(start > 0 ? "'..." : "'", s.substr(start, kShown),
                  start + kShown < s.size() ? "...'" : "'");
  };
  if (first.size() <= kShown && second.size() <= kShown)
    return {"", excerpt(first), excerpt(second)};
  return {format("from character ", at), excerpt(first), excerpt(second)};
}

ValueDifference describe_json_difference(const std::string& first, const std::string& second) {
  const nlohmann::json a = nlohmann::json::parse(first, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(second, nullptr, false);
  if (!a.is_object() || !b.is_object()) return describe_text_difference(first, second);
  auto shown = [](const nlohmann::json& object, const std::string& key) {
    const auto it = object.find(key);
    return it == object.end() ? std::string("(absent)") : it->dump();
  };
  for (const auto& [key, value] : a.items())
    if (!b.contains(key) || b.at(key) != value) return {key, value.dump(), shown(b, key)};
  for (const auto& [key, value] : b.items())
    if (!a.contains(key)) return {key, "(absent)", value.dump()};
  // Equal as JSON but not as text (key order, spacing).
  return describe_text_difference(first, second);
}

}  // namespace sdp::comm
