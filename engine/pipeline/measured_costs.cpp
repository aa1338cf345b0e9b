#include "engine/pipeline/measured_costs.h"

#include "engine/core/error.h"

namespace sdp::pipeline {

SimulationCosts measured_costs(const Schedule& schedule, const Timeline& timeline,
                               std::vector<int64_t> boundary_bytes) {
  check_timeline(schedule, timeline);
  const int P = schedule.num_stages();
  SimulationCosts out;
  out.boundary_bytes = std::move(boundary_bytes);
  for (int s = 0; s < P; ++s) {
    // Summed durations and counts of F, B, I, W.
    double sum[4] = {0, 0, 0, 0};
    int count[4] = {0, 0, 0, 0};
    const auto& actions = schedule.stages[static_cast<size_t>(s)];
    for (size_t k = 0; k < actions.size(); ++k) {
      if (!runs_compute(actions[k].kind)) continue;
      const ActionTiming& t = timeline.timings[static_cast<size_t>(s)][k];
      const auto kind = static_cast<size_t>(actions[k].kind);
      sum[kind] += t.end - t.start;
      ++count[kind];
    }
    auto mean = [&](ActionKind k) {
      const auto i = static_cast<size_t>(k);
      return count[i] > 0 ? sum[i] / count[i] : -1.0;
    };
    StageCosts c;
    c.forward = mean(ActionKind::forward);
    SDP_CHECK(c.forward >= 0, "measured costs: stage ", s, " ran no forward");
    const double b = mean(ActionKind::backward), i = mean(ActionKind::input_grad),
                 w = mean(ActionKind::weight_grad);
    if (i >= 0 && w >= 0) {
      c.input_grad = i;
      c.weight_grad = w;
      c.backward = b >= 0 ? b : i + w;
    } else {
      SDP_CHECK(b >= 0, "measured costs: stage ", s, " ran no backward");
      c.backward = b;
      c.input_grad = c.weight_grad = b / 2;
    }
    out.stages.push_back(c);
  }
  return out;
}

}  // namespace sdp::pipeline
