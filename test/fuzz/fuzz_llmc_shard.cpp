// Fuzz target: an llm.c token shard is opened (header validated, file
// mapped), every token is read, and the same file is opened as a token
// source, whose start-up check visits every token of its split.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/data/llmc_shard.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = sdp::fuzz::ProcessTempDir::path() / "input.bin";
  sdp::fuzz::write_input(path, data, size);
  sdp::fuzz::expect_only_sdp_errors([&] {
    const sdp::data::LlmcShard shard(path.string());
    std::vector<uint32_t> tokens(static_cast<size_t>(shard.num_tokens()));
    shard.read(0, shard.num_tokens(), tokens.data());
  });
  for (const auto split : {sdp::data::Split::train, sdp::data::Split::val}) {
    sdp::fuzz::expect_only_sdp_errors([&] {
      // A small vocabulary makes the range check reject most tokens.
      const sdp::data::LlmcTokenSource source({path.string()}, 1000, split);
      (void)source.describe();
    });
  }
  return 0;
}
