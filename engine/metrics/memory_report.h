#pragma once
// Memory figures as reported in metrics and summaries: bytes currently held
// and the peak of the current window (one step), both by category, plus the
// per-phase peaks. See docs/ARCHITECTURE.md "Measurements".
#include <nlohmann/json.hpp>

#include <optional>

#include "engine/core/caching_pool.h"
#include "engine/core/memory_stats.h"

namespace sdp {

// {"current": {...}, "peak": {"total": B, "at_peak": {cat: B}, "by_category": {cat: B}},
//  "phase_peak": {phase: B}}
// plus, for a caching device allocator, "reserved": {"current": B, "peak": B}
// (bytes held from the driver, cached blocks included), and when the driver
// was asked, "device": {"free": B, "total": B} (cudaMemGetInfo: the whole
// device, every process and library included).
nlohmann::json memory_json(const MemoryStats& stats,
                           const std::optional<DeviceMemoryInfo>& device = std::nullopt);

// "12.3 MiB"
std::string human_bytes(double bytes);

}  // namespace sdp
