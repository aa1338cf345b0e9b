// The metrics file: a resumed run continues it without duplicated steps,
// and a failed write is an error, never a silently truncated file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/metrics/metrics_log.h"
#include "test/test_temp_dir.h"

using namespace sdp;
using sdp::testing::TempDir;

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string step_line(int step) {
  return nlohmann::json{{"step", step}, {"loss", 1.0 / step}}.dump() + "\n";
}

}  // namespace

TEST_CASE("metrics: a resumed run keeps the records through its step, drops later ones",
          "[metrics]") {
  TempDir dir;
  const auto file = dir / "m.jsonl";
  // A first attempt that ran 7 steps, checkpointed at 4, and died in the
  // middle of writing step 8.
  std::string through4;
  for (int s = 1; s <= 4; ++s) through4 += step_line(s);
  std::string text = through4;
  for (int s = 5; s <= 7; ++s) text += step_line(s);
  text += "{\"step\": 8, \"loss\": 0.1";  // cut off
  write_text(file, text);

  const MetricsTrim trim = keep_records_through_step(file, 4, /*recent_losses=*/3);
  CHECK(trim.kept == 4);
  CHECK(trim.recent_losses == std::vector<double>{1.0 / 2, 1.0 / 3, 1.0 / 4});
  // The same steps' whole records (a classifier's accuracies continue from them).
  REQUIRE(trim.recent_records.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(trim.recent_records[static_cast<size_t>(i)]["step"] == i + 2);
  CHECK(trim.dropped == 3);
  CHECK(trim.dropped_cut_line);
  REQUIRE(trim.last_step == 4);
  REQUIRE(read_text(file) == through4);

  // The resumed attempt appends after them.
  {
    MetricsLog log(file, /*append=*/true);
    log.write({{"step", 5}, {"loss", 0.2}});
    log.close();
  }
  REQUIRE(read_text(file) == through4 + nlohmann::json{{"step", 5}, {"loss", 0.2}}.dump() + "\n");
}

TEST_CASE("metrics: summaries count at the step they end, other records stay", "[metrics]") {
  TempDir dir;
  const auto file = dir / "m.jsonl";
  const std::string first_run = step_line(1) + step_line(2) +
                                nlohmann::json{{"summary", true}, {"steps", 2}}.dump() + "\n";
  const std::string note = nlohmann::json{{"note", "no step"}}.dump() + "\n";
  const std::string later = step_line(3) + nlohmann::json{{"summary", true}, {"steps", 3}}.dump();
  // The last line is complete but lacks its newline: a record of a later step, dropped.
  write_text(file, first_run + note + later);
  const MetricsTrim trim = keep_records_through_step(file, 2);
  CHECK(trim.kept == 4);
  CHECK(trim.dropped == 2);
  CHECK_FALSE(trim.dropped_cut_line);
  REQUIRE(read_text(file) == first_run + note);

  // An unterminated last record of a kept step is kept, with its newline.
  write_text(file, step_line(1) + nlohmann::json{{"step", 2}}.dump());
  keep_records_through_step(file, 2);
  REQUIRE(read_text(file) == step_line(1) + nlohmann::json{{"step", 2}}.dump() + "\n");
}

TEST_CASE("metrics: a damaged line inside the file is an error naming it", "[metrics][errors]") {
  TempDir dir;
  const auto file = dir / "m.jsonl";
  const std::string text = step_line(1) + "garbage\n" + step_line(2);
  write_text(file, text);
  REQUIRE_THROWS_WITH(keep_records_through_step(file, 1),
                      Catch::Contains("m.jsonl") && Catch::Contains("line 2 is not a JSON object"));
  REQUIRE(read_text(file) == text);  // left as it was
  // No file: nothing to continue, nothing created.
  const MetricsTrim none = keep_records_through_step(dir / "absent.jsonl", 3);
  CHECK(none.kept == 0);
  REQUIRE_FALSE(std::filesystem::exists(dir / "absent.jsonl"));
}

TEST_CASE("metrics: a write to a full device is an error naming the file", "[metrics][errors]") {
  // /dev/full is Linux's always-full device: every write fails with ENOSPC.
  if (!std::filesystem::exists("/dev/full")) {
    WARN("no /dev/full on this system: the full-device check is not run");
    return;
  }
  MetricsLog log("/dev/full");
  REQUIRE_THROWS_WITH(log.write({{"step", 1}}),
                      Catch::Contains("/dev/full") && Catch::Contains("No space left on device"));
  REQUIRE_FALSE(log.is_open());
  log.close();  // nothing left to report twice
}
