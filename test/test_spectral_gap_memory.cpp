// The plan's dense rank x rank matrix is sized before it is allocated: a
// world whose matrix exceeds the usable memory fails saying what fits.
#include <catch2/catch.hpp>

#include <cstdint>

#include "engine/core/host_memory.h"
#include "engine/plan/spectral_gap.h"

using namespace sdp;

TEST_CASE("spectral gap: a world whose dense matrix cannot fit is refused up front", "[plan]") {
  const uint64_t gib = uint64_t{1} << 30;
  CHECK(spectral_gap_matrix_bytes(65536) == 32 * gib);
  REQUIRE_THROWS_WITH(check_spectral_gap_fits(65536, 24 * gib),
                      "the spectral gap of a 65536-rank plan needs a dense 65536 x 65536 f64 "
                      "matrix (32.0 GiB), more than the 24.0 GiB of memory this process may "
                      "use; worlds up to about 56755 ranks fit (the matrix grows with the square "
                      "of the world)");
  CHECK_NOTHROW(check_spectral_gap_fits(56755, 24 * gib));
  CHECK_THROWS(check_spectral_gap_fits(56756, 24 * gib));
  CHECK(usable_host_memory_bytes() > 0);
}
