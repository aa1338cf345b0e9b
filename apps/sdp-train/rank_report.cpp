#include "apps/sdp-train/rank_report.h"

#include <cmath>
#include <cstdio>
#include <limits>

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
  return {{"peak_bytes", summarize(peak_bytes)},
          {"sent_bytes", summarize(sent_bytes)},
          {"flops", summarize(flops)}};
}

RankFigures gather_rank_figures(comm::Communicator& world, const StepResult& step) {
  static CpuAllocator host;
  const int n = world.size();
  constexpr int kFigures = 3;
  OwnedTensor mine(host, {kFigures}, DType::f64, MemCategory::comm);      // [3]
  OwnedTensor all(host, {kFigures * n}, DType::f64, MemCategory::comm);   // [world, 3]
  mine->data<double>()[0] = step.memory["peak"]["total"].get<double>();
  mine->data<double>()[1] = step.comm["sent_bytes"].get<double>();
  mine->data<double>()[2] = step.flops;
  double* a = all->data<double>();
  std::fill(a, a + kFigures * n, std::numeric_limits<double>::quiet_NaN());
  world.all_gather(*mine, *all);
  RankFigures f;
  for (int r = 0; r < n; ++r) {
    f.peak_bytes.push_back(a[kFigures * r]);
    f.sent_bytes.push_back(a[kFigures * r + 1]);
    f.flops.push_back(a[kFigures * r + 2]);
  }
  return f;
}

void print_rank_figures(const RankFigures& f) {
  std::printf("%-6s %14s %16s %16s\n", "rank", "peak memory", "sent per step", "GFLOP per step");
  for (size_t r = 0; r < f.peak_bytes.size(); ++r) {
    if (std::isnan(f.peak_bytes[r])) continue;  // emulated: other ranks unknown
    std::printf("%-6zu %14s %16s %16.3f\n", r, human_bytes(f.peak_bytes[r]).c_str(),
                human_bytes(f.sent_bytes[r]).c_str(), f.flops[r] / 1e9);
  }
}

std::string plan_text(const Trainer& trainer) {
  const SubnetLayout& L = trainer.layout();
  std::string out = format("subnet plan: ", L.spec.describe(), ", ", L.plan.components(), " ",
                           granularity_name(L.spec.granularity), " components on ", L.world,
                           " ranks\n");
  out += L.plan.table(L.component_names);
  out += format("storage groups (one bucket and one collective each): ", L.groups.size(), "\n");
  return out;
}

}  // namespace sdp::app
