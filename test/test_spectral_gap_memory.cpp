// The spectral gap is solved on the plan's distinct rows or its components,
// whichever are fewer, never on a dense rank x rank matrix: checked against a
// plain dense reference (Jacobi rotations on S = D^-1/2 A D^-1/2) on plans with
// repeated and empty rows, and on a 65,536-rank plan. The reduced matrix is
// sized before it is allocated, and one that cannot fit is refused naming it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/core/host_memory.h"
#include "engine/plan/spectral_gap.h"
#include "engine/plan/subnet_plan.h"

using namespace sdp;

namespace {

using Owns = std::vector<std::vector<bool>>;

// Eigenvalues of a small symmetric matrix by cyclic Jacobi rotations.
std::vector<double> jacobi_eigenvalues(std::vector<std::vector<double>> a) {
  const size_t n = a.size();
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) off += a[p][q] * a[p][q];
    if (off < 1e-30) break;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) {
        if (std::abs(a[p][q]) < 1e-300) continue;
        const double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (size_t k = 0; k < n; ++k) {  // columns p, q
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (size_t k = 0; k < n; ++k) {  // rows p, q
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
      }
  }
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = a[i][i];
  std::sort(w.begin(), w.end());
  return w;
}

// The definition, literally: A, D, S on all N ranks, isolated ranks as 1s.
double dense_reference_gap(const Owns& owns) {
  const size_t n = owns.size(), k = owns[0].size();
  if (n == 1) return 1.0;
  std::vector<std::vector<double>> a(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      for (size_t c = 0; c < k; ++c) a[i][j] += owns[i][c] && owns[j][c];
  std::vector<double> d(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) d[i] += a[i][j];
  std::vector<std::vector<double>> s(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (d[i] > 0 && d[j] > 0) s[i][j] = a[i][j] / std::sqrt(d[i] * d[j]);
  for (size_t i = 0; i < n; ++i)
    if (d[i] == 0) s[i][i] = 1.0;
  const auto w = jacobi_eigenvalues(s);
  return std::clamp(1.0 - w[n - 2], 0.0, 1.0);
}

}  // namespace

TEST_CASE("spectral gap: the reduced solve equals the dense definition", "[plan]") {
  std::mt19937 rng(7);
  int row_side = 0, component_side = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 30), k = 1 + static_cast<int>(rng() % 12);
    // Few distinct rows, repeated: draw a palette and pick rows from it, with
    // an empty row in the palette now and then (an isolated rank).
    const int palette_size = 1 + static_cast<int>(rng() % 8);
    Owns palette(palette_size, std::vector<bool>(k));
    for (auto& row : palette)
      for (int c = 0; c < k; ++c) row[c] = rng() % 3 != 0;
    if (trial % 5 == 0) palette[0].assign(k, false);
    Owns owns(n);
    for (auto& row : owns) row = palette[rng() % palette_size];
    std::sort(owns.begin(), owns.end());
    const int distinct = static_cast<int>(std::unique(owns.begin(), owns.end()) - owns.begin());
    for (auto& row : owns) row = palette[rng() % palette_size];  // redraw, unsorted
    (distinct <= k ? row_side : component_side) += 1;
    CAPTURE(trial, n, k);
    REQUIRE(mask_graph_spectral_gap(owns) == Approx(dense_reference_gap(owns)).margin(1e-10));
  }
  // Distinct rows each way, and plans whose rows are all different.
  CHECK(row_side > 0);
  CHECK(component_side > 0);
  for (int n : {2, 5, 9})
    for (int k : {3, 8, 20}) {
      Owns owns(n, std::vector<bool>(k));
      for (auto& row : owns)
        for (int c = 0; c < k; ++c) row[c] = rng() % 2;
      for (int c = 0; c < k; ++c) owns[static_cast<size_t>(c % n)][c] = true;
      CAPTURE(n, k);
      REQUIRE(mask_graph_spectral_gap(owns) == Approx(dense_reference_gap(owns)).margin(1e-10));
    }
}

TEST_CASE("spectral gap: a 65,536-rank cyclic plan is solved on its components", "[plan]") {
  PlanRequest request;
  request.world = 65536;
  request.components = 16;
  request.active_fraction = 0.5;
  const auto plan = SubnetPlan::build(request);
  // The same plan at 64 ranks has the same distinct rows, each 1024 times
  // fewer: the random walk on distinct rows is the same, so is the gap.
  request.world = 64;
  const auto small = SubnetPlan::build(request);
  REQUIRE(plan.spectral_gap() > 0.0);
  REQUIRE(plan.spectral_gap() == Approx(small.spectral_gap()).margin(1e-10));
  REQUIRE(small.spectral_gap() ==
          Approx(dense_reference_gap([&] {
            Owns owns(64, std::vector<bool>(16));
            for (int i = 0; i < 64; ++i)
              for (int c = 0; c < 16; ++c) owns[i][c] = small.owns(i, c);
            return owns;
          }()))
              .margin(1e-10));
}

TEST_CASE("spectral gap: a reduced matrix that cannot fit is refused up front", "[plan]") {
  const uint64_t gib = uint64_t{1} << 30;
  CHECK(spectral_gap_matrix_bytes(65536) == 32 * gib);
  REQUIRE_THROWS_WITH(check_spectral_gap_fits(100000, 70000, 65536, 24 * gib),
                      "the spectral gap of a 100000-rank plan with 70000 distinct rank rows and "
                      "65536 components needs a dense 65536 x 65536 f64 matrix (32.0 GiB), more "
                      "than the 24.0 GiB of memory this process may use; up to about 56755 "
                      "components (or distinct rows) fit");
  CHECK_NOTHROW(check_spectral_gap_fits(65536, 56755, 1 << 20, 24 * gib));
  CHECK_NOTHROW(check_spectral_gap_fits(1 << 20, 1 << 20, 64, 24 * gib));
  CHECK_THROWS(check_spectral_gap_fits(1 << 20, 56756, 1 << 20, 24 * gib));
  CHECK(usable_host_memory_bytes() > 0);
}
