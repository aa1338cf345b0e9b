// Fuzz target: the JSON files a run reads. The input is read as a training
// config file (read_json_file, TrainConfig::from_json, validate) and as the
// `latest` file of a save directory (resolve_checkpoint).
#include <cstddef>
#include <cstdint>

#include "engine/checkpoint/json_file.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/train_config.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto save_dir = sdp::fuzz::ProcessTempDir::path() / "save";
  const auto latest = save_dir / "latest";
  sdp::fuzz::write_input(latest, data, size);
  sdp::fuzz::expect_only_sdp_errors([&] {
    const nlohmann::json j = sdp::checkpoint::read_json_file(latest);
    const sdp::TrainConfig config = sdp::TrainConfig::from_json(j);
    config.validate();
    // A valid config must survive its own round trip.
    if (sdp::TrainConfig::from_json(config.to_json()).to_json() != config.to_json()) {
      std::fprintf(stderr, "config does not round-trip through JSON\n");
      std::abort();
    }
  });
  sdp::fuzz::expect_only_sdp_errors([&] { (void)sdp::resolve_checkpoint(save_dir); });
  return 0;
}
