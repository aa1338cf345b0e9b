#include "engine/plan/spectral_gap.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <unordered_map>

#include <omp.h>

#include "engine/core/error.h"
#include "engine/core/host_memory.h"

// LAPACK's symmetric eigensolver. OpenBLAS ships LAPACK in the same library
// (sdp::blas, which the engine links through the kernels), but Debian installs
// no LAPACK header with it, so the Fortran symbol is declared here. The two
// trailing arguments are the hidden lengths of the character arguments that
// gfortran-built LAPACK expects; passing them is harmless where they are unused.
extern "C" void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
                       double* w, double* work, const int* lwork, int* info, std::size_t jobz_len,
                       std::size_t uplo_len);

namespace sdp {

namespace {

// One row of owns, 64 components a word: distinct rows are found by hashing
// these, and two rows' co-owned count is a popcount of their AND.
using PackedRow = std::vector<uint64_t>;

struct PackedRowHash {
  size_t operator()(const PackedRow& row) const {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t w : row) h = (h ^ w) * 0x100000001b3ull + (h >> 29);
    return static_cast<size_t>(h);
  }
};

// The distinct owning rows of a plan, with what the reduction needs of each.
struct DistinctRows {
  std::vector<PackedRow> bits;       // [U] rows, packed
  std::vector<std::vector<int>> owned;  // [U] component ids of each row
  std::vector<double> count;         // [U] c_u: ranks with this row
  std::vector<double> degree;        // [U] D of those ranks: sum over owned k of owners(k)
  int64_t isolated = 0;              // ranks that own nothing
  int64_t owning = 0;                // ranks that own something: N - isolated
};

DistinctRows distinct_rows(const std::vector<std::vector<bool>>& owns) {
  const size_t components = owns[0].size();
  const size_t words = (components + 63) / 64;
  std::vector<double> owners(components, 0.0);
  for (const auto& row : owns)
    for (size_t k = 0; k < components; ++k) owners[k] += row[k];

  DistinctRows rows;
  std::unordered_map<PackedRow, size_t, PackedRowHash> index;
  PackedRow packed(words);
  for (const auto& row : owns) {
    std::fill(packed.begin(), packed.end(), 0);
    bool any = false;
    for (size_t k = 0; k < components; ++k)
      if (row[k]) {
        packed[k / 64] |= uint64_t{1} << (k % 64);
        any = true;
      }
    if (!any) {
      ++rows.isolated;
      continue;
    }
    ++rows.owning;
    const auto [it, added] = index.try_emplace(packed, rows.bits.size());
    if (!added) {
      rows.count[it->second] += 1;
      continue;
    }
    rows.bits.push_back(packed);
    std::vector<int> ids;
    double degree = 0;
    for (size_t k = 0; k < components; ++k)
      if (row[k]) {
        ids.push_back(static_cast<int>(k));
        degree += owners[k];
      }
    rows.owned.push_back(std::move(ids));
    rows.count.push_back(1);
    rows.degree.push_back(degree);
  }
  return rows;
}

// diag(c)^1/2 R' R'^T diag(c)^1/2, U x U: entry (u, v) is
// sqrt(c_u c_v) shared(u, v) / sqrt(D_u D_v).
void fill_row_side(const DistinctRows& rows, std::vector<double>& s) {
  const size_t U = rows.bits.size();
  for (size_t u = 0; u < U; ++u)
    for (size_t v = u; v < U; ++v) {
      int shared = 0;
      for (size_t w = 0; w < rows.bits[u].size(); ++w)
        shared += std::popcount(rows.bits[u][w] & rows.bits[v][w]);
      const double value = std::sqrt(rows.count[u] * rows.count[v]) * shared /
                           std::sqrt(rows.degree[u] * rows.degree[v]);
      s[u * U + v] = s[v * U + u] = value;
    }
}

// R'^T diag(c) R', K x K: entry (k, l) sums c_u / D_u over the rows owning both.
void fill_component_side(const DistinctRows& rows, size_t components, std::vector<double>& s) {
  for (size_t u = 0; u < rows.owned.size(); ++u) {
    const double weight = rows.count[u] / rows.degree[u];
    for (int k : rows.owned[u])
      for (int l : rows.owned[u]) s[static_cast<size_t>(k) * components + l] += weight;
  }
}

// Eigenvalues of the symmetric n x n matrix s (destroyed), ascending.
std::vector<double> symmetric_eigenvalues(std::vector<double>& s, int n) {
  // The OpenMP build of OpenBLAS sizes its team from this thread's
  // omp_get_max_threads() on every call. A mask graph is usually tiny, and
  // waking a team for it costs milliseconds per call on a busy machine, so
  // small ones run on one thread; the setting is this thread's own and is
  // restored. Matrices of hundreds keep the threads.
  struct ThreadLimit {
    int previous = omp_get_max_threads();
    explicit ThreadLimit(int limit) { omp_set_num_threads(std::min(previous, limit)); }
    ~ThreadLimit() { omp_set_num_threads(previous); }
  } thread_limit(n < 256 ? 1 : omp_get_max_threads());

  const char jobz = 'N', uplo = 'U';
  std::vector<double> eigenvalues(static_cast<size_t>(n));
  int lwork = -1, info = 0;
  double work_size = 0;
  dsyev_(&jobz, &uplo, &n, s.data(), &n, eigenvalues.data(), &work_size, &lwork, &info, 1, 1);
  SDP_CHECK(info == 0, "LAPACK dsyev workspace query failed with info = ", info);
  lwork = std::max(1, static_cast<int>(work_size));
  std::vector<double> work(static_cast<size_t>(lwork));
  dsyev_(&jobz, &uplo, &n, s.data(), &n, eigenvalues.data(), work.data(), &lwork, &info, 1, 1);
  SDP_CHECK(info == 0, "LAPACK dsyev failed with info = ", info, " on the ", n, "x", n,
            " mask graph matrix");
  return eigenvalues;
}

}  // namespace

uint64_t spectral_gap_matrix_bytes(int64_t dimension) {
  const uint64_t n = static_cast<uint64_t>(dimension);
  return n * n * sizeof(double);
}

void check_spectral_gap_fits(int64_t ranks, int64_t distinct_rows, int64_t components,
                             uint64_t usable_bytes) {
  const int64_t dimension = std::min(distinct_rows, components);
  const uint64_t bytes = spectral_gap_matrix_bytes(dimension);
  if (bytes <= usable_bytes) return;
  const auto largest =
      static_cast<int64_t>(std::sqrt(static_cast<double>(usable_bytes) / sizeof(double)));
  fail("the spectral gap of a ", ranks, "-rank plan with ", distinct_rows,
       " distinct rank rows and ", components, " components needs a dense ", dimension, " x ",
       dimension, " f64 matrix (", gib_text(static_cast<double>(bytes)), "), more than the ",
       gib_text(static_cast<double>(usable_bytes)),
       " of memory this process may use; up to about ", largest,
       " components (or distinct rows) fit");
}

double mask_graph_spectral_gap(const std::vector<std::vector<bool>>& owns) {
  SDP_CHECK(!owns.empty(), "spectral gap of a plan with no ranks");
  if (owns.size() == 1) return 1.0;
  const size_t components = owns[0].size();
  const DistinctRows rows = distinct_rows(owns);
  const size_t U = rows.bits.size();
  check_spectral_gap_fits(static_cast<int64_t>(owns.size()), static_cast<int64_t>(U),
                          static_cast<int64_t>(components), usable_host_memory_bytes());

  const bool row_side = U <= components;
  const size_t dimension = row_side ? U : components;
  std::vector<double> eigenvalues;
  if (dimension > 0) {
    std::vector<double> s;
    try {
      s.assign(dimension * dimension, 0.0);
    } catch (const std::bad_alloc&) {
      fail("the spectral gap needs a dense ", dimension, " x ", dimension, " f64 matrix (",
           gib_text(static_cast<double>(spectral_gap_matrix_bytes(
               static_cast<int64_t>(dimension)))),
           ") and allocating it failed; more free memory is needed");
    }
    if (row_side)
      fill_row_side(rows, s);
    else
      fill_component_side(rows, components, s);
    eigenvalues = symmetric_eigenvalues(s, static_cast<int>(dimension));
  }
  // The rest of S's spectrum: zeros where the owning ranks outnumber the
  // reduced dimension, and a 1 for each isolated rank (two are enough to
  // decide lambda_2).
  if (rows.owning > static_cast<int64_t>(dimension)) eigenvalues.push_back(0.0);
  for (int64_t i = 0; i < std::min<int64_t>(rows.isolated, 2); ++i) eigenvalues.push_back(1.0);
  std::sort(eigenvalues.begin(), eigenvalues.end());
  // The largest is 1. Rounding can push the gap a few ulps outside [0, 1].
  const double lambda2 = eigenvalues[eigenvalues.size() - 2];
  return std::clamp(1.0 - lambda2, 0.0, 1.0);
}

}  // namespace sdp
