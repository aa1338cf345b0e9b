// A corrupted checkpoint state file (sdp_state.json) is refused on load with
// a message naming the file, the field and what is valid, before any of it
// is used.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#include "engine/checkpoint/json_file.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/test_temp_dir.h"
#include "test/train_config_util.h"

using namespace sdp;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

TrainConfig tiny_run() { return testing::tiny_train_config(); }

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

}  // namespace

TEST_CASE("checkpoint state file: corrupted contents name the file and the field",
          "[trainer][checkpoint][errors]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp / "ckpt";
  {
    Trainer t(tiny_run());
    t.train_step();
    t.save_checkpoint(dir);
  }
  const fs::path file = dir / kStateFileName;
  const nlohmann::json good = checkpoint::read_json_file(file);
  const std::string named = "checkpoint state file '" + file.string() + "': ";
  Trainer t(tiny_run());
  auto refused = [&](const std::string& text) {
    write_text(file, text);
    try {
      t.load_checkpoint(dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  auto with = [&](const char* field, const nlohmann::json& value) {
    nlohmann::json j = good;
    j[field] = value;
    return j.dump();
  };
  CHECK_THAT(refused("[]"), Contains(named + "expected a JSON object with format_version, step, "
                                     "train_config and data, got array []"));
  CHECK_THAT(refused("null"), Contains(named + "expected a JSON object") && Contains("got null"));
  CHECK_THAT(refused(with("step", "4")),
             Contains(named + "field 'step' = \"4\" is invalid (valid: an integer in [0, "
                              "1099511627776])"));
  CHECK_THAT(refused(with("step", -1)), Contains(named + "field 'step' = -1 is invalid"));
  CHECK_THAT(refused(with("step", uint64_t{1} << 63)),
             Contains(named + "field 'step' = 9223372036854775808 is invalid"));
  CHECK_THAT(refused(with("step", 2.5)), Contains(named + "field 'step' = 2.5 is invalid"));
  nlohmann::json no_step = good;
  no_step.erase("step");
  CHECK_THAT(refused(no_step.dump()), Contains(named + "field 'step' is missing"));
  CHECK_THAT(refused(with("format_version", "1")),
             Contains(named + "format_version = \"1\" (this build reads version 1)"));
  CHECK_THAT(refused(with("train_config", 3)), Contains(named + "field 'train_config' = 3"));
  CHECK_THAT(refused(with("data", nlohmann::json::array())),
             Contains(named + "field 'data' = [] is invalid"));
  // The data source's own checks, said of the file.
  nlohmann::json bad_position = good;
  bad_position["data"]["next_window"] = "x";
  CHECK_THAT(refused(bad_position.dump()),
             Contains(named + "field 'data': synthetic source: saved data state has no "
                              "non-negative integer field 'next_window'"));
  CHECK(t.step() == 0);
  // The good file still loads.
  CHECK(refused(good.dump()) == "(loaded)");
  CHECK(t.step() == 1);
}
