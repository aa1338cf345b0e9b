#pragma once
// Memory figures as reported in metrics and summaries: bytes currently held
// and the peak of the current window (one step), both by category, plus the
// per-phase peaks. See docs/ARCHITECTURE.md "Measurements".
#include <nlohmann/json.hpp>

#include <array>
#include <optional>

#include "engine/core/caching_pool.h"
#include "engine/core/memory_stats.h"

namespace sdp {

// Bytes by memory category: bytes[MemCategory::grad].
struct CategoryBytes {
  std::array<size_t, kMemCategoryCount> bytes{};
  size_t& operator[](MemCategory c) { return bytes[static_cast<size_t>(c)]; }
  size_t operator[](MemCategory c) const { return bytes[static_cast<size_t>(c)]; }
  bool operator==(const CategoryBytes&) const = default;
};

// Bytes by training phase (idle is not one and stays 0).
struct PhaseBytes {
  std::array<size_t, kPhaseCount> bytes{};
  size_t& operator[](Phase p) { return bytes[static_cast<size_t>(p)]; }
  size_t operator[](Phase p) const { return bytes[static_cast<size_t>(p)]; }
  bool operator==(const PhaseBytes&) const = default;
};

// The training phases in the order the JSON lists them (by name): text
// reports list them alike, and a tie for the step's peak goes to the same one.
inline constexpr std::array<Phase, kPhaseCount - 1> kPhasesByName = {
    Phase::backward, Phase::communication, Phase::forward, Phase::optimizer};

// One measurement window's memory (a training step's) of one allocator.
struct MemorySnapshot {
  CategoryBytes current;      // held at the end of the window
  size_t current_total = 0;
  CategoryBytes at_peak;      // held at the moment the total peaked: the peak's breakdown
  CategoryBytes peak;         // each category's own peak (not simultaneous)
  size_t peak_total = 0;      // "peak memory per rank"
  PhaseBytes phase_peak;      // the highest total while each phase was current
  // A caching device allocator's bytes held from the driver, cached blocks
  // included; absent for host and meta allocators.
  struct Reserved {
    size_t current = 0, peak = 0;
    bool operator==(const Reserved&) const = default;
  };
  std::optional<Reserved> reserved;
  // The whole device (cudaMemGetInfo: every process and library), when the
  // driver was asked.
  std::optional<DeviceMemoryInfo> device;
  // cuBLASLt's workspace: the one device buffer outside the allocator.
  std::optional<size_t> gemm_workspace;

  static MemorySnapshot of(const MemoryStats& stats,
                           const std::optional<DeviceMemoryInfo>& device = std::nullopt);

  // {"current": {cat: B, "total": B},
  //  "peak": {"total": B, "at_peak": {cat: B}, "by_category": {cat: B}},
  //  "phase_peak": {phase: B}}
  // plus "reserved": {"current": B, "peak": B}, "device": {"free": B,
  // "total": B} and "gemm_workspace": B where present.
  nlohmann::json to_json() const;

  bool operator==(const MemorySnapshot&) const = default;
};

// "12.3 MiB"
std::string human_bytes(double bytes);

}  // namespace sdp
