#pragma once
// Row-parallel loops shared by the row-wise kernels (RMSNorm, cross-entropy):
// rows [0, n) are cut into chunks of `chunk` rows, one OpenMP task each;
// below `parallel_min` elements in all one thread does everything, since
// waking a team costs more than the work.
#include <algorithm>
#include <cstdint>

namespace sdp::cpu {

// Calls rows(lo, hi) for consecutive ranges covering [0, n).
template <typename RowsFn>
void for_row_chunks(int64_t n, int64_t row_elems, int64_t chunk, int64_t parallel_min,
                    const RowsFn& rows) {
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n * row_elems >= parallel_min)
  for (int64_t c = 0; c < chunks; ++c) rows(c * chunk, std::min(n, (c + 1) * chunk));
}

}  // namespace sdp::cpu
