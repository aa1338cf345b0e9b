#pragma once
// Byte accounting for one device: current and peak bytes per category and in
// total, and the peak of the total reached within each training phase.
// "Peak memory per rank" in every report is peak_total() of one step.
#include <array>
#include <cstddef>
#include <string_view>

namespace sdp {

// gathered: whole parameters of sharded (FSDP) groups while a part of the
// model reads them; param then counts only what persists (the shards).
enum class MemCategory : uint8_t { param, master, grad, optim, activation, workspace, comm, gathered };
inline constexpr size_t kMemCategoryCount = 8;

enum class Phase : uint8_t { idle, forward, backward, optimizer, communication };
inline constexpr size_t kPhaseCount = 5;

constexpr std::string_view category_name(MemCategory c) {
  constexpr std::string_view names[] = {"param",      "master",    "grad", "optim",
                                        "activation", "workspace", "comm", "gathered"};
  return names[static_cast<size_t>(c)];
}

constexpr std::string_view phase_name(Phase p) {
  constexpr std::string_view names[] = {"idle", "forward", "backward", "optimizer",
                                        "communication"};
  return names[static_cast<size_t>(p)];
}

class MemoryStats {
 public:
  void on_alloc(MemCategory c, size_t bytes);
  void on_free(MemCategory c, size_t bytes);

  // Memory figures of a phase are the highest total seen while it was current.
  void set_phase(Phase p);
  Phase phase() const { return phase_; }

  // Starts a new measurement window (e.g. one training step): peaks restart at
  // the bytes held now.
  void reset_peaks();

  size_t current(MemCategory c) const { return current_[idx(c)]; }
  size_t peak(MemCategory c) const { return peak_[idx(c)]; }
  size_t current_total() const { return current_total_; }
  size_t peak_total() const { return peak_total_; }
  size_t phase_peak(Phase p) const { return phase_peak_[static_cast<size_t>(p)]; }
  // Bytes held per category at the moment the total peaked: the breakdown of
  // the peak (the per-category peaks need not happen at the same moment).
  size_t at_peak(MemCategory c) const { return at_peak_[idx(c)]; }
  size_t alloc_count() const { return alloc_count_; }

  // Bytes the device allocator holds from the driver, cached blocks included
  // (a caching allocator's "reserved"); host and meta allocators hold exactly
  // what they hand out and never set it.
  void set_reserved(size_t bytes);
  size_t reserved() const { return reserved_; }
  size_t peak_reserved() const { return peak_reserved_; }
  bool tracks_reserved() const { return tracks_reserved_; }

 private:
  static size_t idx(MemCategory c) { return static_cast<size_t>(c); }
  std::array<size_t, kMemCategoryCount> current_{};
  std::array<size_t, kMemCategoryCount> peak_{};
  std::array<size_t, kMemCategoryCount> at_peak_{};
  std::array<size_t, kPhaseCount> phase_peak_{};
  size_t current_total_ = 0;
  size_t peak_total_ = 0;
  size_t alloc_count_ = 0;
  size_t reserved_ = 0;
  size_t peak_reserved_ = 0;
  bool tracks_reserved_ = false;
  Phase phase_ = Phase::idle;
};

// Sets a phase for the lifetime of the scope and restores the previous one.
class PhaseScope {
 public:
  PhaseScope(MemoryStats& stats, Phase p) : stats_(stats), previous_(stats.phase()) {
    stats_.set_phase(p);
  }
  ~PhaseScope() { stats_.set_phase(previous_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  MemoryStats& stats_;
  Phase previous_;
};

}  // namespace sdp
