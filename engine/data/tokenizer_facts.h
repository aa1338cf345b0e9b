#pragma once
// What a token source knows of the tokenizer that made its ids, so that a
// checkpoint carries a tokenizer matching the data (Hugging Face users load
// it with AutoTokenizer) and the special token ids the data uses.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace sdp::data {

struct TokenizerFacts {
  enum class Kind {
    none,        // ids with no text behind them (the synthetic language)
    byte_level,  // id == byte value (text:PATH); the engine writes the tokenizer
    file,        // a tokenizers JSON file made with the data (llmc shards)
  };
  Kind kind = Kind::none;
  std::filesystem::path tokenizer_json;  // Kind::file only
  // Special tokens the data defines; empty where it defines none.
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;
  // Their text in the tokenizer (Kind::file), for tokenizer_config.json.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
};

}  // namespace sdp::data
