#include "apps/sdp-train/rank_report.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "engine/metrics/memory_report.h"

namespace sdp::app {

namespace {

nlohmann::json summarize(const std::vector<double>& v) {
  double lo = 0, hi = 0, sum = 0;
  int n = 0;
  nlohmann::json by_rank = nlohmann::json::array();
  for (double x : v) {
    if (std::isnan(x)) {
      by_rank.push_back(nullptr);
      continue;
    }
    by_rank.push_back(x);
    lo = n == 0 ? x : std::min(lo, x);
    hi = n == 0 ? x : std::max(hi, x);
    sum += x;
    ++n;
  }
  if (n == 0) return {{"by_rank", by_rank}};
  return {{"min", lo}, {"mean", sum / n}, {"max", hi}, {"by_rank", by_rank}};
}

}  // namespace

nlohmann::json RankFigures::to_json() const {
  nlohmann::json j = {{"peak_bytes", summarize(peak_bytes)},
                      {"sent_bytes", summarize(sent_bytes)},
                      {"flops", summarize(flops)}};
  if (!stage.empty()) {
    j["stage"] = summarize(stage);
    j["bubble"] = summarize(bubble);
    j["pipeline_bytes"] = summarize(pipeline_bytes);
    j["activation_peak_bytes"] = summarize(activation_peak_bytes);
  }
  for (size_t i = 0; i < top_k.size(); ++i)
    j["train_top" + std::to_string(top_k[i])] = summarize(train_accuracy[i]);
  return j;
}

RankFigures gather_rank_figures(comm::Communicator& world, const StepResult& step) {
  static CpuAllocator host;
  const int n = world.size();
  // 7 figures, then the rank's training accuracies (classifiers).
  const int accuracies = static_cast<int>(step.rank_accuracy.k.size());
  const int kFigures = 7 + accuracies;
  OwnedTensor mine(host, {kFigures}, DType::f64, MemCategory::comm);      // [7 + K]
  OwnedTensor all(host, {kFigures * n}, DType::f64, MemCategory::comm);   // [world, 7 + K]
  const std::optional<StageStats>& stage = step.pipeline;
  const bool pipelined = stage.has_value();
  double* m = mine->data<double>();
  m[0] = static_cast<double>(step.memory.peak_total);
  m[1] = step.comm.total().sent_bytes;
  m[2] = step.flops;
  m[3] = stage ? stage->stage : 0.0;
  m[4] = stage ? stage->bubble_fraction : 0.0;
  m[5] = stage ? static_cast<double>(stage->activation_bytes_sent) +
                     static_cast<double>(stage->gradient_bytes_sent)
               : 0.0;
  m[6] = stage ? static_cast<double>(step.memory.peak[MemCategory::activation]) : 0.0;
  for (int i = 0; i < accuracies; ++i) m[7 + i] = step.rank_accuracy.value[static_cast<size_t>(i)];
  double* a = all->data<double>();
  std::fill(a, a + kFigures * n, std::numeric_limits<double>::quiet_NaN());
  world.all_gather(*mine, *all);
  RankFigures f;
  f.top_k = step.rank_accuracy.k;
  f.train_accuracy.resize(static_cast<size_t>(accuracies));
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < accuracies; ++i)
      f.train_accuracy[static_cast<size_t>(i)].push_back(a[kFigures * r + 7 + i]);
    f.peak_bytes.push_back(a[kFigures * r]);
    f.sent_bytes.push_back(a[kFigures * r + 1]);
    f.flops.push_back(a[kFigures * r + 2]);
    if (!pipelined) continue;
    f.stage.push_back(a[kFigures * r + 3]);
    f.bubble.push_back(a[kFigures * r + 4]);
    f.pipeline_bytes.push_back(a[kFigures * r + 5]);
    f.activation_peak_bytes.push_back(a[kFigures * r + 6]);
  }
  return f;
}

void print_rank_figures(const RankFigures& f) {
  const bool pipelined = !f.stage.empty();
  std::printf("%-6s %14s %16s %16s", "rank", "peak memory", "sent per step", "GFLOP per step");
  if (pipelined) std::printf(" %6s %8s %16s %16s", "stage", "bubble", "to neighbours", "activation peak");
  for (int k : f.top_k) std::printf(" %12s", ("train top-" + std::to_string(k)).c_str());
  std::printf("\n");
  for (size_t r = 0; r < f.peak_bytes.size(); ++r) {
    if (std::isnan(f.peak_bytes[r])) continue;  // emulated: other ranks unknown
    std::printf("%-6zu %14s %16s %16.3f", r, human_bytes(f.peak_bytes[r]).c_str(),
                human_bytes(f.sent_bytes[r]).c_str(), f.flops[r] / 1e9);
    if (pipelined)
      std::printf(" %6.0f %7.1f%% %16s %16s", f.stage[r], 100.0 * f.bubble[r],
                  human_bytes(f.pipeline_bytes[r]).c_str(),
                  human_bytes(f.activation_peak_bytes[r]).c_str());
    for (const std::vector<double>& accuracy : f.train_accuracy) {
      if (std::isnan(accuracy[r]))
        std::printf(" %12s", "-");  // nothing computed (meta, a stage without the loss)
      else
        std::printf(" %11.1f%%", 100.0 * accuracy[r]);
    }
    std::printf("\n");
  }
}

std::string plan_text(const Trainer& trainer) {
  const SubnetLayout& L = trainer.layout();
  std::string out = format("subnet plan: ", L.describe(), ", ", L.plan.components(), " ",
                           granularity_name(L.spec.granularity), " components on ", L.world,
                           " ranks\n");
  out += L.plan.table(L.component_names);
  out += format("storage groups (one bucket and one collective each): ", L.groups.size(), "\n");
  return out;
}

std::string pipeline_text(const Trainer& trainer) {
  const SubnetLayout& L = trainer.layout();
  const TrainConfig& c = trainer.config();
  const int blocks = trainer.model().block_count();
  std::string out = format("pipeline: ", L.stage_count(), " stages x ", L.replicas, " replica",
                           L.replicas == 1 ? "" : "s", ", schedule ", c.parallel.schedule, ", ",
                           c.grad_accum, " micro-batches per step\n");
  for (int s = 0; s < L.stage_count(); ++s) {
    // A stage's replicas are consecutive ranks (rank_mesh.h).
    const std::vector<int> ranks = L.mesh.line(L.mesh.rank_at(s, 0), MeshAxis::data);
    out += format("  stage ", s, ": ", L.stages[static_cast<size_t>(s)].describe(blocks),
                  " on rank", ranks.size() == 1 ? " " : "s ", ranks.front(),
                  ranks.size() == 1 ? std::string() : format("..", ranks.back()), "\n");
  }
  return out;
}

}  // namespace sdp::app
