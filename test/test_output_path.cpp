// The start-up check of a run's output paths (engine/checkpoint/output_path.h):
// what can be written passes and leaves nothing behind; what cannot is
// refused as a permanent error naming the flag, the path and why.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/checkpoint/output_path.h"
#include "engine/core/error.h"
#include "test_temp_dir.h"

using namespace sdp;
using checkpoint::OutputPath;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// The message of the PermanentError check_output_path(out) throws.
std::string refusal(const OutputPath& out) {
  try {
    checkpoint::check_output_path(out);
  } catch (const PermanentError& e) {
    return e.what();
  }
  FAIL("no PermanentError for " << out.flag << " '" << out.path.string() << "'");
  return "";
}

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("output paths: writable ones pass and nothing is left behind", "[output_path]") {
  testing::TempDir tmp;
  write_text(tmp / "metrics.jsonl", "{\"step\": 1}\n");
  fs::create_directories(tmp / "ck");
  checkpoint::check_output_paths({
      {"--metrics", "metrics file", tmp / "metrics.jsonl"},         // an existing file
      {"--metrics", "metrics file", tmp / "new/sub/m.jsonl"},       // missing directories
      {"--save-dir", "save directory", tmp / "ck", true},           // an existing directory
      {"--save-dir", "save directory", tmp / "a/b/ck", true},       // a missing one
      {"--output", "report file", tmp / "report.md", false, false},  // in an existing directory
      {"--metrics", "metrics file", ""},                             // not written at all
  });
  // No probe file, no directory made, the existing file untouched.
  CHECK(entries(tmp.path()) == 2);
  CHECK(entries(tmp / "ck") == 0);
  CHECK(read_text(tmp / "metrics.jsonl") == "{\"step\": 1}\n");
}

TEST_CASE("output paths: a file on the way is refused naming the flag", "[output_path]") {
  testing::TempDir tmp;
  write_text(tmp / "afile", "x");
  const std::string file = (tmp / "afile").string();
  CHECK(refusal({"--save-dir", "save directory", tmp / "afile/ck", true}) ==
        "--save-dir: cannot create save directory '" + file + "/ck': Not a directory ('" + file +
            "' is a file)");
  CHECK_THAT(refusal({"--metrics", "metrics file", tmp / "afile/x/m.jsonl"}),
             Contains("--metrics: cannot create metrics file '" + file +
                      "/x/m.jsonl': Not a directory ('" + file + "' is a file)"));
  CHECK(refusal({"--save-dir", "save directory", tmp / "afile", true}) ==
        "--save-dir: cannot create save directory '" + file +
            "': it exists and is not a directory");
  CHECK(entries(tmp.path()) == 1);
}

TEST_CASE("output paths: a directory where a file goes, a missing directory the writer does "
          "not make",
          "[output_path]") {
  testing::TempDir tmp;
  const std::string dir = tmp.path().string();
  CHECK(refusal({"--metrics", "metrics file", tmp.path()}) ==
        "--metrics: cannot create metrics file '" + dir + "': it is a directory (expected a file)");
  CHECK(refusal({"--output", "report file", tmp / "none/report.md", false, false}) ==
        "--output: cannot create report file '" + dir + "/none/report.md': its directory '" +
            dir + "/none' does not exist");
  // The same path with a writer that makes its directories passes.
  checkpoint::check_output_path({"--write-config", "config file", tmp / "none/c.json"});
  CHECK(entries(tmp.path()) == 0);
}

TEST_CASE("output paths: a directory without write permission", "[output_path]") {
  // Permissions bind every user but root (CI runs as root): there the
  // check is the regular-file cases above.
  if (::geteuid() == 0) return;
  testing::TempDir tmp;
  fs::create_directories(tmp / "ro");
  fs::permissions(tmp / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string ro = (tmp / "ro").string();
  CHECK(refusal({"--pipeline-timeline", "timeline directory", tmp / "ro/t", true}) ==
        "--pipeline-timeline: cannot create timeline directory '" + ro +
            "/t': no file can be created in '" + ro + "': Permission denied");
  fs::permissions(tmp / "ro", fs::perms::owner_all);
}
