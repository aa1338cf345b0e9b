#include "engine/metrics/memory_report.h"

#include <cstdio>

namespace sdp {

MemorySnapshot MemorySnapshot::of(const MemoryStats& s,
                                  const std::optional<DeviceMemoryInfo>& device) {
  MemorySnapshot m;
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const auto c = static_cast<MemCategory>(i);
    m.current[c] = s.current(c);
    m.at_peak[c] = s.at_peak(c);
    m.peak[c] = s.peak(c);
  }
  m.current_total = s.current_total();
  m.peak_total = s.peak_total();
  for (Phase p : kPhasesByName) m.phase_peak[p] = s.phase_peak(p);
  if (s.tracks_reserved()) m.reserved = Reserved{s.reserved(), s.peak_reserved()};
  m.device = device;
  return m;
}

nlohmann::json MemorySnapshot::to_json() const {
  nlohmann::json cur, at, by_cat, phases;
  for (size_t i = 0; i < kMemCategoryCount; ++i) {
    const auto c = static_cast<MemCategory>(i);
    const std::string name(category_name(c));
    cur[name] = current[c];
    at[name] = at_peak[c];
    by_cat[name] = peak[c];
  }
  cur["total"] = current_total;
  for (Phase p : kPhasesByName) phases[std::string(phase_name(p))] = phase_peak[p];
  nlohmann::json out = {
      {"current", cur},
      {"peak", {{"total", peak_total}, {"at_peak", at}, {"by_category", by_cat}}},
      {"phase_peak", phases}};
  if (reserved) out["reserved"] = {{"current", reserved->current}, {"peak", reserved->peak}};
  if (device) out["device"] = {{"free", device->free_bytes}, {"total", device->total_bytes}};
  if (gemm_workspace) out["gemm_workspace"] = *gemm_workspace;
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
