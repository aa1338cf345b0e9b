#pragma once
// The costs file of a pipeline simulation: what sdp-pipeline --costs reads
// and a pipelined sdp-train run writes from its measured actions
// (apps/sdp-pipeline/README.md):
//   {"stages": [{"forward": s, "backward": s, "input_grad": s, "weight_grad": s,
//                "activation_bytes": n, "weight_grad_bytes": n}, ...],
//    "boundary_bytes": [n, ...],
//    "link": {"latency": s, "bandwidth": bytes_per_s}}
// Every key may be left out and then takes the simulator's default
// (schedule_simulator.h: F = I = W = 1, B = 2, 1 activation byte, 0 W bytes;
// no boundary bytes; latency 0; bandwidth 0 = infinite). Unknown keys, wrong
// types and negative values are refused, naming the key.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/pipeline/schedule_simulator.h"

namespace sdp::pipeline {

// The text --help shows for --costs.
extern const char* const kCostsForm;

// Refuses a file with a number of stages other than `stages` (when it lists
// any) or boundary_bytes other than stages - 1, naming the file.
SimulationCosts costs_from_json(const nlohmann::json& j, int stages);
SimulationCosts load_costs(const std::string& path, int stages);
// The same form, every key written; costs_from_json reads it back exactly.
nlohmann::json costs_to_json(const SimulationCosts& costs);

}  // namespace sdp::pipeline
