#include "engine/checkpoint/byte_size.h"

#include <cctype>
#include <limits>
#include <utility>

#include "engine/core/error.h"

namespace sdp::checkpoint {

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  auto invalid = [&]() {
    fail(what, " = '", text, "' is not a byte size; valid: a positive integer of bytes, "
         "optionally with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB "
         "(powers of 1024), e.g. 5GB, 500MB, 2GiB, 1048576");
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 19) invalid();
  const uint64_t number = std::stoull(text.substr(0, digits));
  std::string unit;
  for (char ch : text.substr(digits)) unit.push_back(static_cast<char>(std::tolower(ch)));
  constexpr uint64_t k = 1000, ki = 1024;
  const std::pair<const char*, uint64_t> units[] = {
      {"", 1},        {"b", 1},
      {"kb", k},      {"mb", k * k},   {"gb", k * k * k},    {"tb", k * k * k * k},
      {"kib", ki},    {"mib", ki * ki}, {"gib", ki * ki * ki}, {"tib", ki * ki * ki * ki}};
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    if (number == 0 || number > std::numeric_limits<uint64_t>::max() / scale) invalid();
    return number * scale;
  }
  invalid();
  return 0;  // not reached
}

}  // namespace sdp::checkpoint
