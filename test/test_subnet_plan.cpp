// Subnet plans: ownership counts and balance of both constructions over many
// (N, K, C), determinism, the spectral gap on cases computed by hand, owner
// sets, the hash, the report formats, and every refused request.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "engine/core/error.h"
#include "engine/plan/subnet_plan.h"

using namespace sdp;
using Catch::Contains;

namespace {

using Matrix = std::vector<std::vector<bool>>;

Matrix matrix_of(const SubnetPlan& plan) {
  Matrix m(static_cast<size_t>(plan.world()),
           std::vector<bool>(static_cast<size_t>(plan.components())));
  for (int i = 0; i < plan.world(); ++i)
    for (int k = 0; k < plan.components(); ++k)
      m[static_cast<size_t>(i)][static_cast<size_t>(k)] = plan.owns(i, k);
  return m;
}

// Rows as strings of '0'/'1', component 0 first.
Matrix parse(const std::vector<std::string>& rows) {
  Matrix m;
  for (const auto& row : rows) {
    m.emplace_back();
    for (char c : row) m.back().push_back(c == '1');
  }
  return m;
}

PlanRequest request(int world, int components, double fraction,
                    PlanConstruction construction = PlanConstruction::cyclic, uint64_t seed = 0) {
  PlanRequest q;
  q.world = world;
  q.components = components;
  q.active_fraction = fraction;
  q.construction = construction;
  q.seed = seed;
  return q;
}

// The properties every built plan has, whatever its construction: each rank
// holds m components, each component floor(m N / K) or ceil(m N / K) owners.
void check_built_plan(const SubnetPlan& plan, int n, int k, int m) {
  REQUIRE(plan.world() == n);
  REQUIRE(plan.components() == k);
  int total = 0;
  for (int c = 0; c < k; ++c) {
    const auto& owners = plan.owners(c);
    REQUIRE(static_cast<int>(owners.size()) >= m * n / k);
    REQUIRE(static_cast<int>(owners.size()) <= (m * n + k - 1) / k);
    REQUIRE(std::is_sorted(owners.begin(), owners.end()));
    REQUIRE(std::adjacent_find(owners.begin(), owners.end()) == owners.end());
    for (int i = 0; i < n; ++i)
      REQUIRE(plan.owns(i, c) == std::binary_search(owners.begin(), owners.end(), i));
  }
  for (int i = 0; i < n; ++i) {
    const auto owned = plan.owned(i);
    REQUIRE(std::is_sorted(owned.begin(), owned.end()));
    for (int c : owned) REQUIRE(plan.owns(i, c));
    REQUIRE(static_cast<int>(owned.size()) == m);
    total += static_cast<int>(owned.size());
  }
  REQUIRE(total == m * n);
  const auto& sets = plan.owner_sets();
  REQUIRE(std::is_sorted(sets.begin(), sets.end()));
  REQUIRE(std::adjacent_find(sets.begin(), sets.end()) == sets.end());
  for (int c = 0; c < k; ++c)
    REQUIRE(sets[static_cast<size_t>(plan.owner_set_of(c))] == plan.owners(c));
  REQUIRE(plan.spectral_gap() >= 0.0);
  REQUIRE(plan.spectral_gap() <= 1.0);
}

// Number of maximal runs of owned components when the components are read as
// a cycle: 1 for a contiguous cyclic window, 0 for none or all.
int cyclic_runs(const std::vector<bool>& row) {
  int runs = 0;
  const size_t k = row.size();
  for (size_t c = 0; c < k; ++c) runs += row[c] && !row[(c + k - 1) % k];
  return runs;
}

}  // namespace

TEST_CASE("plan construction names parse and print", "[plan]") {
  REQUIRE(parse_plan_construction("cyclic") == PlanConstruction::cyclic);
  REQUIRE(parse_plan_construction("random") == PlanConstruction::random);
  REQUIRE(plan_construction_name(PlanConstruction::cyclic) == "cyclic");
  REQUIRE(plan_construction_name(PlanConstruction::random) == "random");
  REQUIRE_THROWS_WITH(
      parse_plan_construction("ring"),
      Contains("unknown plan construction 'ring'") && Contains("valid: cyclic, random"));
}

TEST_CASE("built plans give every rank round(C K) components and balanced owners for many N, K, C",
          "[plan]") {
  int checked = 0;
  for (int n : {1, 2, 3, 4, 5, 6, 8, 12, 16}) {
    for (int k : {1, 2, 3, 4, 5, 7, 8, 12, 16, 33}) {
      for (double c : {0.1, 0.25, 0.3, 1.0 / 3, 0.5, 0.6, 0.75, 0.9, 1.0}) {
        // One rank holds every component.
        const auto m = n == 1 ? k : static_cast<int>(std::floor(c * k + 0.5 + 1e-9));
        if (m < 1 || m * n < k) continue;  // refused; see the refusal test
        for (auto construction : {PlanConstruction::cyclic, PlanConstruction::random}) {
          CAPTURE(n, k, c, plan_construction_name(construction));
          const auto plan = SubnetPlan::build(request(n, k, c, construction, 42));
          check_built_plan(plan, n, k, m);
          REQUIRE(plan.active_fraction() == c);
          ++checked;
        }
      }
    }
  }
  REQUIRE(checked > 600);
}

TEST_CASE("cyclic plans own consecutive ranks per component and a cyclic window per rank",
          "[plan]") {
  // Where C N = r and r K / N are whole: the rule before fractional C.
  for (int n : {2, 3, 4, 5, 8, 16}) {
    for (int k : {1, 3, 4, 8, 10, 24}) {
      for (double c : {0.25, 0.5, 0.75}) {
        const int r = static_cast<int>(std::lround(c * n));
        if (r < 1 || std::abs(c * n - r) > 1e-12 || (r * k) % n != 0) continue;
        CAPTURE(n, k, c);
        const auto plan = SubnetPlan::build(request(n, k, c));
        const auto m = matrix_of(plan);
        for (int comp = 0; comp < k; ++comp) {
          const int start = static_cast<int>(static_cast<int64_t>(comp) * n / k);
          std::vector<int> expected;
          for (int j = 0; j < r; ++j) expected.push_back((start + j) % n);
          std::sort(expected.begin(), expected.end());
          REQUIRE(plan.owners(comp) == expected);
        }
        for (const auto& row : m) REQUIRE(cyclic_runs(row) <= 1);
      }
    }
  }
}

TEST_CASE("cyclic N=4 K=4 C=0.5 matches the matrix and spectral gap computed by hand", "[plan]") {
  // Component k is owned by ranks k and k+1 (mod 4). Co-ownership A = 2I +
  // adjacency of the 4-cycle, every row sums to 4, so W = A/4 has eigenvalues
  // (2 + {2, 0, 0, -2}) / 4 = {1, 0.5, 0.5, 0}: lambda_2 = 0.5, gap = 0.5.
  const auto plan = SubnetPlan::build(request(4, 4, 0.5));
  REQUIRE(matrix_of(plan) == parse({"1001", "1100", "0110", "0011"}));
  REQUIRE(plan.spectral_gap() == Approx(0.5).margin(1e-12));
  REQUIRE(plan.owners(3) == std::vector<int>{0, 3});
  REQUIRE(plan.owned(0) == std::vector<int>{0, 3});
  // Random with the same shape is balanced too: 2 components per rank.
  const auto random = SubnetPlan::build(request(4, 4, 0.5, PlanConstruction::random, 3));
  for (int i = 0; i < 4; ++i) REQUIRE(random.owned(i).size() == 2);
}

TEST_CASE("spectral gap of an uneven matrix computed by hand", "[plan]") {
  // Rank 0 owns {0, 1}, rank 1 owns {1}: A = [[2, 1], [1, 1]], D = diag(3, 2),
  // W = [[2/3, 1/3], [1/2, 1/2]]: trace 7/6 and determinant 1/6 give the
  // eigenvalues 1 and 1/6, so the gap is 5/6.
  const auto plan = SubnetPlan::from_matrix(parse({"11", "01"}));
  REQUIRE(plan.spectral_gap() == Approx(5.0 / 6).margin(1e-12));
  REQUIRE(plan.active_fraction() == Approx(0.75));
  REQUIRE(plan.construction() == "matrix");
}

TEST_CASE("C = 1 is the all-ones plan (DDP) with spectral gap 1", "[plan]") {
  for (int n : {1, 2, 3, 7, 16}) {
    for (int k : {1, 5, 12}) {
      for (auto construction : {PlanConstruction::cyclic, PlanConstruction::random}) {
        CAPTURE(n, k, plan_construction_name(construction));
        const auto plan = SubnetPlan::build(request(n, k, 1.0, construction, 9));
        for (int i = 0; i < n; ++i)
          for (int c = 0; c < k; ++c) REQUIRE(plan.owns(i, c));
        REQUIRE(plan.spectral_gap() == Approx(1.0).margin(1e-12));
        REQUIRE(plan.owner_sets().size() == 1);
      }
    }
  }
}

TEST_CASE("ranks that share nothing give spectral gap 0; one rank gives 1", "[plan]") {
  // C = 1/N with K = N: each rank owns exactly its own component.
  const auto disjoint = SubnetPlan::build(request(4, 4, 0.25));
  REQUIRE(matrix_of(disjoint) == parse({"1000", "0100", "0010", "0001"}));
  REQUIRE(disjoint.spectral_gap() == Approx(0.0).margin(1e-12));
  // Two groups that mix internally but never with each other: still 0.
  const auto blocks = SubnetPlan::from_matrix(parse({"1100", "1100", "0011", "0011"}));
  REQUIRE(blocks.spectral_gap() == Approx(0.0).margin(1e-12));
  // A rank owning nothing is isolated: 0 as well.
  const auto idle = SubnetPlan::from_matrix(parse({"11", "11", "00"}));
  REQUIRE(idle.spectral_gap() == Approx(0.0).margin(1e-12));

  REQUIRE(SubnetPlan::build(request(1, 6, 1.0)).spectral_gap() == 1.0);
  REQUIRE(SubnetPlan::build(request(1, 6, 0.7)).spectral_gap() == 1.0);
}

TEST_CASE("random plans are determined by their seed", "[plan]") {
  const auto q = request(8, 16, 0.5, PlanConstruction::random, 1);
  const auto a = SubnetPlan::build(q);
  const auto b = SubnetPlan::build(q);
  REQUIRE(matrix_of(a) == matrix_of(b));
  REQUIRE(a.hash() == b.hash());

  auto other = q;
  other.seed = 2;
  const auto c = SubnetPlan::build(other);
  REQUIRE(matrix_of(a) != matrix_of(c));
  REQUIRE(a.hash() != c.hash());
  check_built_plan(c, 8, 16, 8);

  // The cyclic construction ignores the seed.
  auto cyclic = q;
  cyclic.construction = PlanConstruction::cyclic;
  const auto d = SubnetPlan::build(cyclic);
  cyclic.seed = 99;
  REQUIRE(SubnetPlan::build(cyclic).hash() == d.hash());
}

TEST_CASE("an explicit count of components per rank overrides round(C K)", "[plan]") {
  PlanRequest q = request(5, 10, 0.5, PlanConstruction::random, 4);
  q.per_rank = 8;
  check_built_plan(SubnetPlan::build(q), 5, 10, 8);
  q.construction = PlanConstruction::cyclic;
  q.per_rank = 2;
  check_built_plan(SubnetPlan::build(q), 5, 10, 2);
  REQUIRE(SubnetPlan::build(q).held_fraction() == Approx(0.2));
}

TEST_CASE("plan hash is equal for equal matrices and differs otherwise", "[plan]") {
  const auto built = SubnetPlan::build(request(4, 4, 0.5));
  const auto given = SubnetPlan::from_matrix(parse({"1001", "1100", "0110", "0011"}));
  REQUIRE(built.hash() == given.hash());  // the matrix alone decides
  // Pinned: the hash is compared between processes (and versions), so it must
  // not depend on anything but the bits and the shape.
  REQUIRE(built.hash() == 0xcee6df7f252d08e1ull);

  auto flipped = parse({"1001", "1100", "0110", "0011"});
  flipped[2][3] = true;
  REQUIRE(SubnetPlan::from_matrix(flipped).hash() != given.hash());
  // Same bits, different shapes.
  REQUIRE(SubnetPlan::from_matrix(parse({"11"})).hash() !=
          SubnetPlan::from_matrix(parse({"1", "1"})).hash());
  const auto two_by_two = SubnetPlan::from_matrix(parse({"11", "11"})).hash();
  REQUIRE(two_by_two != SubnetPlan::from_matrix(parse({"1111"})).hash());
  REQUIRE(two_by_two != SubnetPlan::from_matrix(parse({"1", "1", "1", "1"})).hash());
  // Wider than one 64-bit word per row.
  auto wide = Matrix(2, std::vector<bool>(70, true));
  const auto wide_hash = SubnetPlan::from_matrix(wide).hash();
  wide[1][69] = false;
  REQUIRE(SubnetPlan::from_matrix(wide).hash() != wide_hash);
}

TEST_CASE("owner sets group the components with identical owners", "[plan]") {
  // N=4, K=8, C=0.5 cyclic: components 2j and 2j+1 start at rank j.
  const auto plan = SubnetPlan::build(request(4, 8, 0.5));
  const std::vector<std::vector<int>> sets{{0, 1}, {0, 3}, {1, 2}, {2, 3}};
  REQUIRE(plan.owner_sets() == sets);
  const std::vector<int> set_of{0, 0, 2, 2, 3, 3, 1, 1};
  for (int c = 0; c < 8; ++c) REQUIRE(plan.owner_set_of(c) == set_of[static_cast<size_t>(c)]);

  const auto ddp = SubnetPlan::build(request(3, 5, 1.0));
  REQUIRE(ddp.owner_sets() == std::vector<std::vector<int>>{{0, 1, 2}});
}

TEST_CASE("table shows ownership, counts and gap, and warns about ranks owning nothing", "[plan]") {
  const auto plan = SubnetPlan::build(request(4, 4, 0.5));
  const std::string t = plan.table({"layers.0", "layers.1", "layers.2", "layers.3"});
  CAPTURE(t);
  REQUIRE_THAT(t, Contains("4 ranks x 4 components") && Contains("active fraction 0.5") &&
                      Contains("cyclic"));
  REQUIRE_THAT(t, Contains("         0123\n"));
  REQUIRE_THAT(t, Contains("rank 0 | #..# | 2\n") && Contains("rank 1 | ##.. | 2\n") &&
                      Contains("rank 2 | .##. | 2\n") && Contains("rank 3 | ..## | 2\n"));
  REQUIRE_THAT(t, Contains("owned per rank: 2 of 4") && Contains("owners per component: 2 of 4"));
  REQUIRE_THAT(t, Contains("owner sets: 4 distinct") && Contains("spectral gap: 0.5000"));
  REQUIRE_THAT(t, Contains("components: 0 = layers.0, 1 = layers.1, 2 = layers.2, 3 = layers.3"));
  REQUIRE_THAT(t, !Contains("warning"));
  REQUIRE_THROWS_WITH(plan.table({"a", "b"}), Contains("2 component names for 4 components") &&
                                                  Contains("valid: none, or one per component"));

  // Some ranks own nothing (a written plan: built ones hold m >= 1 each)
  // and must be visible.
  const auto sparse = SubnetPlan::from_matrix(
      parse({"10", "10", "00", "00", "01", "01", "00", "00"}));
  const std::string s = sparse.table();
  CAPTURE(s);
  REQUIRE_THAT(
      s, Contains("warning: ranks 2, 3, 6, 7 own no component") && Contains("shared parameters"));
  REQUIRE_THAT(s, Contains("owned per rank: 0 .. 1 of 2"));

  // Two-digit component ids are written downwards; random plans show the seed.
  const auto wide = SubnetPlan::build(request(12, 12, 0.5, PlanConstruction::random, 5));
  const std::string w = wide.table();
  CAPTURE(w);
  REQUIRE_THAT(w, Contains("random (seed 5)"));
  REQUIRE_THAT(w,
               Contains(std::string(20, ' ') + "11\n" + std::string(10, ' ') + "012345678901\n"));
  REQUIRE_THAT(w, Contains("rank  0 | ") && Contains("rank 11 | "));
}

TEST_CASE("to_json reports the plan", "[plan]") {
  const auto plan = SubnetPlan::build(request(4, 4, 0.5));
  const auto j = plan.to_json();
  REQUIRE(j.at("world") == 4);
  REQUIRE(j.at("components") == 4);
  REQUIRE(j.at("active_fraction") == 0.5);
  REQUIRE(j.at("construction") == "cyclic");
  REQUIRE_FALSE(j.contains("seed"));
  REQUIRE(j.at("owners_per_component") == nlohmann::json({2, 2, 2, 2}));
  REQUIRE(j.at("owned_per_rank") == nlohmann::json({2, 2, 2, 2}));
  REQUIRE(j.at("owner_sets") == 4);
  REQUIRE(j.at("spectral_gap").get<double>() == Approx(0.5));
  REQUIRE(j.at("matrix") == nlohmann::json({"1001", "1100", "0110", "0011"}));
  REQUIRE(j.at("hash").get<std::string>().size() == 16);

  REQUIRE(j.at("held_fraction") == 0.5);
  REQUIRE_FALSE(j.contains("uncovered"));

  const auto random = SubnetPlan::build(request(4, 8, 0.25, PlanConstruction::random, 17));
  const auto jr = random.to_json();
  REQUIRE(jr.at("construction") == "random");
  REQUIRE(jr.at("seed") == 17);
  REQUIRE(jr.at("owners_per_component") == nlohmann::json({1, 1, 1, 1, 1, 1, 1, 1}));

  const auto given = SubnetPlan::from_matrix(parse({"110", "011"})).to_json();
  REQUIRE(given.at("construction") == "matrix");
  REQUIRE(given.at("owners_per_component") == nlohmann::json({1, 2, 1}));
  REQUIRE(given.at("owned_per_rank") == nlohmann::json({2, 2}));
}

TEST_CASE("impossible plan requests are refused with what would work", "[plan]") {
  auto refused = [](PlanRequest q) { return SubnetPlan::build(q); };
  REQUIRE_THROWS_AS(refused(request(0, 4, 0.5)), Error);
  REQUIRE_THROWS_WITH(refused(request(0, 4, 0.5)),
                      Contains("world = 0 is invalid (valid: >= 1 rank)"));
  REQUIRE_THROWS_WITH(refused(request(4, 0, 0.5)),
                      Contains("components = 0 is invalid (valid: >= 1 maskable component"));
  REQUIRE_THROWS_WITH(refused(request(4, 4, 0.0)),
                      Contains("active_fraction C = 0 is invalid (valid: (0, 1]; C = 1 is DDP)"));
  REQUIRE_THROWS_WITH(refused(request(4, 4, 1.5)),
                      Contains("active_fraction C = 1.5 is invalid (valid: (0, 1]"));
  REQUIRE_THROWS_WITH(refused(request(4, 4, -0.5)), Contains("C = -0.5 is invalid"));
  REQUIRE_THROWS_WITH(refused(request(4, 4, std::numeric_limits<double>::quiet_NaN())),
                      Contains("is invalid (valid: (0, 1]"));
  REQUIRE_THROWS_WITH(refused(request(8, 4, 0.05)),
                      Contains("C = 0.05 with K = 4 components gives each rank round(C K) = 0") &&
                          Contains("valid: C >= 1/(2K) = 0.125"));
  REQUIRE_THROWS_WITH(refused(request(2, 8, 0.25)),
                      Contains("gives each rank m = 2 of the K = 8 components") &&
                          Contains("some component would have no owner"));

  PlanRequest too_many = request(4, 4, 0.5);
  too_many.per_rank = 5;
  REQUIRE_THROWS_WITH(refused(too_many),
                      Contains("per_rank = 5 components per rank is invalid with 4 components") &&
                          Contains("valid: 1 .. 4, or 0 for round(C K)"));
  too_many.per_rank = -1;
  REQUIRE_THROWS_WITH(refused(too_many), Contains("per_rank = -1 components per rank is invalid"));

  REQUIRE_THROWS_WITH(SubnetPlan::from_matrix({}), Contains("matrix has no ranks"));
  REQUIRE_THROWS_WITH(SubnetPlan::from_matrix(Matrix(2)), Contains("matrix has no components"));
  REQUIRE_THROWS_WITH(SubnetPlan::from_matrix(parse({"101", "10"})),
                      Contains("ragged: rank 1 has 2 components but rank 0 has 3") &&
                          Contains("valid: every row the same length"));
  REQUIRE_THROWS_WITH(SubnetPlan::from_matrix(parse({"100", "100"})),
                      Contains("components 1, 2 have no owner") &&
                          Contains("valid: every component owned by at least one rank"));
  REQUIRE_THROWS_WITH(SubnetPlan::from_matrix(parse({"10", "10"})),
                      Contains("component 1 has no owner"));

  const auto plan = SubnetPlan::build(request(2, 3, 0.5));
  REQUIRE_THROWS_WITH(plan.owns(2, 0), Contains("rank 2 is out of range (valid: 0 .. 1)"));
  REQUIRE_THROWS_WITH(plan.owners(3), Contains("component 3 is out of range (valid: 0 .. 2)"));
  REQUIRE_THROWS_WITH(plan.owned(-1), Contains("rank -1 is out of range"));
  REQUIRE_THROWS_WITH(plan.owner_set_of(-1), Contains("component -1 is out of range"));
}

TEST_CASE("weighted plans keep owners per component within one and share them by weight",
          "[plan]") {
  REQUIRE(parse_plan_construction("weighted") == PlanConstruction::weighted);
  int checked = 0;
  for (int n : {2, 3, 4, 6, 8, 16})
    for (int k : {1, 4, 7, 16, 48, 128})
      for (double c : {0.25, 0.5, 0.75})
        for (int heavy : {1, 2, 4}) {
          const auto m = static_cast<long>(std::floor(c * k + 0.5 + 1e-9));
          if (m < 1 || m * n < k) continue;
          // The first half of the ranks weighs `heavy`, the rest 1.
          PlanRequest q = request(n, k, c, PlanConstruction::weighted, 0);
          q.rank_weights.assign(static_cast<size_t>(n), 1.0);
          for (int i = 0; i < n / 2; ++i) q.rank_weights[static_cast<size_t>(i)] = heavy;
          CAPTURE(n, k, c, heavy);
          const SubnetPlan plan = SubnetPlan::build(q);
          for (int comp = 0; comp < k; ++comp) {
            REQUIRE(static_cast<long>(plan.owners(comp).size()) >= m * n / k);
            REQUIRE(static_cast<long>(plan.owners(comp).size()) <= (m * n + k - 1) / k);
          }
          // The weighted shares: min(K, lambda w_i) summing to m N (a rank
          // owns a component at most once, so a capped rank's excess goes
          // to the others), lambda by bisection.
          const auto shares = [&](double lambda) {
            double sum = 0;
            for (double w : q.rank_weights) sum += std::min<double>(k, lambda * w);
            return sum;
          };
          double lo = 0, hi = static_cast<double>(k);
          for (int it = 0; it < 200; ++it) (shares((lo + hi) / 2) < m * n ? lo : hi) = (lo + hi) / 2;
          for (int i = 0; i < n; ++i) {
            // Within one component of its share.
            const double share = std::min<double>(k, hi * q.rank_weights[static_cast<size_t>(i)]);
            const double owned = static_cast<double>(plan.owned(i).size());
            CHECK(std::abs(owned - share) < 1.0 + 1e-9);
          }
          ++checked;
        }
  REQUIRE(checked > 200);
  // Equal weights share like the other constructions: m = round(C K) each.
  PlanRequest q = request(6, 16, 0.5, PlanConstruction::weighted, 0);
  q.rank_weights.assign(6, 2.0);
  check_built_plan(SubnetPlan::build(q), 6, 16, 8);
}

TEST_CASE("weighted plans mix their ranks: 2:2:1:1 on four blocks has a positive gap",
          "[plan]") {
  PlanRequest q = request(4, 4, 0.5, PlanConstruction::weighted, 0);
  q.rank_weights = {2, 2, 1, 1};
  const SubnetPlan plan = SubnetPlan::build(q);
  CHECK(plan.owned(0).size() == 3);
  CHECK(plan.owned(3).size() == 1);
  CHECK(plan.spectral_gap() > 0.3);
}

TEST_CASE("rank weights parse sizes, numbers and repeats, and refuse the rest", "[plan]") {
  CHECK(parse_rank_weights("2,2,1,1") == std::vector<double>{2, 2, 1, 1});
  CHECK(parse_rank_weights("80GiBx2,40GiB") ==
        std::vector<double>{80.0 * (1ull << 30), 80.0 * (1ull << 30), 40.0 * (1ull << 30)});
  CHECK(parse_rank_weights("1.5x3") == std::vector<double>{1.5, 1.5, 1.5});
  for (const char* bad : {"", "2,,1", "0", "-1", "2x0", "2xq", "abc"})
    CHECK_THROWS_WITH(parse_rank_weights(bad), Contains("rank weights") && Contains("valid:"));
  PlanRequest q = request(4, 4, 0.5, PlanConstruction::weighted, 0);
  q.rank_weights = {1, 1, 1};
  CHECK_THROWS_WITH(SubnetPlan::build(q), Contains("3 rank weights for 4 ranks"));
}
