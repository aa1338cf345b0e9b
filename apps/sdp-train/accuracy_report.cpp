#include "apps/sdp-train/accuracy_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace sdp::app {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string key(const std::string& prefix, int k) { return prefix + "top" + std::to_string(k); }

}  // namespace

void write_train_accuracy(nlohmann::json& line, const StepResult& step) {
  step.accuracy.write(line, "");
}

void write_eval_accuracy(nlohmann::json& record, const std::string& prefix,
                         const EvalResult& eval, bool subnets) {
  eval.full_accuracy.write(record, prefix);
  if (!subnets || eval.subnet_accuracy.empty()) return;
  const std::vector<int>& ks = eval.subnet_accuracy.front().k;
  for (size_t i = 0; i < ks.size(); ++i) {
    nlohmann::json by_rank = nlohmann::json::array();
    for (const TopKAccuracy& a : eval.subnet_accuracy) {
      if (std::isnan(a.value[i]))
        by_rank.push_back(nullptr);
      else
        by_rank.push_back(a.value[i]);
    }
    record[key("eval_subnet_", ks[i])] = by_rank;
  }
}

std::string accuracy_suffix(const TopKAccuracy& accuracy) {
  return accuracy.empty() ? std::string() : " (" + accuracy.text() + ")";
}

std::string subnet_accuracy_range(const std::vector<TopKAccuracy>& subnets) {
  double lo = kNaN, hi = kNaN;
  for (const TopKAccuracy& a : subnets) {
    const double top1 = a.at(1);
    if (std::isnan(top1)) continue;
    lo = std::isnan(lo) ? top1 : std::min(lo, top1);
    hi = std::isnan(hi) ? top1 : std::max(hi, top1);
  }
  if (std::isnan(lo)) return "";
  char text[64];
  std::snprintf(text, sizeof text, " (top-1 %.1f..%.1f%%)", 100.0 * lo, 100.0 * hi);
  return text;
}

void RecentAccuracy::push(std::vector<double> values) {
  recent_.push_back(std::move(values));
  while (recent_.size() > steps_) recent_.pop_front();
}

void RecentAccuracy::resume(const std::vector<nlohmann::json>& records) {
  if (k_.empty()) return;
  for (const nlohmann::json& record : records) {
    std::vector<double> values;
    for (int k : k_) {
      const auto it = record.find(key("", k));
      values.push_back(it != record.end() && it->is_number() ? it->get<double>() : kNaN);
    }
    push(std::move(values));
  }
}

void RecentAccuracy::add(const TopKAccuracy& step) {
  if (!k_.empty()) push(step.value);
}

TopKAccuracy RecentAccuracy::mean() const {
  TopKAccuracy out = TopKAccuracy::unknown(k_);
  if (recent_.empty()) return out;
  // Every step has the same examples: the mean of the steps' shares is the
  // share over all of them.
  for (size_t i = 0; i < k_.size(); ++i) {
    double sum = 0;
    for (const std::vector<double>& values : recent_) sum += values[i];
    out.value[i] = sum / static_cast<double>(recent_.size());
  }
  return out;
}

void print_final_accuracy(const TopKAccuracy& recent_train, size_t recent_steps,
                          const EvalResult& last_eval, bool subnets) {
  for (size_t i = 0; i < recent_train.k.size(); ++i) {
    const std::string label =
        "final train top-" + std::to_string(recent_train.k[i]) + " (last " +
        std::to_string(recent_steps) + ")";
    std::printf("%-28s %.2f%%\n", label.c_str(), 100.0 * recent_train.value[i]);
  }
  const TopKAccuracy& full = last_eval.full_accuracy;
  for (size_t i = 0; i < full.k.size(); ++i) {
    if (std::isnan(full.value[i])) continue;
    const std::string label = "final eval top-" + std::to_string(full.k[i]);
    std::printf("%-28s %.2f%%\n", label.c_str(), 100.0 * full.value[i]);
  }
  if (!subnets || last_eval.subnet_accuracy.empty()) return;
  const std::vector<int>& ks = last_eval.subnet_accuracy.front().k;
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string label = "final subnet eval top-" + std::to_string(ks[i]);
    std::printf("%-28s", label.c_str());
    for (const TopKAccuracy& a : last_eval.subnet_accuracy)
      std::printf(" %.2f%%", 100.0 * a.value[i]);
    std::printf("\n");
  }
}

}  // namespace sdp::app
