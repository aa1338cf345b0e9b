#pragma once
// The integer fields of a model's config.json, read exactly as written: a
// float (even 4.0), a string, null, or a value beyond the bound is an error
// naming the field and showing the value (engine/core/json_integer.h), never
// truncated, wrapped or reported as a bare type error. The bound keeps every
// product of two sizes within int64; each config's validate() checks the rest.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::model_config {

inline constexpr int64_t kMaxSize = int64_t{1} << 24;

inline int64_t size(const nlohmann::json& j, const std::string& key) {
  if (!j.contains(key)) fail("config.json: missing field '", key, "'");
  return json_integer<int64_t>(j.at(key), "config.json: " + key,
                               std::numeric_limits<int64_t>::min(), kMaxSize);
}

inline int64_t size_or(const nlohmann::json& j, const std::string& key, int64_t fallback) {
  return j.contains(key) ? size(j, key) : fallback;
}

// A list of sizes with at most `max_count` entries.
inline std::vector<int64_t> sizes(const nlohmann::json& j, const std::string& key,
                                  size_t max_count) {
  if (!j.contains(key)) fail("config.json: missing field '", key, "'");
  const nlohmann::json& list = j.at(key);
  if (!list.is_array() || list.size() > max_count)
    fail("config.json: ", key, " = ", list.dump(), " is invalid (valid: a list of at most ",
         max_count, " integers)");
  std::vector<int64_t> out;
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(json_integer<int64_t>(list[i], format("config.json: ", key, "[", i, "]"),
                                        std::numeric_limits<int64_t>::min(), kMaxSize));
  return out;
}

}  // namespace sdp::model_config
