// Fuzz target: the pipeline schedule and timeline files. The input is read
// as a schedule file (load_valid_schedule, as sdp-train's schedule =
// file:PATH and sdp-pipeline's --schedule read it) and, when it validates,
// simulated at the default costs; then as a measured timeline
// (load_timeline) and, when that loads, turned into simulation costs
// (measured_costs), as sdp-pipeline --timeline does.
#include <cstddef>
#include <cstdint>

#include "engine/pipeline/measured_costs.h"
#include "engine/pipeline/schedule.h"
#include "engine/pipeline/schedule_simulator.h"
#include "engine/pipeline/timeline.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = sdp::fuzz::ProcessTempDir::path() / "schedule.json";
  sdp::fuzz::write_input(path, data, size);
  sdp::fuzz::expect_only_sdp_errors([&] {
    const sdp::pipeline::Schedule schedule = sdp::pipeline::load_valid_schedule(path.string());
    (void)sdp::pipeline::simulate(schedule);
  });
  sdp::fuzz::expect_only_sdp_errors([&] {
    const sdp::pipeline::TimedSchedule timed = sdp::pipeline::load_timeline(path.string());
    (void)sdp::pipeline::measured_costs(timed.schedule, timed.timeline);
  });
  return 0;
}
