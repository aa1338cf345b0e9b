#include "engine/plan/rank_weights.h"

#include <cmath>

#include "engine/checkpoint/byte_size.h"
#include "engine/core/error.h"

namespace sdp {

namespace {

// A weight and how many ranks take it.
struct WeightRun {
  double weight = 0;
  int64_t count = 1;
};

constexpr int64_t kMaxRepeat = int64_t{1} << 20;

// The list as a message shows it: a list of thousands of items is cut.
std::string shown(const std::string& list) {
  constexpr size_t kShown = 80;
  return list.size() <= kShown ? list
                               : list.substr(0, kShown) + "... (" +
                                     std::to_string(list.size()) + " characters)";
}

}  // namespace

std::vector<double> parse_rank_weights(const std::string& list, int64_t max_ranks) {
  const auto bad = [&](const std::string& item, const std::string& why) {
    fail("rank weights '", shown(list), "': item '", shown(item), "' ", why,
         " (valid: comma-separated sizes such as 80GiB or numbers > 0, each optionally "
         "followed by xCOUNT to repeat it, e.g. 80GiBx4,40GiBx4)");
  };
  std::vector<WeightRun> runs;
  int64_t total = 0;  // the ranks the list names
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::string value = item;
    WeightRun run;
    if (const size_t x = item.rfind('x'); x != std::string::npos && x + 1 < item.size()) {
      size_t used = 0;
      long long count = 0;
      try {
        count = std::stoll(item.substr(x + 1), &used);
      } catch (const std::exception&) {
        bad(item, "has a repeat count that is not a number");
      }
      if (used != item.size() - x - 1 || count < 1 || count > kMaxRepeat)
        bad(item, format("has a repeat count that is not an integer in [1, ", kMaxRepeat, "]"));
      run.count = count;
      value = item.substr(0, x);
    }
    if (value.empty()) bad(item, "is empty");
    const bool digits_only = value.find_first_not_of("0123456789.eE+-") == std::string::npos;
    try {
      run.weight = digits_only
                       ? std::stod(value)
                       : static_cast<double>(checkpoint::parse_byte_size(value, "rank weight"));
    } catch (const std::exception&) {
      bad(item, "is not a size or a number");
    }
    if (!(run.weight > 0) || !std::isfinite(run.weight)) bad(item, "is not > 0");
    total += run.count;  // items x 2^20 at most: no overflow for any list in memory
    runs.push_back(run);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (total > max_ranks)
    fail("rank weights '", shown(list), "' name ", total, " ranks in total (the repeat counts ",
         "summed), more than ", max_ranks < config_limits::kWorld ? "the job's " : "the largest world of ",
         max_ranks, " ranks (valid: one weight per rank)");
  // Expanded only now, within the bound.
  std::vector<double> out;
  out.reserve(static_cast<size_t>(total));
  for (const WeightRun& run : runs) out.insert(out.end(), static_cast<size_t>(run.count), run.weight);
  return out;
}

}  // namespace sdp
