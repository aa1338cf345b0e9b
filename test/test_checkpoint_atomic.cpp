// Atomic file and directory replacement, and JSON files.
#include <catch2/catch.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
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
