#include "engine/plan/spectral_gap.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <new>

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

uint64_t spectral_gap_matrix_bytes(int64_t ranks) {
  const uint64_t n = static_cast<uint64_t>(ranks);
  return n * n * sizeof(double);
}

void check_spectral_gap_fits(int64_t ranks, uint64_t usable_bytes) {
  const uint64_t bytes = spectral_gap_matrix_bytes(ranks);
  if (bytes <= usable_bytes) return;
  const auto largest =
      static_cast<int64_t>(std::sqrt(static_cast<double>(usable_bytes) / sizeof(double)));
  fail("the spectral gap of a ", ranks, "-rank plan needs a dense ", ranks, " x ", ranks,
       " f64 matrix (", gib_text(static_cast<double>(bytes)), "), more than the ",
       gib_text(static_cast<double>(usable_bytes)),
       " of memory this process may use; worlds up to about ", largest,
       " ranks fit (the matrix grows with the square of the world)");
}

double mask_graph_spectral_gap(const std::vector<std::vector<bool>>& owns) {
  const int n = static_cast<int>(owns.size());
  SDP_CHECK(n >= 1, "spectral gap of a plan with no ranks");
  if (n == 1) return 1.0;
  const size_t ranks = owns.size();
  const size_t components = owns[0].size();
  check_spectral_gap_fits(n, usable_host_memory_bytes());

  // co[i][j]: components co-owned by ranks i and j (the matrix A); one
  // matrix, turned into S in place below. The process's other memory may
  // still leave too little for it.
  std::vector<double> co;
  try {
    co.assign(ranks * ranks, 0.0);
  } catch (const std::bad_alloc&) {
    fail("the spectral gap of a ", n, "-rank plan needs a dense ", n, " x ", n, " f64 matrix (",
         gib_text(static_cast<double>(spectral_gap_matrix_bytes(n))),
         ") and allocating it failed; a smaller world, or more free memory, is needed");
  }
  for (size_t i = 0; i < ranks; ++i)
    for (size_t j = i; j < ranks; ++j) {
      int shared = 0;
      for (size_t k = 0; k < components; ++k) shared += owns[i][k] && owns[j][k];
      co[i * ranks + j] = co[j * ranks + i] = shared;
    }
  std::vector<double> degree(ranks, 0.0);
  for (size_t i = 0; i < ranks; ++i)
    for (size_t j = 0; j < ranks; ++j) degree[i] += co[i * ranks + j];

  // S = D^-1/2 A D^-1/2 (symmetric, so row- and column-major agree), in
  // place of A; an isolated rank (its row and column of A are zero) becomes
  // a unit diagonal entry, its own closed component.
  std::vector<double>& s = co;
  for (size_t i = 0; i < ranks; ++i) {
    if (degree[i] == 0) {
      s[i * ranks + i] = 1.0;
      continue;
    }
    for (size_t j = 0; j < ranks; ++j)
      if (degree[j] != 0) s[i * ranks + j] = co[i * ranks + j] / std::sqrt(degree[i] * degree[j]);
  }

  // The OpenMP build of OpenBLAS sizes its team from this thread's
  // omp_get_max_threads() on every call. A mask graph is usually tiny, and
  // waking a team for it costs milliseconds per call on a busy machine, so
  // small ones run on one thread; the setting is this thread's own and is
  // restored. Worlds of hundreds of ranks keep the threads.
  struct ThreadLimit {
    int previous = omp_get_max_threads();
    explicit ThreadLimit(int limit) { omp_set_num_threads(std::min(previous, limit)); }
    ~ThreadLimit() { omp_set_num_threads(previous); }
  } thread_limit(n < 256 ? 1 : omp_get_max_threads());

  const char jobz = 'N', uplo = 'U';
  std::vector<double> eigenvalues(ranks);
  int lwork = -1, info = 0;
  double work_size = 0;
  dsyev_(&jobz, &uplo, &n, s.data(), &n, eigenvalues.data(), &work_size, &lwork, &info, 1, 1);
  SDP_CHECK(info == 0, "LAPACK dsyev workspace query failed with info = ", info);
  lwork = std::max(1, static_cast<int>(work_size));
  std::vector<double> work(static_cast<size_t>(lwork));
  dsyev_(&jobz, &uplo, &n, s.data(), &n, eigenvalues.data(), work.data(), &lwork, &info, 1, 1);
  SDP_CHECK(info == 0, "LAPACK dsyev failed with info = ", info, " on the ", n, "x", n,
            " mask graph matrix");

  // dsyev returns eigenvalues in ascending order; the largest is 1. Rounding
  // can push the gap a few ulps outside [0, 1].
  const double lambda2 = eigenvalues[ranks - 2];
  return std::clamp(1.0 - lambda2, 0.0, 1.0);
}

}  // namespace sdp
