#pragma once
// The tokenizer side of a Hugging Face LLaMA checkpoint, from what the data
// knows of its tokenizer (engine/data/tokenizer_facts.h):
//   tokenizer.json           byte-level data: generated (id == byte value);
//                            tokenizer-file data: a copy of that file
//   tokenizer_config.json    "tokenizer_class": "PreTrainedTokenizerFast" (the
//                            LLaMA config would otherwise select
//                            LlamaTokenizerFast, which insists on a bos token)
//                            and the special tokens' strings
//   generation_config.json   bos / eos / pad token ids (null where none)
// and the same ids in config.json, so that transformers does not fall back
// to its LLaMA defaults (bos 1, eos 2).
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/data/tokenizer_facts.h"

namespace sdp {

// tokenizers' JSON for bytes: a BPE model without merges whose vocabulary
// maps the GPT-2 byte-to-unicode character of byte b to id b, with
// ByteLevel pre-tokenizer (no prefix space, no regex split) and decoder.
nlohmann::json byte_level_tokenizer_json();

// Sets bos_token_id, eos_token_id, pad_token_id of an HF model config (null
// where the data defines none).
void set_special_token_ids(nlohmann::json& config, const data::TokenizerFacts& facts);

// {"bos_token_id": .., "eos_token_id": .., "pad_token_id": ..}
nlohmann::json generation_config_json(const data::TokenizerFacts& facts);

// Writes generation_config.json and, where the data has a tokenizer,
// tokenizer.json and tokenizer_config.json into `dir` (atomically, each).
// model_max_length is the model's longest sequence. Throws sdp::Error
// naming the tokenizer file when it cannot be read.
void write_hf_tokenizer_files(const data::TokenizerFacts& facts, int64_t model_max_length,
                              const std::filesystem::path& dir);

}  // namespace sdp
