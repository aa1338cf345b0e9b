// Fractional C (engine/plan/subnet_plan.h, Construction): each rank holds
// m = round(C K) of the K components, owners per component within one of
// each other, every component owned, the mask graph connected where the
// counts allow it, every sublayer held by every rank in neuron plans where
// the groups allow it; and the plans of a whole C N and r K / N unchanged
// from the rule before fractional C.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine/parallel/strategy.h"
#include "engine/plan/subnet_plan.h"

using namespace sdp;

namespace {

PlanRequest request(int world, int components, double fraction, PlanConstruction construction,
                    uint64_t seed = 0) {
  PlanRequest q;
  q.world = world;
  q.components = components;
  q.active_fraction = fraction;
  q.construction = construction;
  q.seed = seed;
  if (construction == PlanConstruction::weighted)  // the first half weighs 3, the rest 1
    for (int i = 0; i < world; ++i) q.rank_weights.push_back(i < world / 2 ? 3.0 : 1.0);
  return q;
}

// m = round(C K), halves up, as the header states; one rank holds all.
int expected_per_rank(double c, int k, int n) {
  return n == 1 ? k : static_cast<int>(std::floor(c * k + 0.5 + 1e-9));
}

// Every rank can hold a component of every class: it holds at least S
// components and every class's components have at least N owners in all.
bool coverable(const SubnetPlan& plan) {
  const std::vector<int>& classes = plan.classes();
  const int S = *std::max_element(classes.begin(), classes.end()) + 1;
  std::vector<size_t> owners(static_cast<size_t>(S), 0);
  for (int c = 0; c < plan.components(); ++c)
    owners[static_cast<size_t>(classes[static_cast<size_t>(c)])] += plan.owners(c).size();
  for (int i = 0; i < plan.world(); ++i)
    if (plan.owned(i).size() < static_cast<size_t>(S)) return false;
  return std::all_of(owners.begin(), owners.end(),
                     [&](size_t o) { return o >= static_cast<size_t>(plan.world()); });
}

// Connected bipartite rank/component graph (the spectral gap is > 0 exactly then).
bool connected(const SubnetPlan& plan) {
  const int n = plan.world(), k = plan.components();
  std::vector<bool> rank_seen(static_cast<size_t>(n)), comp_seen(static_cast<size_t>(k));
  std::vector<int> stack{0};
  rank_seen[0] = true;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (int c : plan.owned(i)) {
      if (comp_seen[static_cast<size_t>(c)]) continue;
      comp_seen[static_cast<size_t>(c)] = true;
      for (int j : plan.owners(c))
        if (!rank_seen[static_cast<size_t>(j)]) {
          rank_seen[static_cast<size_t>(j)] = true;
          stack.push_back(j);
        }
    }
  }
  return std::all_of(rank_seen.begin(), rank_seen.end(), [](bool b) { return b; }) &&
         std::all_of(comp_seen.begin(), comp_seen.end(), [](bool b) { return b; });
}

void check_counts(const SubnetPlan& plan, int n, int k, int m, bool every_rank_m) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const int held = static_cast<int>(plan.owned(i).size());
    if (every_rank_m) REQUIRE(held == m);
    total += held;
  }
  REQUIRE(total == static_cast<int64_t>(m) * n);
  const int64_t lo = static_cast<int64_t>(m) * n / k, hi = (static_cast<int64_t>(m) * n + k - 1) / k;
  for (int c = 0; c < k; ++c) {
    const auto owners = static_cast<int64_t>(plan.owners(c).size());
    REQUIRE(owners >= 1);
    REQUIRE(owners >= lo);
    REQUIRE(owners <= hi);
  }
  REQUIRE(std::abs(plan.held_fraction() - static_cast<double>(m) / k) < 1e-12);
}

}  // namespace

TEST_CASE("fractional C: every rank holds round(C K), owners within one, connected where "
          "the counts allow",
          "[plan][fractional]") {
  int checked = 0, refused = 0;
  for (int n : {1, 2, 3, 5, 8, 12, 16})
    for (int k : {1, 2, 3, 7, 11, 16, 24, 40})
      for (double c : {0.125, 0.25, 0.375, 0.5, 0.6875, 0.7, 0.9, 1.0})
        for (auto construction :
             {PlanConstruction::cyclic, PlanConstruction::random, PlanConstruction::weighted}) {
          CAPTURE(n, k, c, plan_construction_name(construction));
          const PlanRequest q = request(n, k, c, construction, 7);
          const int m = expected_per_rank(c, k, n);
          if (m < 1 || static_cast<int64_t>(m) * n < k) {
            REQUIRE_THROWS_AS(SubnetPlan::build(q), Error);
            ++refused;
            continue;
          }
          const SubnetPlan plan = SubnetPlan::build(q);
          REQUIRE(SubnetPlan::per_rank(q) == m);
          // Weighted ranks hold their share of the m N ownerships instead.
          check_counts(plan, n, k, m, construction != PlanConstruction::weighted);
          if (n == 1 || static_cast<int64_t>(m) * n >= n + k - 1) {
            REQUIRE(connected(plan));
            REQUIRE(plan.spectral_gap() > 1e-9);
          }
          ++checked;
        }
  REQUIRE(checked > 800);
  REQUIRE(refused > 50);
}

TEST_CASE("fractional C: a whole C N and r K / N give the matrix of the older rule",
          "[plan][fractional]") {
  // The older rule: component k owned by the r consecutive ranks (mod N)
  // starting at floor(k N / K). Pinned results (demo outputs, golden
  // losses) were made with it.
  int checked = 0;
  for (int n = 1; n <= 16; ++n)
    for (int k = 1; k <= 24; ++k)
      for (int r = 1; r <= n; ++r) {
        if ((r * k) % n != 0) continue;
        CAPTURE(n, k, r);
        const SubnetPlan plan =
            SubnetPlan::build(request(n, k, static_cast<double>(r) / n, PlanConstruction::cyclic));
        for (int comp = 0; comp < k; ++comp) {
          const int start = static_cast<int>(static_cast<int64_t>(comp) * n / k);
          std::vector<int> expected;
          for (int j = 0; j < r; ++j) expected.push_back((start + j) % n);
          std::sort(expected.begin(), expected.end());
          REQUIRE(plan.owners(comp) == expected);
        }
        ++checked;
      }
  REQUIRE(checked > 300);
}

TEST_CASE("fractional C: 8 ranks at C = 0.6875 hold 11 of 16 blocks, 5 or 6 owners each",
          "[plan][fractional]") {
  const SubnetPlan plan = SubnetPlan::build(request(8, 16, 0.6875, PlanConstruction::cyclic));
  for (int i = 0; i < 8; ++i) REQUIRE(plan.owned(i).size() == 11);
  for (int c = 0; c < 16; ++c) {
    const size_t owners = plan.owners(c).size();
    REQUIRE((owners == 5 || owners == 6));
  }
  REQUIRE(plan.held_fraction() == 0.6875);
  // C = 0.69 rounds to the same 11 (0.69 x 16 = 11.04), and says so.
  const SubnetPlan near = SubnetPlan::build(request(8, 16, 0.69, PlanConstruction::cyclic));
  REQUIRE(near.hash() == plan.hash());
  REQUIRE_THAT(near.table(), Catch::Contains("active fraction 0.69 (held 0.6875)"));
  // Halves round up: 0.5 x 3 = 1.5 gives 2 of 3.
  REQUIRE(SubnetPlan::per_rank(request(4, 3, 0.5, PlanConstruction::cyclic)) == 2);
  // Too few ownerships for every component: refused with what would work.
  REQUIRE_THROWS_WITH(SubnetPlan::build(request(2, 8, 0.25, PlanConstruction::cyclic)),
                      Catch::Contains("m N = 4 ownerships for 8 components") &&
                          Catch::Contains("valid: C >= ceil(K / N) / K = 0.5 on 2 ranks, or "
                                          "world >= ceil(K / m) = 4 ranks for this C"));
}

TEST_CASE("fractional C: classes are interleaved and covered where the groups allow",
          "[plan][fractional]") {
  // Two sublayers of 4 groups and two of 2 (the shape of tiny's N-SDP plan),
  // listed group-major as the models list them.
  std::vector<int> classes;
  for (int g = 0; g < 4; ++g)
    for (int s = 0; s < 4; ++s)
      if (g < 2 || s % 2 == 0) classes.push_back(s);
  const int K = static_cast<int>(classes.size());  // 12
  for (int n : {2, 3, 4, 6, 8})
    for (double c : {0.34, 0.5, 0.75})
      for (auto construction :
           {PlanConstruction::cyclic, PlanConstruction::random, PlanConstruction::weighted}) {
        CAPTURE(n, c, plan_construction_name(construction));
        PlanRequest q = request(n, K, c, construction, 3);
        q.classes = classes;
        const int m = expected_per_rank(c, K, n);
        if (static_cast<int64_t>(m) * n < K) continue;
        const SubnetPlan plan = SubnetPlan::build(q);
        check_counts(plan, n, K, m, construction != PlanConstruction::weighted);
        if (coverable(plan)) REQUIRE(plan.uncovered().empty());
        if (static_cast<int64_t>(m) * n >= n + K - 1) REQUIRE(connected(plan));
      }
  // Below one component per class a rank cannot hold them all: said.
  PlanRequest small = request(4, K, 0.25, PlanConstruction::cyclic);
  small.classes = classes;
  const SubnetPlan plan = SubnetPlan::build(small);
  REQUIRE_FALSE(plan.uncovered().empty());
  REQUIRE_THAT(plan.table(), Catch::Contains("warning: ") && Catch::Contains("sublayer"));
}

namespace {

// Every rank of the layout holds a group of every (block, kind) sublayer.
void check_sublayers_covered(const std::string& model, const StrategySpec& spec, int world) {
  SubnetLayout L;
  try {
    L = SubnetLayout::build(model, spec, world, 0);
  } catch (const Error& e) {  // too few ranks for this C: m N < K
    REQUIRE_THAT(e.what(), Catch::Contains("some component would have no owner"));
    return;
  }
  std::map<std::string, std::vector<int>> columns;  // sublayer -> plan columns
  for (size_t c = 0; c < L.component_names.size(); ++c) {
    const std::string& name = L.component_names[c];
    columns[name.substr(0, name.rfind('.'))].push_back(static_cast<int>(c));
  }
  CAPTURE(model, world, spec.active_fraction, L.plan.owned(0).size(), columns.size());
  if (!coverable(L.plan)) {
    REQUIRE_FALSE(L.plan.uncovered().empty());  // impossible, and said
    return;
  }
  REQUIRE(L.plan.uncovered().empty());
  for (int rank = 0; rank < world; ++rank)
    for (const auto& [sublayer, cols] : columns) {
      CAPTURE(rank, sublayer);
      REQUIRE(std::any_of(cols.begin(), cols.end(), [&](int c) { return L.plan.owns(rank, c); }));
    }
}

}  // namespace

TEST_CASE("fractional C: neuron plans give every rank a group of every sublayer",
          "[plan][fractional]") {
  // tiny: 2 blocks of 4 FFN and 2 head groups. The cyclic plan of the rule
  // before this left rank 0 of 4 at C = 0.5 without a head group of block 1.
  for (const char* model : {"tiny", "mini", "resnet-mini"})
    for (const char* strategy : {"n-sdp", "nb-sdp"})
      for (int world : {2, 3, 4, 8})
        for (double c : {0.375, 0.5, 0.75}) {
          ParallelSettings p;
          p.strategy = strategy;
          p.active_fraction = c;
          const StrategySpec spec = StrategySpec::from_settings(p, model);
          check_sublayers_covered(model, spec, world);
        }
}
