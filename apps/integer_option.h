#pragma once
// A CLI11 check that a flag's text is an integer in [lo, hi], parsed in the
// field's own type. CLI11 alone wraps "-1" into an unsigned field (2^64 - 1)
// and saturates values beyond the type; this check refuses both, and --help
// shows the range beside the flag.
#include <charconv>
#include <string>

#include <CLI/CLI.hpp>

namespace sdp::app {

template <typename Int>
CLI::Validator integer_in(Int lo, Int hi) {
  const std::string range = "[" + std::to_string(+lo) + ", " + std::to_string(+hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        Int value{};
        const char* end = text.data() + text.size();
        // from_chars takes no '+' and, for unsigned types, no '-'.
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec != std::errc() || ptr != end || value < lo || value > hi)
          return "'" + text + "' is invalid (valid: an integer in " + range + ")";
        return "";
      },
      range);
}

}  // namespace sdp::app
