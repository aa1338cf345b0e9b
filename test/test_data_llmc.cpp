// llm.c shard reading: exact windows, shard order, wrap, rank split, state,
// splits, and one clear error per kind of bad file.
#include <catch2/catch.hpp>

#include <numeric>

#include "engine/core/error.h"
#include "engine/data/llmc_shard.h"
#include "test_data_support.h"

using sdp::data::LlmcTokenSource;
using sdp::data::make_token_source;
using sdp::data::Split;
using sdp::data::StreamPart;
using sdp::testing::TempDir;
using sdp::testing::write_llmc_shard;

namespace {
std::vector<uint32_t> iota_tokens(int64_t n, uint32_t start) {
  std::vector<uint32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}
std::vector<int32_t> next(sdp::data::TokenSource& s, int64_t batch, int64_t seq) {
  std::vector<int32_t> w(static_cast<size_t>(batch * (seq + 1)));
  s.next_batch(w.data(), batch, seq);
  return w;
}
}  // namespace

TEST_CASE("llmc: single shard windows are read exactly", "[data]") {
  TempDir dir;
  std::vector<uint32_t> tokens = {7, 65535, 0, 12, 50000, 3, 4, 5, 6, 9, 11};
  write_llmc_shard(dir.file("a.bin"), tokens);
  // vocab must hold 65535 here.
  auto src = make_token_source("llmc:" + dir.file("a.bin") + ",vocab=65536", 0);
  REQUIRE(src->vocab_size() == 65536);
  // seq 4: window k starts at 4k and holds 5 tokens (windows share a boundary token).
  auto w = next(*src, 2, 4);
  // Train split is the first 95% of 11 tokens: 11 - 0 = 11 -> cut at 10 (val keeps one).
  REQUIRE(w == std::vector<int32_t>{7, 65535, 0, 12, 50000, 50000, 3, 4, 5, 6});
  // Next window starts at 8 and wraps within the 10-token train range.
  auto w2 = next(*src, 1, 4);
  REQUIRE(w2 == std::vector<int32_t>{6, 9, 7, 65535, 0});
  auto val = make_token_source("llmc:" + dir.file("a.bin") + ",vocab=65536", 0, Split::val);
  REQUIRE_THROWS_WITH(next(*val, 1, 1), Catch::Contains("1 tokens") && Catch::Contains("seq+1 = 2"));
}

TEST_CASE("llmc: shards are read in sorted order, globbed, and wrap", "[data]") {
  TempDir dir;
  write_llmc_shard(dir.file("s_01.bin"), iota_tokens(5, 100));
  write_llmc_shard(dir.file("s_00.bin"), iota_tokens(6, 0));
  write_llmc_shard(dir.file("s_02.bin"), {}, 20240520, 1);  // empty shards are skipped
  write_llmc_shard(dir.file("s_03.bin"), iota_tokens(9, 200));
  // 20 tokens; a glob plus a repeated explicit path (de-duplicated).
  LlmcTokenSource src({dir.file("s_*.bin"), dir.file("s_00.bin")}, 0, Split::train);
  REQUIRE(src.files().size() == 4);
  REQUIRE(src.total_tokens() == 20);
  REQUIRE(src.vocab_size() == 50257);
  REQUIRE(src.range_end() == 19);  // 95% of 20
  const std::vector<int32_t> stream = {0,   1,   2,   3,   4,   5,   100, 101, 102, 103,
                                       104, 200, 201, 202, 203, 204, 205, 206, 207};
  std::vector<int32_t> got;
  for (int step = 0; step < 5; ++step) {
    auto w = next(src, 1, 6);
    for (int i = 0; i < 7; ++i) {
      const auto expected = stream[static_cast<size_t>((step * 6 + i) % 19)];
      REQUIRE(w[static_cast<size_t>(i)] == expected);
    }
  }
  REQUIRE_THAT(src.describe(), Catch::Contains("4 shard(s)") && Catch::Contains("uint16"));
}

TEST_CASE("llmc: LLaMA-3 uint32 shards", "[data]") {
  TempDir dir;
  write_llmc_shard(dir.file("l.bin"), {128000, 5, 70000, 1, 2, 3}, 20240801, 7, 4);
  LlmcTokenSource src({dir.file("l.bin")});
  REQUIRE(src.vocab_size() == 128256);
  REQUIRE(next(src, 1, 3) == std::vector<int32_t>{128000, 5, 70000, 1});
}

TEST_CASE("llmc: val files by name, ranks disjoint, state resumes", "[data]") {
  TempDir dir;
  write_llmc_shard(dir.file("fw_train_000.bin"), iota_tokens(400, 0));
  write_llmc_shard(dir.file("fw_val_000.bin"), iota_tokens(50, 1000));
  const std::string spec = "llmc:" + dir.file("fw_*.bin");
  auto val = make_token_source(spec, 0, Split::val);
  REQUIRE(next(*val, 1, 3) == std::vector<int32_t>{1000, 1001, 1002, 1003});
  auto train = make_token_source(spec, 0, Split::train);
  REQUIRE(next(*train, 1, 3) == std::vector<int32_t>{0, 1, 2, 3});

  // Ranks: together they read what one process with the global batch reads.
  auto single = make_token_source(spec, 0);
  auto r0 = make_token_source(spec, 0, Split::train, StreamPart{0, 2});
  auto r1 = make_token_source(spec, 0, Split::train, StreamPart{1, 2});
  for (int step = 0; step < 3; ++step) {
    auto all = next(*single, 4, 5);
    auto a = next(*r0, 2, 5);
    auto b = next(*r1, 2, 5);
    for (int row = 0; row < 4; ++row) {
      const auto& part = row % 2 == 0 ? a : b;
      for (int i = 0; i < 6; ++i)
        REQUIRE(part[static_cast<size_t>((row / 2) * 6 + i)] == all[static_cast<size_t>(row * 6 + i)]);
    }
    REQUIRE(a != b);
  }
  // State is the global position: restore on another rank and keep going.
  const auto saved = r0->state();
  auto expect = next(*r1, 2, 5);
  auto resumed = make_token_source(spec, 0, Split::train, StreamPart{1, 2});
  resumed->restore(nlohmann::json::parse(saved.dump()));
  REQUIRE(next(*resumed, 2, 5) == expect);
  REQUIRE_THROWS_WITH(val->restore(saved), Catch::Contains("split") || Catch::Contains("identity"));
  auto synthetic = make_token_source("synthetic", 0);
  REQUIRE_THROWS_WITH(synthetic->restore(saved), Catch::Contains("kind"));
}

TEST_CASE("llmc: bad files give errors naming the file and the problem", "[data]") {
  TempDir dir;
  const std::string path = dir.file("bad.bin");
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + dir.file("nope.bin"), 0),
                        Catch::Contains("nope.bin") && Catch::Contains("does not exist"));
  }
  SECTION("glob that matches nothing") {
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + dir.file("x_*.bin"), 0),
                        Catch::Contains("x_*.bin") && Catch::Contains("matches no files"));
  }
  SECTION("bad magic") {
    write_llmc_shard(path, {1, 2, 3}, 12345, 1);
    REQUIRE_THROWS_AS(make_token_source("llmc:" + path, 0), sdp::Error);
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path, 0),
                        Catch::Contains(path) && Catch::Contains("bad magic 12345") &&
                            Catch::Contains("20240520"));
  }
  SECTION("unsupported version") {
    write_llmc_shard(path, {1, 2, 3}, 20240520, 2);
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path, 0),
                        Catch::Contains(path) && Catch::Contains("unsupported version 2"));
  }
  SECTION("truncated") {
    write_llmc_shard(path, {1, 2, 3}, 20240520, 1, 2, 10);
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path, 0),
                        Catch::Contains(path) && Catch::Contains("truncated") &&
                            Catch::Contains("10 tokens") && Catch::Contains("1030 bytes"));
  }
  SECTION("shorter than the header") {
    sdp::testing::write_bytes(path, {1, 2, 3});
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path, 0),
                        Catch::Contains(path) && Catch::Contains("truncated"));
  }
  SECTION("token outside the vocabulary") {
    // Found when the source opens, before any window reads it.
    write_llmc_shard(path, {1, 2, 3, 50257, 4, 5, 6, 7});
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path, 0),
                        Catch::Contains(path) && Catch::Contains("token 50257") &&
                            Catch::Contains("index 3"));
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + path + ",vocab=3", 0),
                        Catch::Contains("token 3 at index 2"));
  }
  SECTION("mixed formats") {
    write_llmc_shard(dir.file("m0.bin"), {1, 2});
    write_llmc_shard(dir.file("m1.bin"), {1, 2}, 20240801, 7, 4);
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + dir.file("m*.bin"), 0),
                        Catch::Contains("different formats"));
  }
}

TEST_CASE("llmc: the start-up check covers the whole split and only the split", "[data]") {
  TempDir dir;
  // Train split = tokens [0, 19) of 20; the bad token sits at the last
  // index of the train split, far beyond the first window.
  std::vector<uint32_t> tokens = iota_tokens(20, 0);
  tokens[18] = 60000;
  write_llmc_shard(dir.file("a.bin"), tokens);
  REQUIRE_THROWS_WITH(LlmcTokenSource({dir.file("a.bin")}, 0, Split::train),
                      Catch::Contains("a.bin") && Catch::Contains("token 60000 at index 18") &&
                          Catch::Contains("[0, 50257)") && Catch::Contains("train split"));
  // The val split (token 19 alone) never reads it.
  LlmcTokenSource val({dir.file("a.bin")}, 0, Split::val);
  REQUIRE(val.range_begin() == 19);
  REQUIRE(val.range_end() == 20);

  // A bad token in the last val token only fails the val split.
  tokens[18] = 18;
  tokens[19] = 50257;
  write_llmc_shard(dir.file("a.bin"), tokens);
  LlmcTokenSource train({dir.file("a.bin")}, 0, Split::train);
  REQUIRE_THROWS_WITH(LlmcTokenSource({dir.file("a.bin")}, 0, Split::val),
                      Catch::Contains("index 19") && Catch::Contains("val split"));
}

TEST_CASE("llmc: the start-up check names the shard and the index inside it", "[data]") {
  TempDir dir;
  // Three LLaMA-3 shards; the second holds a token beyond the vocabulary.
  write_llmc_shard(dir.file("s_0.bin"), iota_tokens(30, 0), 20240801, 7, 4);
  std::vector<uint32_t> second = iota_tokens(30, 100);
  second[7] = 128256;
  write_llmc_shard(dir.file("s_1.bin"), second, 20240801, 7, 4);
  write_llmc_shard(dir.file("s_2.bin"), iota_tokens(30, 200), 20240801, 7, 4);
  REQUIRE_THROWS_WITH(LlmcTokenSource({dir.file("s_*.bin")}),
                      Catch::Contains("s_1.bin") && Catch::Contains("token 128256 at index 7") &&
                          Catch::Contains("[0, 128256)"));
  // A larger vocabulary accepts it.
  LlmcTokenSource wide({dir.file("s_*.bin")}, 128257);
  REQUIRE(wide.total_tokens() == 90);
}

TEST_CASE("llmc: find_token_at_least scans across chunk boundaries", "[data]") {
  TempDir dir;
  // More than one 1 Mi-token chunk, the bad token in the second chunk.
  const int64_t n = (int64_t{1} << 20) + 300;
  std::vector<uint32_t> tokens(static_cast<size_t>(n), 5);
  tokens[static_cast<size_t>(n - 7)] = 9;
  write_llmc_shard(dir.file("big.bin"), tokens);
  const sdp::data::LlmcShard shard(dir.file("big.bin"));
  REQUIRE(shard.find_token_at_least(0, n, 9) == n - 7);
  REQUIRE(shard.find_token_at_least(0, n, 10) == -1);
  REQUIRE(shard.find_token_at_least(0, n - 7, 9) == -1);
  REQUIRE(shard.find_token_at_least(n - 7, 7, 6) == n - 7);
  REQUIRE(shard.find_token_at_least(3, 4, 5) == 3);
}
