#pragma once
// Numbers as the planner's reports print them.
#include <cmath>
#include <cstdio>
#include <string>

namespace sdp::planner {

// v with `digits` decimals; "n/a" for NaN (a ratio against zero).
inline std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Four significant digits: step times range from microseconds (a small
// model) to seconds.
inline std::string significant(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace sdp::planner
