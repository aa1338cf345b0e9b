#include "engine/metrics/top_k_accuracy.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace sdp {

TopKAccuracy TopKAccuracy::of(const std::vector<int>& k, std::span<const double> correct,
                              double examples) {
  TopKAccuracy a = unknown(k);
  if (!(examples > 0) || !std::isfinite(examples)) return a;
  for (size_t i = 0; i < k.size() && i < correct.size(); ++i) a.value[i] = correct[i] / examples;
  return a;
}

TopKAccuracy TopKAccuracy::unknown(const std::vector<int>& k) {
  return {k, std::vector<double>(k.size(), std::numeric_limits<double>::quiet_NaN())};
}

double TopKAccuracy::at(int which) const {
  for (size_t i = 0; i < k.size(); ++i)
    if (k[i] == which) return value[i];
  return std::numeric_limits<double>::quiet_NaN();
}

void TopKAccuracy::write(nlohmann::json& record, const std::string& prefix) const {
  for (size_t i = 0; i < k.size(); ++i) {
    const std::string key = prefix + "top" + std::to_string(k[i]);
    if (std::isnan(value[i]))
      record[key] = nullptr;
    else
      record[key] = value[i];
  }
}

std::string TopKAccuracy::text() const {
  std::string out;
  for (size_t i = 0; i < k.size(); ++i) {
    char item[48];
    std::snprintf(item, sizeof item, "%stop-%d %.1f%%", i ? ", " : "", k[i], 100.0 * value[i]);
    out += item;
  }
  return out;
}

}  // namespace sdp
