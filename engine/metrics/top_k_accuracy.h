#pragma once
// A classifier's top-k accuracies as the trainer reports them: for each k
// the model counts (Model::accuracy_top_k: top-1, and top-5 with at least
// 10 classes), the share of examples whose label is among the k largest
// logits of their row.
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdp {

struct TopKAccuracy {
  std::vector<int> k;         // ascending; empty: nothing counted (token models)
  std::vector<double> value;  // [k.size()] in [0, 1]; NaN where nothing was computed

  bool empty() const { return k.empty(); }
  // correct[i] / examples for each k[i]; NaN for every k when examples is 0
  // or not finite.
  static TopKAccuracy of(const std::vector<int>& k, std::span<const double> correct,
                         double examples);
  // NaN for every k (meta runs, an emulated rank, a pipeline stage without
  // the loss).
  static TopKAccuracy unknown(const std::vector<int>& k);
  // The value of `which` (a k of this accuracy), NaN when not counted.
  double at(int which) const;
  // Adds "<prefix>top<k>" for each k ("eval_" -> "eval_top1", "eval_top5");
  // NaN is written as null. Nothing when empty.
  void write(nlohmann::json& record, const std::string& prefix) const;
  // "top-1 45.3%, top-5 90.6%" ("" when empty).
  std::string text() const;
};

}  // namespace sdp
