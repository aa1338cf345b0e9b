// TrainConfig reads integers exactly and bounds every count, so that no
// value wraps, truncates or overflows a product downstream.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "engine/parallel/strategy.h"
#include "engine/train/train_config.h"

using namespace sdp;
using Catch::Contains;

namespace {
// The message of the ConfigFieldError `f` throws, and that it names `field`.
template <typename F>
std::string field_error(F&& f, const std::string& field) {
  try {
    f();
  } catch (const ConfigFieldError& e) {
    CHECK(e.field() == field);
    return e.what();
  }
  FAIL("no ConfigFieldError for field " << field);
  return "";
}
}  // namespace

TEST_CASE("config JSON: integers are read exactly, never wrapped or truncated", "[config]") {
  using nlohmann::json;
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"seed", -1}}); }, "seed"),
             Contains("field 'seed' = -1 is out of range (valid: an integer in [0, "
                      "18446744073709551615])"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"batch", 2.5}}); }, "batch"),
             Contains("field 'batch' has the wrong type (number 2.5; expected an integer in "
                      "[-9223372036854775808, 9223372036854775807])"));
  // A float that happens to be whole is still not an integer field's value.
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"steps", 4.0}}); }, "steps"),
             Contains("field 'steps' has the wrong type"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"threads", int64_t{1} << 31}}); },
                         "threads"),
             Contains("field 'threads' = 2147483648 is out of range (valid: an integer in "
                      "[-2147483648, 2147483647])"));
  CHECK_THAT(field_error(
                 [] {
                   TrainConfig::from_json(
                       {{"emulate_world", std::numeric_limits<uint64_t>::max()}});
                 },
                 "emulate_world"),
             Contains("field 'emulate_world' = 18446744073709551615 is out of range"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"progress", 1}}); }, "progress"),
             Contains("field 'progress' has the wrong type (number 1; expected true or false)"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"model", 3}}); }, "model"),
             Contains("expected a string"));
  // Values in range keep their exact value, the largest seed included.
  const TrainConfig c = TrainConfig::from_json(
      {{"seed", std::numeric_limits<uint64_t>::max()}, {"batch", 3}, {"lr", 1}});
  CHECK(c.seed == std::numeric_limits<uint64_t>::max());
  CHECK(c.batch == 3);
  CHECK(c.lr == 1.0);
  CHECK(TrainConfig::from_json(c.to_json()).to_json() == c.to_json());
}

TEST_CASE("config: every count has an upper bound, and products of counts are bounded",
          "[config]") {
  namespace L = config_limits;
  auto check_bound = [](auto set, const std::string& field, const std::string& text) {
    TrainConfig c;
    set(c);
    CHECK_THAT(field_error([&] { c.validate(); }, field), Contains(text));
  };
  check_bound([](TrainConfig& c) { c.batch = L::kBatch + 1; }, "batch",
              "batch = 16777217 is invalid (valid: [1, 16777216])");
  check_bound([](TrainConfig& c) { c.batch = int64_t{1} << 62; }, "batch",
              "batch = 4611686018427387904 is invalid");
  check_bound([](TrainConfig& c) { c.seq = L::kSeq + 1; }, "seq", "seq = 16777217 is invalid");
  check_bound([](TrainConfig& c) { c.batch = 1 << 20; c.seq = 1 << 12; }, "batch",
              "batch * seq must be <= 2147483648 tokens per micro-batch");
  check_bound([](TrainConfig& c) { c.batch = 1 << 20; c.seq = 1 << 11; c.grad_accum = 1 << 10; },
              "grad_accum", "batch * seq * grad_accum must be <= 1099511627776");
  check_bound([](TrainConfig& c) { c.grad_accum = L::kGradAccum + 1; }, "grad_accum",
              "grad_accum = 1048577 is invalid");
  const std::pair<const char*, int64_t TrainConfig::*> step_counts[] = {
      {"steps", &TrainConfig::steps},
      {"warmup", &TrainConfig::warmup},
      {"eval_every", &TrainConfig::eval_every},
      {"save_every", &TrainConfig::save_every},
      {"skip_nonfinite", &TrainConfig::skip_nonfinite}};
  for (const auto& [field, member] : step_counts)
    check_bound(
        [&, member = member](TrainConfig& c) {
          c.*member = L::kSteps + 1;
          c.save_dir = "unused";
        },
        field, std::string(field) + " = 1099511627777 is invalid (valid: [0, 1099511627776])");
  check_bound([](TrainConfig& c) { c.skip_nonfinite = -1; }, "skip_nonfinite",
              "skip_nonfinite = -1 is invalid");
  check_bound([](TrainConfig& c) { c.eval_batches = L::kEvalBatches + 1; }, "eval_batches",
              "eval_batches = 1048577 is invalid");
  check_bound([](TrainConfig& c) { c.recalibration_images = L::kImages + 1; },
              "recalibration_images", "recalibration_images = 1099511627777 is invalid");
  check_bound([](TrainConfig& c) { c.parallel.ffn_groups = int64_t{1} << 31; }, "ffn_groups",
              "ffn_groups = 2147483648 is invalid (valid: [0, 65536])");
  check_bound([](TrainConfig& c) { c.parallel.head_groups = L::kGroups + 1; }, "head_groups",
              "head_groups = 65537 is invalid");
  check_bound([](TrainConfig& c) { c.parallel.channel_groups = L::kGroups + 1; }, "channel_groups",
              "channel_groups = 65537 is invalid");
  check_bound([](TrainConfig& c) { c.emulate_world = int64_t{1} << 31; }, "emulate_world",
              "emulate_world = 2147483648 is invalid (valid: [0, 65536]: 0 = off)");
  check_bound([](TrainConfig& c) { c.threads = max_threads() + 1; }, "threads",
              "the logical CPUs this process may use");
  check_bound([](TrainConfig& c) { c.bucket_mb = 1e12; }, "bucket_mb",
              "(valid: -1 = auto, 0 = no buckets, or (0, 1048576] MiB)");
  check_bound([](TrainConfig& c) { c.comm_timeout = 1e300; }, "comm_timeout",
              "(valid: [0, 31536000] seconds");
  check_bound([](TrainConfig& c) { c.comm_timeout = std::numeric_limits<double>::quiet_NaN(); },
              "comm_timeout", "comm_timeout = nan is invalid");
  // The bounds themselves are valid.
  TrainConfig edge;
  edge.batch = L::kBatch;
  edge.seq = 128;
  edge.emulate_world = L::kWorld;
  edge.emulate_rank = L::kWorld - 1;
  edge.threads = max_threads();
  edge.comm_timeout = L::kCommTimeout;
  edge.skip_nonfinite = L::kSteps;
  CHECK_NOTHROW(edge.validate());
}

TEST_CASE("strategy: group counts beyond int are refused, not read as automatic", "[config]") {
  TrainConfig c;
  c.model = "tiny";
  c.parallel.strategy = "n-sdp";
  c.parallel.active_fraction = 0.5;
  c.parallel.ffn_groups = int64_t{1} << 31;  // wraps to a negative int
  REQUIRE_THROWS_WITH(StrategySpec::from_settings(c.parallel, c.model),
                      Catch::Contains("ffn_groups = 2147483648 is invalid (valid: [0, 65536])"));
  c.parallel.ffn_groups = 0;
  c.parallel.head_groups = -1;
  REQUIRE_THROWS_WITH(StrategySpec::from_settings(c.parallel, c.model),
                      Catch::Contains("head_groups = -1 is invalid"));
}
