#pragma once
// A subnet plan: which of the N ranks own which of the K maskable components
// (shared components are owned by every rank and are not in the plan). Each
// component's gradient is averaged over exactly its owners, and components
// with the same owner set share one bucket and one collective on that set's
// communicator (owner_sets). Every rank must hold the identical plan; hash()
// is what ranks compare before training starts.
//
// Construction (build): C means each rank holds m = round(C K) of the K
// components (halves rounded up; m >= 1, else refused), or
// PlanRequest::per_rank when set. The m N ownerships are spread so that the
// owners per component are floor(m N / K) or ceil(m N / K) (every component
// needs one: m N >= K, else refused with the C or world that would work).
// The constructions walk the components in an order (PlanRequest::classes:
// sublayers interleaved, see below; the given order without classes):
// - cyclic: rank i owns the cyclic window of m components ending at
//   e_i = ceil((i + 1) K / N) - 1. The number of window ends in any m
//   consecutive components is floor(m N / K) or ceil(m N / K) (the ends
//   are evenly spread: floor((x + 1) N / K) of them lie at or below x), so
//   owner counts are balanced. When C N = r and r K / N are whole, this is
//   exactly the older rule "component k is owned by the r consecutive
//   ranks (mod N) starting at floor(k N / K)" (tested), so plans built
//   before fractional C are unchanged. Consecutive windows share a
//   component unless their ends are m apart, so the mask graph is connected
//   exactly when the counts allow it (m N >= N + K - 1, or N = 1).
// - random: components in order, component k taking the o_k least-loaded
//   ranks, o_k = floor((k + 1) m N / K) - floor(k m N / K) (floor or ceil
//   of m N / K), ties broken by seeded counter-based draws, so the same seed
//   gives the same plan on every process and platform. Taking the o
//   least-loaded keeps all loads within one of each other, and they sum to
//   m N, so every rank ends with exactly m.
// - weighted (ranks of unequal memory): rank i holds q_i components, q_i
//   within one of its share min(K, lambda w_i) of the m N ownerships; the
//   quotas are laid end to end in rank order as m N slots and slot s goes to
//   component s mod K, so each rank owns a cyclic window and the owners per
//   component are floor or ceil of m N / K (equal weights give every rank m).
// Classes (neuron plans: the sublayer of each group column): every rank
// should hold at least one component of every class. The walk interleaves
// the classes, each spread evenly (column j of a class of G columns sits at
// (j + 1/2) / G of the way), so any window of at least K / G_min columns,
// S columns when every class has the same G, holds every class; a swap pass
// (a rank missing a class takes one from a rank holding two, handing back a
// component of a class it holds twice: counts unchanged) covers the rest
// where it can. A plan that is disconnected though its counts allow a
// connected one is joined by swaps that keep every count and the coverage
// (random draws and weighted laps can split it). What stays uncovered is
// listed by uncovered() and warned about by table().
// C = 1 gives m = K, the all-ones plan, which is DDP; so does a world of
// one rank, whatever C.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
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
  // Components each rank holds, m; 0 = round(C K) (halves up), which must be
  // >= 1. The owned fraction is then m / K whatever C was.
  int per_rank = 0;
  std::vector<double> rank_weights;  // weighted construction: [N], each > 0
  // [K] the class (a neuron plan's sublayer: block and kind) of each
  // component, ids 0 .. S - 1; empty = no classes. Every rank should hold
  // every class (see Construction).
  std::vector<int> classes;
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
  // Components per rank of build(request): m = round(C K) (halves up) or
  // request.per_rank. Throws as build() does when m < 1 or m N < K.
  static int per_rank(const PlanRequest& request);

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
  // The fraction of the matrix owned: the C actually used (m / K for a
  // built plan), which differs from active_fraction() where C K is not whole.
  double held_fraction() const { return s_->held_fraction; }
  // (rank, class) pairs where the rank holds no component of the class;
  // empty without classes.
  std::vector<std::pair<int, int>> uncovered() const;
  // One line naming (up to 8 of) those pairs, the sublayer named after its
  // first component less the group index when component_names has one name
  // per component; "" when every rank holds every class.
  std::string coverage_warning(const std::vector<std::string>& component_names = {}) const;
  const std::vector<int>& classes() const { return s_->classes; }
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
  // the owners per component, the number of owner sets and the spectral gap,
  // and warnings for ranks owning nothing or missing a class;
  // component_names (empty, or one per component) adds a legend.
  std::string table(const std::vector<std::string>& component_names = {}) const;
  // world, components, active_fraction, held_fraction, construction, (seed,)
  // (uncovered: [[rank, class], ...] when classes are given,) owners_per_component,
  // owned_per_rank, owner_sets, spectral_gap, hash, and matrix: one string of
  // '0'/'1' per rank, component 0 first.
  nlohmann::json to_json() const;

 private:
  SubnetPlan(std::vector<std::vector<bool>> owns, double active_fraction, std::string construction,
             uint64_t seed, std::vector<int> classes = {});
  void check_rank(int rank) const;
  void check_component(int component) const;

  struct State {
    std::vector<std::vector<bool>> owns;   // [rank][component]
    std::vector<std::vector<int>> owners;  // [component] -> sorted ranks
    std::vector<std::vector<int>> owner_sets;
    std::vector<int> owner_set_of;  // [component]
    double active_fraction = 1.0;
    double held_fraction = 1.0;
    std::vector<int> classes;  // [component], or empty
    std::string construction;
    uint64_t seed = 0;
    double spectral_gap = 1.0;
    uint64_t hash = 0;
  };
  std::shared_ptr<const State> s_ = std::make_shared<const State>();
};

}  // namespace sdp
