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
  // On more than one rank each holds m = round(C K) components (halves up;
  // subnet_plan.h), so a component has floor or ceil of m N / K owners: at
  // least 2 from N >= ceil(2 K / m) ranks on, and fewer than N while m < K.
  const int K = plan.components();
  const int m = std::max(1, static_cast<int>(std::floor(C * K + 0.5 + 1e-9)));
  const std::string where = format(" (2 <= owners per component < N: each rank holds round(C K) = ",
                                   m, " of the ", K, " components)");
  const int ranks_for_c = (2 * K + m - 1) / m;
  const std::string more_ranks = format("run on at least ", ranks_for_c, " ranks (mpirun -np ",
                                        ranks_for_c, ") for C = ", C, where);
  if (fewest == N) {
    if (m >= K && N > 1)  // C rounds to the whole model: no world makes subnetworks of it
      return format(asked, ": C K = ", format_fixed(C * K, 2), " rounds to all ", K,
                    " components per rank, which is DDP, not subnetworks; set --active-fraction "
                    "to at most ", format_fixed(std::floor(100.0 * (K - 1) / K) / 100.0, 2), " (",
                    K - 1, " of ", K, " components per rank)");
    return format(asked,
                  N == 1 ? ": its one rank owns every component"
                         : format(" gives every component all ", N, " ranks as owners"),
                  ": every rank trains the whole model, which is DDP, not subnetworks; ",
                  m < K ? more_ranks
                        : format("C K = ", format_fixed(C * K, 2), " rounds to all ", K,
                                 " components per rank on any world"));
  }
  if (fewest == 1 && N > 1) {
    std::string text = format(
        asked, " gives ", most == 1 ? "every component" : "some components", " 1 owner of ", N,
        ": their gradients are averaged with no other rank's, so each is trained on one rank's "
        "data alone (spectral gap ", format_fixed(plan.spectral_gap(), 4), "); ", more_ranks);
    // The smallest C of two decimals (rounded up) whose m gives 2 owners on N ranks.
    const int need = (2 * K + N - 1) / N;
    if (need < K)
      text += format(", or set --active-fraction to at least ",
                     format_fixed(std::ceil(100.0 * need / K - 1e-9) / 100.0, 2), " on ", N,
                     " ranks");
    return text;
  }
  return std::nullopt;
}

}  // namespace sdp
