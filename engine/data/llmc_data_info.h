#pragma once
// data.json next to llm.c token shards, written by the project's data
// preparation (scripts/prepare_text_data.py). It says which tokenizer made
// the ids:
//   {"format": "sdp-llmc-data", "version": 1, "vocab_size": V,
//    "bos_token_id": int|null, "eos_token_id": int|null,
//    "pad_token_id": int|null, "tokenizer": "tokenizer.json"}
// "tokenizer" is a file name relative to the directory of data.json.
#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/data/tokenizer_facts.h"

namespace sdp::data {

inline constexpr const char* kLlmcDataInfoName = "data.json";

struct LlmcDataInfo {
  int64_t vocab_size = 0;
  TokenizerFacts tokenizer;  // Kind::file, with the tokenizer's absolute path
};

// The data.json in `shard_dir`, or nullopt when there is none. Throws
// sdp::Error naming the file and the field when it is malformed: another
// format or version, a vocab_size that is not a positive integer, an id that
// is neither null nor an integer in [0, vocab_size), a tokenizer that is
// not a file name or names a file that does not exist or lacks a token of
// a special id (checked here, before any training, not at the first save).
std::optional<LlmcDataInfo> read_llmc_data_info(const std::filesystem::path& shard_dir);

// The text of token `id` in a tokenizers JSON document: its added_tokens
// entry, else its entry in the model's vocabulary; nullopt when it has none.
std::optional<std::string> token_content(const nlohmann::json& tokenizer, int64_t id);

}  // namespace sdp::data
