// data.json next to llm.c shards (the data preparation's record of its
// tokenizer): the source takes its vocabulary and special ids from it, a
// vocab= in the spec still wins, and a malformed file is named with its field.
#include <catch2/catch.hpp>

#include <fstream>
#include <numeric>
#include <string>

#include "engine/core/error.h"
#include "engine/data/llmc_shard.h"
#include "test_data_support.h"

using sdp::data::make_token_source;
using sdp::data::TokenizerFacts;
using sdp::testing::TempDir;
using sdp::testing::write_llmc_shard;

namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::string data_json(const std::string& vocab = "300", const std::string& bos = "null",
                      const std::string& eos = "299", const std::string& tokenizer = "\"tokenizer.json\"",
                      const std::string& format = "\"sdp-llmc-data\"") {
  return "{\"format\": " + format + ", \"version\": 1, \"vocab_size\": " + vocab +
         ", \"bos_token_id\": " + bos + ", \"eos_token_id\": " + eos +
         ", \"pad_token_id\": null, \"tokenizer\": " + tokenizer + "}";
}

// Shards of tokens 0..99 in `dir` with a tokenizer file.
void write_shards(const TempDir& dir) {
  std::vector<uint32_t> tokens(100);
  std::iota(tokens.begin(), tokens.end(), 0u);
  write_llmc_shard(dir.file("d_train_000.bin"), tokens);
  write_llmc_shard(dir.file("d_val_000.bin"), tokens);
  write_text(dir / "tokenizer.json",
             R"({"added_tokens": [{"id": 299, "content": "<|end|>"}], "model": {"vocab": {}}})");
}

}  // namespace

TEST_CASE("llmc: data.json gives the vocabulary, the tokenizer and the special ids", "[data]") {
  TempDir dir;
  write_shards(dir);
  SECTION("without data.json: the format's default vocab and no tokenizer") {
    const auto source = make_token_source("llmc:" + dir.file("d_*.bin"), 0);
    REQUIRE(source->vocab_size() == 50257);
    REQUIRE(source->tokenizer().kind == TokenizerFacts::Kind::none);
  }
  SECTION("with data.json") {
    write_text(dir / "data.json", data_json());
    const auto source = make_token_source("llmc:" + dir.file("d_*.bin"), 0);
    REQUIRE(source->vocab_size() == 300);
    const TokenizerFacts t = source->tokenizer();
    REQUIRE(t.kind == TokenizerFacts::Kind::file);
    REQUIRE(t.eos_token == "<|end|>");  // its text in the tokenizer
    REQUIRE_THAT(source->describe(), Catch::Contains("tokenizer tokenizer.json from data.json"));
    REQUIRE(std::filesystem::equivalent(t.tokenizer_json, dir / "tokenizer.json"));
    REQUIRE_FALSE(t.bos_token_id.has_value());
    REQUIRE(t.eos_token_id == 299);
    REQUIRE_FALSE(t.pad_token_id.has_value());
    // vocab= in the spec wins over data.json
    REQUIRE(make_token_source("llmc:" + dir.file("d_*.bin") + ",vocab=400", 0)->vocab_size() ==
            400);
    // ... but must hold the special ids
    REQUIRE_THROWS_WITH(make_token_source("llmc:" + dir.file("d_*.bin") + ",vocab=200", 0),
                        Catch::Contains("vocab=200") && Catch::Contains("299") &&
                            Catch::Contains("data.json"));
  }
}

TEST_CASE("llmc: a bad data.json is an error naming the file and the field", "[data]") {
  TempDir dir;
  write_shards(dir);
  const std::string spec = "llmc:" + dir.file("d_*.bin");
  auto fails_with = [&](const std::string& text, const std::string& field,
                        const std::string& detail) {
    write_text(dir / "data.json", text);
    REQUIRE_THROWS_WITH(make_token_source(spec, 0), Catch::Contains(dir.file("data.json")) &&
                                                        Catch::Contains(field) &&
                                                        Catch::Contains(detail));
  };
  fails_with(data_json("300", "null", "299", "\"tokenizer.json\"", "\"other\""), "'format'",
             "sdp-llmc-data");
  fails_with("{\"format\": \"sdp-llmc-data\", \"version\": 2}", "'version'", "version 1");
  fails_with("{\"format\": \"sdp-llmc-data\", \"version\": 1}", "'vocab_size'", "missing");
  fails_with(data_json("0"), "'vocab_size'", "positive integer");
  fails_with(data_json("300", "\"<s>\""), "'bos_token_id'", "[0, vocab_size = 300)");
  fails_with(data_json("300", "null", "300"), "'eos_token_id'", "[0, vocab_size = 300)");
  fails_with(data_json("300", "null", "299", "\"missing.json\""), "'tokenizer'",
             "does not exist");
  fails_with(data_json("300", "null", "299", "\"../tokenizer.json\""), "'tokenizer'",
             "same directory");
  fails_with("[1]", "data.json", "JSON object");
  // Checked before training starts, not at the first checkpoint.
  fails_with(data_json("300", "7"), "'bos_token_id'",
             "has no token with id 7 (neither in added_tokens nor in its vocabulary)");
}
