#pragma once
// Memory figures as reported in metrics and summaries: bytes currently held
// and the peak of the current window (one step), both by category, plus the
// per-phase peaks. See DESIGN.md "Measurements".
#include <nlohmann/json.hpp>

#include "engine/core/memory_stats.h"

namespace sdp {

// {"current": {...}, "peak": {"total": B, "at_peak": {cat: B}, "by_category": {cat: B}},
//  "phase_peak": {phase: B}}
nlohmann::json memory_json(const MemoryStats& stats);

// "12.3 MiB"
std::string human_bytes(double bytes);

}  // namespace sdp
