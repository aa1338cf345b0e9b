// Fuzz target: the subnet plan inputs. The first byte picks the reader:
// - even: the rest is a weighted plan's rank weights ("80GiBx4,40GiBx4",
//   parse_rank_weights, bounded by the largest world before anything is
//   expanded);
// - odd: the rest is a plan file ({"matrix": ["0101", ...]},
//   read_plan_matrix) for 1-8 ranks and 1-16 components, picked by the
//   second byte.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/plan/plan_file.h"
#include "engine/plan/rank_weights.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t selector = data[0], shape = data[1];
  if (selector % 2 == 0) {
    const std::string list(reinterpret_cast<const char*>(data + 1), size - 1);
    sdp::fuzz::expect_only_sdp_errors([&] { (void)sdp::parse_rank_weights(list); });
    return 0;
  }
  const auto path = sdp::fuzz::ProcessTempDir::path() / "plan.json";
  sdp::fuzz::write_input(path, data + 2, size - 2);
  sdp::fuzz::expect_only_sdp_errors([&] {
    (void)sdp::read_plan_matrix(path.string(), shape % 8 + 1, (shape / 8) % 16 + 1);
  });
  return 0;
}
