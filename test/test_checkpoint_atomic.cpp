// Atomic file and directory replacement, and JSON files.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/stale_staging.h"
#include "engine/core/error.h"
#include "test/test_checkpoint_support.h"

using namespace sdp;
using namespace sdp::checkpoint;
using sdp::testing::list_dir;
using sdp::testing::read_bytes;
using sdp::testing::TempDir;
using Set = std::set<std::string>;

namespace {
std::span<const std::byte> as_span(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}
std::string read_text(const std::filesystem::path& p) {
  const auto b = read_bytes(p);
  return std::string(b.begin(), b.end());
}
// The PID of a child that has exited and been reaped: no process has it
// (PIDs are handed out in increasing order, so it is not reused at once).
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return child;
}
// A staging sibling name of `base` as a process `pid` of `machine` writes it.
std::string staging_name(const std::string& base, const std::string& kind,
                         const std::string& machine, long pid) {
  return base + "." + kind + "-" + machine + "-" + std::to_string(pid) + "-3-0badcafe";
}
}  // namespace

TEST_CASE("write_file_atomically creates and replaces a file", "[checkpoint]") {
  TempDir dir;
  const auto file = dir / "a.bin";
  write_file_atomically(file, as_span("first"));
  REQUIRE(read_text(file) == "first");
  write_file_atomically(file, as_span("second, longer"));
  REQUIRE(read_text(file) == "second, longer");
  // Streaming: more than the 64 KiB buffer, in small and large pieces.
  std::string big(200000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  write_file_atomically(file, [&](std::ostream& os) {
    os.write(big.data(), 10);
    os.write(big.data() + 10, 150000);
    for (size_t i = 150010; i < big.size(); ++i) os.put(big[i]);
  });
  REQUIRE(read_text(file) == big);
  REQUIRE(list_dir(dir.path()) == Set{"a.bin"});
}

TEST_CASE("a throwing writer leaves the old file intact and no temporary behind",
          "[checkpoint]") {
  TempDir dir;
  const auto file = dir / "state.bin";
  write_file_atomically(file, as_span("good old contents"));
  const std::string chunk(100000, 'z');  // more than the buffer: part reaches the disk
  REQUIRE_THROWS_AS(write_file_atomically(file,
                                          [&](std::ostream& os) {
                                            os.write(chunk.data(), 100000);
                                            throw std::logic_error("writer died mid-way");
                                          }),
                    std::logic_error);
  REQUIRE(read_text(file) == "good old contents");
  REQUIRE(list_dir(dir.path()) == Set{"state.bin"});

  // A new file that fails never appears.
  REQUIRE_THROWS(write_file_atomically(dir / "new.bin", [&](std::ostream& os) {
    os << "partial";
    throw sdp::Error("boom");
  }));
  REQUIRE(list_dir(dir.path()) == Set{"state.bin"});
}

TEST_CASE("write_file_atomically names the path and the system error", "[checkpoint]") {
  TempDir dir;
  const auto file = dir / "missing_subdir" / "x.bin";
  REQUIRE_THROWS_WITH(write_file_atomically(file, as_span("x")),
                      Catch::Contains("x.bin") && Catch::Contains("No such file or directory"));
}

TEST_CASE("DirectoryTransaction without commit leaves nothing", "[checkpoint]") {
  TempDir dir;
  const auto target = dir / "ckpt";
  {
    DirectoryTransaction tx(target);
    REQUIRE(std::filesystem::is_directory(tx.staging_dir()));
    REQUIRE(tx.staging_dir().parent_path() == dir.path());
    write_file_atomically(tx.staging_dir() / "model.bin", as_span("weights"));
    std::filesystem::create_directories(tx.staging_dir() / "sub");
    write_file_atomically(tx.staging_dir() / "sub" / "x", as_span("x"));
  }
  REQUIRE(list_dir(dir.path()).empty());
}

TEST_CASE("DirectoryTransaction commit creates and replaces a directory", "[checkpoint]") {
  using Mode = DirectoryTransaction::ReplaceMode;
  const Mode mode = GENERATE(Mode::exchange_if_supported, Mode::rename_aside);
  TempDir dir;
  const auto target = dir / "step_100";
  {
    DirectoryTransaction tx(target, mode);
    write_file_atomically(tx.staging_dir() / "model.bin", as_span("v1"));
    write_file_atomically(tx.staging_dir() / "only_in_v1", as_span("old"));
    REQUIRE_FALSE(std::filesystem::exists(target));
    tx.commit();
    REQUIRE(tx.committed());
    REQUIRE_THROWS_WITH(tx.commit(), Catch::Contains("committed twice"));
  }
  REQUIRE(list_dir(dir.path()) == Set{"step_100"});
  REQUIRE(list_dir(target) == Set{"model.bin", "only_in_v1"});
  {
    DirectoryTransaction tx(target.string() + "/", mode);  // trailing slash names the same dir
    write_file_atomically(tx.staging_dir() / "model.bin", as_span("v2"));
    std::filesystem::create_directories(tx.staging_dir() / "optim");
    write_file_atomically(tx.staging_dir() / "optim" / "state.bin", as_span("m"));
    tx.commit();
  }
  REQUIRE(list_dir(dir.path()) == Set{"step_100"});
  REQUIRE(list_dir(target) == Set{"model.bin", "optim"});
  REQUIRE(read_text(target / "model.bin") == "v2");
  REQUIRE(read_text(target / "optim" / "state.bin") == "m");
}

TEST_CASE("DirectoryTransaction refuses to replace a regular file", "[checkpoint]") {
  TempDir dir;
  write_file_atomically(dir / "ckpt", as_span("file"));
  DirectoryTransaction tx(dir / "ckpt");
  REQUIRE_THROWS_WITH(tx.commit(), Catch::Contains("exists and is not a directory"));
  REQUIRE(read_text(dir / "ckpt") == "file");
}

TEST_CASE("DirectoryTransaction::recover restores a checkpoint moved aside", "[checkpoint]") {
  TempDir dir;
  const auto target = dir / "ckpt";
  // The state after a crash between the two renames of rename_aside mode.
  std::filesystem::create_directories(dir / "ckpt.old-1-0-abc");
  write_file_atomically(dir / "ckpt.old-1-0-abc" / "model.bin", as_span("old"));
  std::filesystem::create_directories(dir / "ckpt.tmp-1-1-def");
  REQUIRE(DirectoryTransaction::recover(target));
  REQUIRE(list_dir(dir.path()) == Set{"ckpt"});
  REQUIRE(read_text(target / "model.bin") == "old");
  // With the target in place it only cleans up.
  std::filesystem::create_directories(dir / "ckpt.tmp-1-2-aaa");
  REQUIRE_FALSE(DirectoryTransaction::recover(target));
  REQUIRE(list_dir(dir.path()) == Set{"ckpt"});
}

TEST_CASE("JSON files are written pretty and atomically and read back", "[checkpoint]") {
  TempDir dir;
  const nlohmann::json config = {{"hidden_size", 64}, {"architectures", {"LlamaForCausalLM"}},
                                 {"rms_norm_eps", 1e-5}};
  write_json_atomically(dir / "config.json", config);
  REQUIRE(read_text(dir / "config.json") == config.dump(2) + "\n");
  REQUIRE(read_json_file(dir / "config.json") == config);
  REQUIRE(list_dir(dir.path()) == Set{"config.json"});
}

TEST_CASE("JSON read errors name the file and the position", "[checkpoint]") {
  TempDir dir;
  sdp::testing::write_bytes(dir / "bad.json", {'{', '\n', '"', 'a', '"', ':', ' ', '}'});
  REQUIRE_THROWS_WITH(read_json_file(dir / "bad.json"),
                      Catch::Contains("bad.json") && Catch::Contains("line 2, column 6"));
  REQUIRE_THROWS_WITH(read_json_file(dir / "nope.json"),
                      Catch::Contains("cannot open JSON file") && Catch::Contains("nope.json"));
}

TEST_CASE("staging names carry this machine and process and parse back", "[checkpoint]") {
  const auto name = sdp::checkpoint::detail::unique_sibling("dir/step-000010", "tmp").filename().string();
  const auto owner = parse_staging_name(name);
  REQUIRE(owner);
  REQUIRE(owner->kind == "tmp");
  REQUIRE(owner->machine == staging_machine_tag());
  REQUIRE(owner->pid == static_cast<long>(::getpid()));
  REQUIRE(parse_staging_name(staging_name("a.b", "old", "h_1-0123abcd", 42))->pid == 42);
  // Names of the earlier format, other files, and PIDs kill() would read as
  // process groups are not staging names.
  REQUIRE_FALSE(parse_staging_name("ckpt.tmp-123-0-0badcafe"));
  REQUIRE_FALSE(parse_staging_name("model.safetensors"));
  REQUIRE_FALSE(parse_staging_name("ckpt.tmp-h-0123abcd-0-3-0badcafe"));
  REQUIRE_FALSE(parse_staging_name("ckpt.new-h-0123abcd-5-3-0badcafe"));
}

TEST_CASE("a new save removes stale staging of dead processes only", "[checkpoint]") {
  TempDir dir;
  const std::string here = staging_machine_tag();
  const long dead = dead_pid();
  const long alive = static_cast<long>(::getpid());
  const auto make = [&](const std::string& name) {
    std::filesystem::create_directories(dir / name);
    write_file_atomically(dir / name / "model.bin", as_span("x"));
  };
  std::filesystem::create_directories(dir / "step-000020");  // a complete checkpoint
  const std::string stale_tmp = staging_name("step-000010", "tmp", here, dead);
  const std::string stale_old = staging_name("step-000020", "old", here, dead);
  const std::string live_tmp = staging_name("step-000030", "tmp", here, alive);
  const std::string stale_file = staging_name("latest", "tmp", here, dead);
  // Kept: the only copy of a checkpoint whose save died between its renames,
  // another host's (or boot's) staging, and names of the earlier format.
  const std::string only_copy = staging_name("step-000040", "old", here, dead);
  const std::string other_host = staging_name("step-000050", "tmp", "elsewhere-0123abcd", dead);
  const std::string legacy = "step-000060.tmp-" + std::to_string(dead) + "-0-0badcafe";
  for (const auto& name : {stale_tmp, stale_old, live_tmp, only_copy, other_host, legacy})
    make(name);
  write_file_atomically(dir / stale_file, as_span("{}"));

  DirectoryTransaction tx(dir / "step-000070");
  const Set after = list_dir(dir.path());
  REQUIRE(after == Set{"step-000020", live_tmp, only_copy, other_host, legacy,
                       tx.staging_dir().filename().string()});
  REQUIRE(read_text(dir / live_tmp / "model.bin") == "x");
  REQUIRE(remove_stale_staging(dir.path()) == 0);
}
