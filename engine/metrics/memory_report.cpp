#include "engine/metrics/memory_report.h"

#include <cstdio>

namespace sdp {

nlohmann::json memory_json(const MemoryStats& s, const std::optional<DeviceMemoryInfo>& device) {
  nlohmann::json current, at_peak, peak_by_cat, phases;
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const auto c = static_cast<MemCategory>(i);
    const std::string name(category_name(c));
    current[name] = s.current(c);
    at_peak[name] = s.at_peak(c);
    peak_by_cat[name] = s.peak(c);
  }
  current["total"] = s.current_total();
  for (size_t i = 1; i < kPhaseCount; ++i) {  // idle is not a training phase
    const auto p = static_cast<Phase>(i);
    phases[std::string(phase_name(p))] = s.phase_peak(p);
  }
  nlohmann::json out = {
      {"current", current},
      {"peak", {{"total", s.peak_total()}, {"at_peak", at_peak}, {"by_category", peak_by_cat}}},
      {"phase_peak", phases}};
  if (s.tracks_reserved())
    out["reserved"] = {{"current", s.reserved()}, {"peak", s.peak_reserved()}};
  if (device) out["device"] = {{"free", device->free_bytes}, {"total", device->total_bytes}};
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace sdp
