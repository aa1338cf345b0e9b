#include "engine/train/hf_tokenizer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"

namespace sdp {

namespace fs = std::filesystem;
using data::TokenizerFacts;

namespace {

std::string utf8(uint32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {  // the byte-level alphabet stays below U+0800; kept general for clarity
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
  return out;
}

// GPT-2's reversible byte-to-unicode map (what tokenizers' ByteLevel uses):
// printable Latin-1 bytes stand for themselves, the others (controls, space,
// soft hyphen, ...) take code points 256, 257, ... in byte order.
std::vector<uint32_t> byte_to_unicode() {
  auto printable = [](uint32_t b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  std::vector<uint32_t> map(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) map[b] = printable(b) ? b : next++;
  return map;
}

nlohmann::json byte_level_component() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

nlohmann::json id_or_null(const std::optional<int64_t>& id) {
  return id ? nlohmann::json(*id) : nlohmann::json(nullptr);
}

struct SpecialToken {
  const char* key;  // "bos" -> bos_token / bos_token_id
  std::optional<int64_t> id;
  std::optional<std::string> content;
};

std::vector<SpecialToken> special_tokens(const TokenizerFacts& facts) {
  return {{"bos", facts.bos_token_id, facts.bos_token},
          {"eos", facts.eos_token_id, facts.eos_token},
          {"pad", facts.pad_token_id, facts.pad_token}};
}

void copy_file_atomically(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) fail("cannot open tokenizer file '", from.string(), "': ", std::strerror(errno));
  checkpoint::write_file_atomically(to, [&](std::ostream& out) {
    out << in.rdbuf();
    if (in.bad()) fail("cannot read tokenizer file '", from.string(), "'");
  });
}

}  // namespace

nlohmann::json byte_level_tokenizer_json() {
  const std::vector<uint32_t> map = byte_to_unicode();
  nlohmann::json vocab = nlohmann::json::object();
  for (uint32_t b = 0; b < 256; ++b) vocab[utf8(map[b])] = b;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level_component()},
      {"post_processor", nullptr},
      {"decoder", byte_level_component()},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", nlohmann::json::array()}}},
  };
}

void set_special_token_ids(nlohmann::json& config, const TokenizerFacts& facts) {
  for (const SpecialToken& t : special_tokens(facts))
    config[std::string(t.key) + "_token_id"] = id_or_null(t.id);
}

nlohmann::json generation_config_json(const TokenizerFacts& facts) {
  nlohmann::json j = nlohmann::json::object();
  set_special_token_ids(j, facts);
  return j;
}

void write_hf_tokenizer_files(const TokenizerFacts& facts, int64_t model_max_length,
                              const fs::path& dir) {
  checkpoint::write_json_atomically(dir / "generation_config.json", generation_config_json(facts));
  if (facts.kind == TokenizerFacts::Kind::none) return;
  nlohmann::json config = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"model_max_length", model_max_length},
      // Decoding gives back exactly the bytes / text the ids stand for.
      {"clean_up_tokenization_spaces", false},
  };
  if (facts.kind == TokenizerFacts::Kind::byte_level) {
    checkpoint::write_json_atomically(dir / "tokenizer.json", byte_level_tokenizer_json());
  } else {
    copy_file_atomically(facts.tokenizer_json, dir / "tokenizer.json");
    for (const SpecialToken& t : special_tokens(facts)) {
      if (!t.id) continue;
      SDP_CHECK(t.content.has_value(), "tokenizer ", facts.tokenizer_json.string(), ": ", t.key,
                "_token_id ", *t.id, " has no text (the data source resolves it)");
      config[std::string(t.key) + "_token"] = *t.content;
    }
  }
  checkpoint::write_json_atomically(dir / "tokenizer_config.json", config);
}

}  // namespace sdp
