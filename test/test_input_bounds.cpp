// Sizes and integers that input sets are bounded and read exactly before
// anything is allocated for them or computed from them: weighted plans,
// calibration metrics and costs files, timeline and costs JSON, metrics read
// back on resume, data states and model config.json files. Each bad value
// fails naming the file or field and showing the value as written.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/data/synthetic_language.h"
#include "engine/metrics/metrics_log.h"
#include "engine/pipeline/costs_json.h"
#include "engine/pipeline/timeline.h"
#include "engine/plan/rank_weights.h"
#include "engine/plan/step_time.h"
#include "models/llama/llama_config.h"
#include "models/resnet/resnet_config.h"
#include "models/swin/swin_config.h"
#include "test/test_temp_dir.h"

using namespace sdp;
using Catch::Contains;

namespace {

// The JSON values every integer reader must refuse, as written.
const char* const kNotAnInt32[] = {"4294967296", "2147483648", "4.0", "null", "\"3\"", "-1"};

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A step record of a metrics file as sdp-train writes it.
nlohmann::json step_record(int step) {
  return {{"step", step},
          {"seconds", 0.01},
          {"flops", 1e9},
          {"comm", {{"wait_seconds", 1e-3}, {"sent_bytes", 1e6}, {"latency_steps", 4}}}};
}

std::string write_lines(const testing::TempDir& dir, const std::string& name,
                        const std::string& text) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("weighted plan: the repeat counts are summed and bounded before anything is expanded",
          "[plan][input_bounds]") {
  // 1000 x 1048576 ranks: 8 GB of weights if expanded; refused at once.
  std::string list;
  for (int i = 0; i < 1000; ++i) list += "1x1048576,";
  list += "1";
  const std::string message = error_of([&] { parse_rank_weights(list); });
  CHECK_THAT(message, Contains("name 1048576001 ranks in total") &&
                          Contains("more than the largest world of 65536 ranks"));
  // The message cuts a long list.
  CHECK(message.size() < 600);
  // Against the job's world where it is known.
  CHECK_THAT(error_of([] { parse_rank_weights("80GiBx3,40GiBx2", 4); }),
             Contains("name 5 ranks in total") && Contains("more than the job's 4 ranks"));
  CHECK(parse_rank_weights("2x3,1", 4) == std::vector<double>{2, 2, 2, 1});
  CHECK(parse_rank_weights("1x65536").size() == 65536);
  CHECK_THAT(error_of([] { parse_rank_weights("1x65536,1"); }), Contains("name 65537 ranks"));
  CHECK_THAT(error_of([] { parse_rank_weights("1x1048577"); }),
             Contains("repeat count that is not an integer in [1, 1048576]"));
}

TEST_CASE("calibration metrics: bad fields name the file, line and field", "[plan][calibrate]") {
  testing::TempDir dir;
  const auto file_with = [&](const std::string& field, const std::string& value_json) {
    nlohmann::json r = step_record(1);
    nlohmann::json& target = r.contains(field) ? r[field] : r["comm"][field];
    target = nlohmann::json::parse(value_json);
    return write_lines(dir, "m.jsonl", step_record(0).dump() + "\n" + r.dump() + "\n");
  };
  CHECK_THAT(error_of([&] { read_metrics(file_with("seconds", "null")); }),
             Contains("m.jsonl' line 2: field 'seconds' = null is invalid (valid: a step time in "
                      "seconds in (0, 1e+06])"));
  CHECK_THAT(error_of([&] { read_metrics(file_with("seconds", "0")); }),
             Contains("field 'seconds' = 0 is invalid"));
  CHECK_THAT(error_of([&] { read_metrics(file_with("flops", "1e308")); }),
             Contains("field 'flops' = 1e+308 is invalid"));
  CHECK_THAT(error_of([&] { read_metrics(file_with("flops", "\"3\"")); }),
             Contains("field 'flops' = \"3\" is invalid"));
  CHECK_THAT(error_of([&] { read_metrics(file_with("wait_seconds", "-1")); }),
             Contains("line 2: field 'wait_seconds' = -1 is invalid"));
  CHECK_THAT(error_of([&] { read_metrics(file_with("sent_bytes", "null")); }),
             Contains("field 'sent_bytes' = null is invalid"));
  for (const char* step : {"4.0", "-1", "18446744073709551615", "null"})
    CHECK_THAT(error_of([&] { read_metrics(file_with("step", step)); }),
               Contains(std::string("field 'step' = ") + step + " is invalid"));
  CHECK_THAT(error_of([&] { read_metrics(dir.path().string()); }),
             Contains("cannot read") && Contains("not a regular file"));
}

TEST_CASE("calibration metrics: a cut-off last line is skipped and said, one elsewhere fails",
          "[plan][calibrate]") {
  testing::TempDir dir;
  std::string text;
  for (int s = 1; s <= 3; ++s) text += step_record(s).dump() + "\n";
  const std::string cut = step_record(4).dump().substr(0, 40);
  const MeasuredRun run = read_metrics(write_lines(dir, "cut.jsonl", text + cut));
  CHECK(run.seconds.size() == 2);  // steps 2 and 3 (the first is left out)
  CHECK_THAT(run.skipped_cut_line, Contains("cut.jsonl' line 4 is cut off") && Contains("skipped"));
  CHECK(read_metrics(write_lines(dir, "whole.jsonl", text)).skipped_cut_line.empty());
  // Not the last line, or the last line with its newline: a damaged file.
  CHECK_THAT(error_of([&] { read_metrics(write_lines(dir, "mid.jsonl", cut + "\n" + text)); }),
             Contains("mid.jsonl' line 1 is not JSON"));
  CHECK_THAT(error_of([&] { read_metrics(write_lines(dir, "nl.jsonl", text + cut + "\n")); }),
             Contains("nl.jsonl' line 4 is not JSON"));
}

TEST_CASE("calibration: fitted rates outside what a device or link reaches are refused",
          "[plan][calibrate]") {
  MeasuredRun run;
  run.path = "fast.jsonl";
  // 1e25 FLOPs in 1 ms: 1e28 FLOP/s.
  run.seconds = {1e-3, 1e-3};
  run.flops = {1e25, 1e25};
  run.wait_seconds = {0, 0};
  run.sent_bytes = {0, 0};
  run.latency_steps = {0, 0};
  CHECK_THAT(error_of([&] { calibrate({run}, StepTimeModel{}); }),
             Contains("the FLOP rate fitted from 'fast.jsonl' is 1e+28 FLOP/s per rank (valid: "
                      "1000 to 1e+18)"));
  run.flops = {1e9, 1e9};
  // A second of waiting per latency step.
  run.seconds = {20, 40};
  run.wait_seconds = {10, 30};
  run.latency_steps = {1, 3};
  run.sent_bytes = {1, 1};
  CHECK_THAT(error_of([&] { calibrate({run}, StepTimeModel{}); }),
             Contains("the link latency fitted from 'fast.jsonl' is"));
  // Plausible measurements calibrate.
  run.seconds = {0.02, 0.04};
  run.wait_seconds = {0.01, 0.03};
  run.latency_steps = {10, 30};
  run.sent_bytes = {1e6, 2e6};
  const StepTimeModel m = calibrate({run}, StepTimeModel{});
  CHECK(m.flops_per_second > 0);
  CHECK(m.link.intra_node_bytes_per_second <= calibration_limits::kMaxBytesPerSecond);
}

TEST_CASE("pipeline JSON integers: microbatches and byte counts are read exactly",
          "[pipeline][input_bounds]") {
  const auto timeline = [](const std::string& m) {
    return nlohmann::json::parse(
        "{\"microbatches\": " + m +
        ", \"stages\": [[{\"action\": \"F0\", \"start\": 0, \"end\": 1},"
        " {\"action\": \"B0\", \"start\": 1, \"end\": 3}]]}");
  };
  CHECK(pipeline::timed_schedule_from_json(timeline("1")).schedule.microbatches == 1);
  for (const char* m : {"4294967298", "2147483648", "4.0", "null", "\"3\"", "-1"})
    CHECK_THAT(error_of([&] { pipeline::timed_schedule_from_json(timeline(m)); }),
               Contains(std::string("\"microbatches\" = ") + m + " is invalid"));

  const auto costs = [](const std::string& bytes) {
    return nlohmann::json::parse("{\"boundary_bytes\": [" + bytes + "]}");
  };
  CHECK(pipeline::costs_from_json(costs("1e9"), 2).boundary_bytes == std::vector<int64_t>{1000000000});
  CHECK(pipeline::costs_from_json(costs("4294967296"), 2).boundary_bytes ==
        std::vector<int64_t>{4294967296});
  for (const char* bytes : {"18446744073709551615", "-1", "2.5", "null", "\"3\""})
    CHECK_THAT(error_of([&] { pipeline::costs_from_json(costs(bytes), 2); }),
               Contains(std::string("boundary_bytes[0] = ") + bytes + " is invalid"));
}

TEST_CASE("metrics read back on resume: a step beyond int64 is an error, not step -1",
          "[metrics][input_bounds]") {
  testing::TempDir dir;
  const std::string path =
      write_lines(dir, "metrics.jsonl",
                  step_record(1).dump() + "\n{\"step\": 18446744073709551615, \"loss\": 1}\n");
  CHECK_THAT(error_of([&] { keep_records_through_step(path, 1); }),
             Contains("line 2: step = 18446744073709551615 is invalid (valid: an integer in [0, "));
}

TEST_CASE("data state: a position beyond int64 is shown as written", "[data][input_bounds]") {
  data::SyntheticLanguageConfig config;
  data::SyntheticLanguage source(config, 1);
  nlohmann::json state = source.state();
  state["next_window"] = std::numeric_limits<uint64_t>::max();
  CHECK_THAT(error_of([&] { source.restore(state); }),
             Contains("'next_window' = 18446744073709551615 is invalid"));
  state["next_window"] = "3";
  CHECK_THAT(error_of([&] { source.restore(state); }),
             Contains("no non-negative integer field 'next_window'"));
}

TEST_CASE("model config.json: sizes are read exactly and bounded", "[config][input_bounds]") {
  const nlohmann::json llama = llama::LlamaConfig::named("tiny").to_hf_json();
  for (const char* v : kNotAnInt32) {
    if (std::string(v) == "-1") continue;  // an integer: validate() refuses it as a size
    nlohmann::json j = llama;
    j["hidden_size"] = nlohmann::json::parse(v);
    const std::string message = error_of([&] { llama::LlamaConfig::from_hf_json(j); });
    CAPTURE(v, message);
    CHECK_THAT(message, Contains(std::string("config.json: hidden_size = ") + v + " is invalid"));
  }
  nlohmann::json huge = llama;
  huge["num_hidden_layers"] = 1 << 20;
  huge["hidden_size"] = 1 << 20;
  huge["num_attention_heads"] = 1 << 10;
  huge["num_key_value_heads"] = 1 << 10;
  huge.erase("head_dim");
  CHECK_THAT(error_of([&] { llama::LlamaConfig::from_hf_json(huge); }),
             Contains("parameters (valid: at most"));
  CHECK(llama::LlamaConfig::from_hf_json(llama).dim == 64);

  nlohmann::json resnet = resnet::ResNetConfig::named("resnet-tiny", 10).to_json();
  resnet["widths"][2] = 4294967296;
  CHECK_THAT(error_of([&] { resnet::ResNetConfig::from_json(resnet); }),
             Contains("config.json: widths[2] = 4294967296 is invalid"));
  resnet["widths"] = {16, 32};
  CHECK_THAT(error_of([&] { resnet::ResNetConfig::from_json(resnet); }),
             Contains("valid: 4 integers"));

  nlohmann::json swin = swin::SwinConfig::named("swin-micro", 10).to_json();
  swin["window_size"] = 4.0;
  CHECK_THAT(error_of([&] { swin::SwinConfig::from_json(swin); }),
             Contains("config.json: window_size = 4.0 is invalid"));
  swin = swin::SwinConfig::named("swin-micro", 10).to_json();
  swin["depths"] = std::vector<int64_t>(100000, 2);
  CHECK_THAT(error_of([&] { swin::SwinConfig::from_json(swin); }),
             Contains("a list of at most 24 integers"));
}
