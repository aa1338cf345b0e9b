#pragma once
// A subnet plan: which of the N ranks own which of the K maskable components
// (shared components are owned by every rank and are not in the plan). Each
// component's gradient is averaged over exactly its owners, and components
// with the same owner set share one bucket and one collective on that set's
// communicator (owner_sets). Every rank must hold the identical plan; hash()
// is what ranks compare before training starts.
//
// Construction (build): each component gets r owners, r = round(C N) with
// halves rounded up (or PlanRequest::owners when set).
// - cyclic: component k is owned by the r consecutive ranks (mod N) starting
//   at floor(k N / K). The starts are non-decreasing in k, so each rank owns a
//   contiguous cyclic window of components, and the number of k whose start
//   falls in any r consecutive ranks is floor(r K / N) or ceil(r K / N).
// - random: components in order each take the r least-loaded ranks, ties
//   broken by seeded counter-based draws, so the same seed gives the same plan
//   on every process and platform.
// Both are balanced: every rank owns floor(r K / N) or ceil(r K / N)
// components (all equal when N divides r K).
// - weighted (ranks of unequal memory): every component still gets r
//   owners, and rank i owns q_i components, q_i within one of its share
//   min(K, lambda w_i) of the r K ownerships (the shares summing to r K):
//   the quotas are laid end to end in rank order as r K slots and component
//   k takes slots k, k + K, ..., so each rank owns a cyclic window of
//   components, as in a cyclic plan (which equal weights reproduce in shape).
// C = 1 gives r = N, the all-ones plan, which is DDP. When r K < N some ranks
// own nothing and train only the shared parameters; table() warns about it.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/rank_weights.h"

namespace sdp {

enum class PlanConstruction : uint8_t { cyclic, random, weighted };

// Throws sdp::Error listing the valid names for an unknown one.
PlanConstruction parse_plan_construction(const std::string& name);
std::string_view plan_construction_name(PlanConstruction construction);

struct PlanRequest {
  int world = 1;                 // N ranks
  int components = 1;            // K maskable components
  double active_fraction = 1.0;  // C in (0, 1]
  PlanConstruction construction = PlanConstruction::cyclic;
  uint64_t seed = 0;  // random construction only
  int owners = 0;     // owners per component; 0 = round(C N), which must be >= 1
  std::vector<double> rank_weights;  // weighted construction: [N], each > 0
};


class SubnetPlan {
 public:
  // An empty plan (no ranks, no components), to be assigned a built one.
  SubnetPlan() = default;
  // Throws sdp::Error on an impossible request, saying what would work.
  static SubnetPlan build(const PlanRequest& request);
  // owns is [rank][component]; rejected when empty, ragged, or when some
  // component has no owner.
  static SubnetPlan from_matrix(std::vector<std::vector<bool>> owns);

  // The plan a process built last under `key` (any text that determines the
  // plan: the caller names everything build() reads), or make()'s, which is
  // then kept; a few plans are kept, the oldest dropped first. Thread-safe.
  static SubnetPlan cached(const std::string& key, const std::function<SubnetPlan()>& make);
  // The key of build(request) for cached().
  static std::string cache_key(const PlanRequest& request);

  int world() const { return static_cast<int>(s_->owns.size()); }
  int components() const { return static_cast<int>(s_->owners.size()); }
  // As requested for build(); the owned fraction of the matrix for from_matrix().
  double active_fraction() const { return s_->active_fraction; }
  // "cyclic", "random", or "matrix" for a plan given by from_matrix().
  const std::string& construction() const { return s_->construction; }

  bool owns(int rank, int component) const;
  const std::vector<int>& owners(int component) const;  // sorted world ranks
  std::vector<int> owned(int rank) const;               // sorted component ids

  // Distinct owner sets in lexicographic order; owner_set_of(k) indexes it.
  const std::vector<std::vector<int>>& owner_sets() const { return s_->owner_sets; }
  int owner_set_of(int component) const;

  double spectral_gap() const { return s_->spectral_gap; }  // see plan/spectral_gap.h
  // Of the matrix only (its shape and bits), identical in every process.
  uint64_t hash() const { return s_->hash; }

  // Ranks x components, '#' owned and '.' not, with each rank's owned count,
  // the owners per component, the number of owner sets and the spectral gap;
  // component_names (empty, or one per component) adds a legend.
  std::string table(const std::vector<std::string>& component_names = {}) const;
  // world, components, active_fraction, construction, (seed,) owners_per_component,
  // owned_per_rank, owner_sets, spectral_gap, hash, and matrix: one string of
  // '0'/'1' per rank, component 0 first.
  nlohmann::json to_json() const;

 private:
  SubnetPlan(std::vector<std::vector<bool>> owns, double active_fraction, std::string construction,
             uint64_t seed);
  void check_rank(int rank) const;
  void check_component(int component) const;

  struct State {
    std::vector<std::vector<bool>> owns;   // [rank][component]
    std::vector<std::vector<int>> owners;  // [component] -> sorted ranks
    std::vector<std::vector<int>> owner_sets;
    std::vector<int> owner_set_of;  // [component]
    double active_fraction = 1.0;
    std::string construction;
    uint64_t seed = 0;
    double spectral_gap = 1.0;
    uint64_t hash = 0;
  };
  std::shared_ptr<const State> s_ = std::make_shared<const State>();
};

}  // namespace sdp
