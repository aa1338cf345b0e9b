#include "engine/parallel/world_fit.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace sdp {

std::optional<std::string> world_mismatch(int64_t config_world, int job_world) {
  if (config_world <= 0 || config_world == job_world) return std::nullopt;
  return format("world = ", config_world, " (the ranks this config is for) but this job has ",
                job_world, job_world == 1 ? " rank" : " ranks",
                ": its active_fraction and per-rank batch were chosen for ", config_world,
                " ranks; start it on ", config_world, " (mpirun -np ", config_world,
                ", or --emulate-world ", config_world, " for one emulated rank), or set --world ",
                job_world, " (or 0 for any) to run it on ", job_world, " anyway");
}

std::optional<std::string> ownership_shortfall(const ParallelSettings& settings,
                                               const SubnetPlan& plan) {
  const double C = settings.active_fraction;
  if (!settings.subnetworks() || C >= 1.0 || plan.components() == 0) return std::nullopt;
  const int N = plan.world();
  int fewest = N, most = 0;
  for (int k = 0; k < plan.components(); ++k) {
    const int owners = static_cast<int>(plan.owners(k).size());
    fewest = std::min(fewest, owners);
    most = std::max(most, owners);
  }
  const std::string asked = format(settings.strategy, " with C = ", C, " on ", N,
                                   N == 1 ? " rank" : " ranks");
  // The fewest ranks on which this C gives 2 <= round(C N) < N owners (halves
  // rounded up): C N >= 1.5, and N (1 - C) > 0.5.
  const int ranks_for_c =
      std::max({3, static_cast<int>(std::ceil(1.5 / C - 1e-9)),
                static_cast<int>(std::floor(0.5 / (1.0 - C) + 1e-9)) + 1});
  if (fewest == N)
    return format(asked,
                  N == 1 ? ": its one rank owns every component"
                         : format(" gives every component all ", N, " ranks as owners"),
                  ": every rank trains the whole model, which is DDP, not subnetworks; run on at "
                  "least ", ranks_for_c, " ranks (mpirun -np ", ranks_for_c, ") for C = ", C,
                  " (2 <= round(C N) < N owners per component)");
  if (fewest == 1 && N > 1) {
    std::string text = format(
        asked, " gives ", most == 1 ? "every component" : "some components", " 1 owner of ", N,
        ": their gradients are averaged with no other rank's, so each is trained on one rank's "
        "data alone (spectral gap ", format_fixed(plan.spectral_gap(), 4), "); run on at least ",
        ranks_for_c, " ranks (mpirun -np ", ranks_for_c, ") for C = ", C, " (2 <= round(C N) < N owners per component)");
    if (N >= 3)  // the smallest C of two decimals with round(C N) >= 2
      text += format(", or set --active-fraction to at least ",
                     format_fixed(std::ceil(150.0 / N - 1e-9) / 100.0, 2), " on ", N, " ranks");
    return text;
  }
  return std::nullopt;
}

}  // namespace sdp
