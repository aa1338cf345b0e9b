// Inputs the fuzz targets (test/fuzz) found that ended in something other
// than an sdp::Error: each must now be refused with a message naming the
// file or field and what is wrong.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/train/train_config.h"
#include "test/test_temp_dir.h"

using sdp::TrainConfig;
using sdp::testing::TempDir;

namespace {
void write_text(const std::filesystem::path& p, const std::string& text) {
  sdp::testing::write_bytes(p, std::vector<uint8_t>(text.begin(), text.end()));
}
// A safetensors file whose header is `header`, padded, with `data_bytes` zeros.
void write_safetensors_header(const std::filesystem::path& p, std::string header,
                              size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  sdp::testing::write_bytes(p, bytes);
}
}  // namespace

TEST_CASE("a JSON number beyond double's range is an error naming the file", "[fuzz]") {
  TempDir dir;
  write_text(dir / "config.json", R"({"lr": 1e400})");
  REQUIRE_THROWS_AS(sdp::checkpoint::read_json_file(dir / "config.json"), sdp::Error);
  REQUIRE_THROWS_WITH(sdp::checkpoint::read_json_file(dir / "config.json"),
                      Catch::Contains("config.json") && Catch::Contains("number overflow"));
  write_safetensors_header(dir / "a.safetensors",
                           R"({"a": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}})",
                           4);
  REQUIRE_THROWS_AS(sdp::checkpoint::SafetensorsFile(dir / "a.safetensors"), sdp::Error);
  REQUIRE_THROWS_WITH(sdp::checkpoint::SafetensorsFile(dir / "a.safetensors"),
                      Catch::Contains("a.safetensors") && Catch::Contains("invalid JSON header"));
}

TEST_CASE("an empty safetensors tensor whose other dims overflow int64 is refused", "[fuzz]") {
  // numel is 0, but the strides of [0, 2^40, 2^40] would overflow.
  TempDir dir;
  write_safetensors_header(
      dir / "e.safetensors",
      R"({"e": {"dtype": "F32", "shape": [0, 1099511627776, 1099511627776], "data_offsets": [0, 0]}})",
      0);
  REQUIRE_THROWS_WITH(sdp::checkpoint::SafetensorsFile(dir / "e.safetensors"),
                      Catch::Contains("tensor 'e'") && Catch::Contains("overflows"));
  // Empty tensors with dims that fit are fine.
  write_safetensors_header(
      dir / "ok.safetensors",
      R"({"e": {"dtype": "F32", "shape": [0, 1099511627776], "data_offsets": [0, 0]}})", 0);
  sdp::checkpoint::SafetensorsFile ok(dir / "ok.safetensors");
  REQUIRE(ok.info("e").nbytes == 0);
}

TEST_CASE("config integer fields take only integers in their type's range", "[fuzz]") {
  using nlohmann::json;
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"batch": 2.5})")),
                      Catch::Contains("field 'batch' has the wrong type (number 2.5; expected an integer"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"steps": 1e30})")),
                      Catch::Contains("field 'steps' has the wrong type (number") && Catch::Contains("expected an integer"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"threads": 4294967296})")),
                      Catch::Contains("field 'threads' = 4294967296 is out of range") &&
                          Catch::Contains("[-2147483648, 2147483647]"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"seed": -1})")),
                      Catch::Contains("field 'seed' = -1 is out of range") &&
                          Catch::Contains("[0, 18446744073709551615]"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"batch": true})")),
                      Catch::Contains("field 'batch' has the wrong type (boolean true; expected an integer"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"lr": true})")),
                      Catch::Contains("field 'lr' has the wrong type (boolean"));
  REQUIRE_THROWS_WITH(TrainConfig::from_json(json::parse(R"({"progress": 1})")),
                      Catch::Contains("field 'progress' has the wrong type (number"));
  // What is valid still reads: integers for doubles, the full uint64 range.
  const TrainConfig c =
      TrainConfig::from_json(json::parse(R"({"lr": 1, "seed": 18446744073709551615, "threads": -0})"));
  REQUIRE(c.lr == 1.0);
  REQUIRE(c.seed == UINT64_MAX);
  REQUIRE(c.threads == 0);
  REQUIRE(TrainConfig::from_json(c.to_json()).to_json() == c.to_json());
}
