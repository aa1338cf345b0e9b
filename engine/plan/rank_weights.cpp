#include "engine/plan/rank_weights.h"

#include <cmath>

#include "engine/checkpoint/byte_size.h"
#include "engine/core/error.h"

namespace sdp {

std::vector<double> parse_rank_weights(const std::string& list) {
  std::vector<double> out;
  const auto bad = [&](const std::string& item, const std::string& why) {
    fail("rank weights '", list, "': item '", item, "' ", why,
         " (valid: comma-separated sizes such as 80GiB or numbers > 0, each optionally "
         "followed by xCOUNT to repeat it, e.g. 80GiBx4,40GiBx4)");
  };
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::string value = item;
    long long count = 1;
    if (const size_t x = item.rfind('x'); x != std::string::npos && x + 1 < item.size()) {
      size_t used = 0;
      try {
        count = std::stoll(item.substr(x + 1), &used);
      } catch (const std::exception&) {
        bad(item, "has a repeat count that is not a number");
      }
      if (used != item.size() - x - 1 || count < 1 || count > (1 << 20))
        bad(item, "has a repeat count that is not an integer in [1, 1048576]");
      value = item.substr(0, x);
    }
    if (value.empty()) bad(item, "is empty");
    double weight = 0;
    const bool digits_only = value.find_first_not_of("0123456789.eE+-") == std::string::npos;
    try {
      weight = digits_only ? std::stod(value)
                           : static_cast<double>(checkpoint::parse_byte_size(value, "rank weight"));
    } catch (const std::exception&) {
      bad(item, "is not a size or a number");
    }
    if (!(weight > 0) || !std::isfinite(weight)) bad(item, "is not > 0");
    out.insert(out.end(), static_cast<size_t>(count), weight);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace sdp
