#pragma once
// Simulation costs read off a measured timeline: per stage, the mean
// duration of each compute kind it ran, so that a schedule measured once
// can be simulated under other schedules, stage counts or links. A kind a
// stage did not run is derived from those it did: a whole backward B as
// I + W, a split pair I and W as half of B each (an approximation, since
// weight and input gradients rarely cost exactly the same: said so where
// it is used).
#include <cstdint>
#include <vector>

#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/timeline.h"

namespace sdp::pipeline {

// `boundary_bytes`: [P - 1] one message between stage s and s + 1 (or
// empty). The link is left at its defaults (latency 0, infinite bandwidth):
// a measured timeline's waits already include it.
SimulationCosts measured_costs(const Schedule& schedule, const Timeline& timeline,
                               std::vector<int64_t> boundary_bytes = {});

}  // namespace sdp::pipeline
