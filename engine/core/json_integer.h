#pragma once
// Integers read from JSON files (checkpoint indexes, schedules, plans,
// configs, calibration files), checked in the type they are declared with
// before anything uses them. nlohmann's get<int>() converts silently:
// 4294967296 becomes 0 and 2^31 becomes -2147483648. Here such a value, a
// float (even 4.0), a string or null is an error that shows the value as it
// was written and the valid range.
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sdp {

// True when `v` is a JSON integer within [lo, hi] (compared exactly, without
// converting through a narrower or floating type).
inline bool json_integer_in_range(const nlohmann::json& v, int64_t lo, uint64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u <= hi && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  }
  if (!v.is_number_integer()) return false;
  const int64_t i = v.get<int64_t>();
  if (i < lo) return false;
  return i < 0 || static_cast<uint64_t>(i) <= hi;
}

// `v` as an Int within [lo, hi] (by default Int's whole range). Otherwise
// throws sdp::Error: "<what> = <v as written> is invalid (valid: an integer
// in [lo, hi])". `what` names the file and field, e.g.
// "sdp_shards.json: tensors[3].axis".
template <typename Int>
Int json_integer(const nlohmann::json& v, const std::string& what,
                 Int lo = std::numeric_limits<Int>::min(),
                 Int hi = std::numeric_limits<Int>::max()) {
  static_assert(std::numeric_limits<Int>::is_integer, "json_integer reads integer types");
  if (!json_integer_in_range(v, static_cast<int64_t>(lo), static_cast<uint64_t>(hi)))
    fail(what, " = ", v.dump(), " is invalid (valid: an integer in [", +lo, ", ", +hi, "])");
  return v.get<Int>();
}

}  // namespace sdp
