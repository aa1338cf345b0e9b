// Fuzz target: the calibration inputs. The input is read as an sdp-train
// metrics file (read_metrics, as sdp-plan --calibrate reads it), and when it
// holds step records the step-time model is calibrated on it (calibrate);
// then as the costs file of a measured pipeline run (load_costs, as
// sdp-pipeline --costs and --calibrate read it) for 1 to 4 stages.
#include <cstddef>
#include <cstdint>

#include "engine/pipeline/costs_json.h"
#include "engine/plan/step_time.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = sdp::fuzz::ProcessTempDir::path() / "metrics.jsonl";
  sdp::fuzz::write_input(path, data, size);
  sdp::fuzz::expect_only_sdp_errors([&] {
    const sdp::MeasuredRun run = sdp::read_metrics(path.string());
    (void)sdp::calibrate({run}, sdp::StepTimeModel{});
  });
  for (int stages = 1; stages <= 4; ++stages)
    sdp::fuzz::expect_only_sdp_errors([&] { (void)sdp::pipeline::load_costs(path.string(), stages); });
  return 0;
}
