#pragma once
// Whether a job's world fits what it was configured for, checked before
// training so that a mismatch is said at once rather than found in the
// results:
//   world_mismatch      a config written for N ranks (TrainConfig::world,
//                       recorded by sdp-plan --write-config) started on M:
//                       refused, since its C and per-rank batch were chosen
//                       for N;
//   ownership_shortfall an SDP strategy whose plan on this world is not the
//                       subnetworks it asked for (every component with a
//                       single owner: no gradient averaging; or with every
//                       rank as owner: the whole model, DDP): a warning.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/parallel/parallel_settings.h"
#include "engine/plan/subnet_plan.h"

namespace sdp {

// The refusal, naming both sizes and what to do, when `config_world` (> 0)
// differs from `job_world`; nothing when they agree or config_world is 0.
std::optional<std::string> world_mismatch(int64_t config_world, int job_world);

// One line (no trailing newline) saying what `settings` asked for, what
// `plan` over its `plan.world()` ranks (a pipeline's replicas per stage)
// gives, and what to do; nothing for a strategy without subnetworks, for
// C = 1, or for a plan with the subnetworks it asked for.
std::optional<std::string> ownership_shortfall(const ParallelSettings& settings,
                                               const SubnetPlan& plan);

}  // namespace sdp
