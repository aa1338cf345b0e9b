#pragma once
// sdp-train's reports of a classifier's top-k accuracies (TopKAccuracy):
// the keys of the metrics lines, the text of the printed evaluation lines
// and the final summary. Token models count none, and every function here
// then adds nothing, so their output is unchanged.
#include <cstddef>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/metrics/top_k_accuracy.h"
#include "engine/train/trainer.h"

namespace sdp::app {

// A step's metrics line: "top1", "top5" (the step's training forwards over
// all ranks' examples; null where the loss is).
void write_train_accuracy(nlohmann::json& line, const StepResult& step);
// An evaluation: "<prefix>top1", ... of the full model and, with
// `subnets`, "eval_subnet_top1": [by rank], ... of each rank's subnetwork.
void write_eval_accuracy(nlohmann::json& record, const std::string& prefix,
                         const EvalResult& eval, bool subnets);
// " (top-1 45.3%, top-5 90.6%)" after a printed loss; "" when not counted.
std::string accuracy_suffix(const TopKAccuracy& accuracy);
// " (top-1 40.6..45.3%)": the range of the subnetworks' top-1; "" when not
// counted.
std::string subnet_accuracy_range(const std::vector<TopKAccuracy>& subnets);

// The mean training accuracy of the last `steps` steps, continued from a
// resumed run's metrics records so that its summary equals an uninterrupted
// run's.
class RecentAccuracy {
 public:
  RecentAccuracy(std::vector<int> k, size_t steps) : k_(std::move(k)), steps_(steps) {}
  // Step records oldest first (their "top1", ... keys; absent or null: NaN).
  void resume(const std::vector<nlohmann::json>& records);
  void add(const TopKAccuracy& step);
  TopKAccuracy mean() const;

 private:
  void push(std::vector<double> values);
  std::vector<int> k_;
  size_t steps_;
  std::deque<std::vector<double>> recent_;
};

// The final lines: train accuracy over the last steps, the full model's and
// (with `subnets`) each subnetwork's at the last evaluation. Nothing for a
// model without accuracies.
void print_final_accuracy(const TopKAccuracy& recent_train, size_t recent_steps,
                          const EvalResult& last_eval, bool subnets);

}  // namespace sdp::app
