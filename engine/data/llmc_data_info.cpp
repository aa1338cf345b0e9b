#include "engine/data/llmc_data_info.h"

#include <string>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "sdp-llmc-data";
constexpr int kVersion = 1;

const nlohmann::json& field(const nlohmann::json& j, const fs::path& file, const char* name) {
  if (!j.contains(name)) fail(file.string(), ": missing field '", name, "'");
  return j.at(name);
}

std::optional<int64_t> token_id(const nlohmann::json& j, const fs::path& file, const char* name,
                                int64_t vocab) {
  const nlohmann::json& v = field(j, file, name);
  if (v.is_null()) return std::nullopt;
  if (!json_integer_in_range(v, 0, static_cast<uint64_t>(vocab - 1)))
    fail(file.string(), ": field '", name, "' is ", v.dump(),
         "; valid: null (no such token) or an integer in [0, vocab_size = ", vocab, ")");
  return v.get<int64_t>();
}

}  // namespace

std::optional<LlmcDataInfo> read_llmc_data_info(const fs::path& shard_dir) {
  const fs::path file = shard_dir / kLlmcDataInfoName;
  if (!fs::exists(file)) return std::nullopt;
  const nlohmann::json j = checkpoint::read_json_file(file);
  if (!j.is_object()) fail(file.string(), ": expected a JSON object, got ", j.type_name());
  const nlohmann::json& format = field(j, file, "format");
  if (format != kFormat)
    fail(file.string(), ": field 'format' is ", format.dump(), "; valid: \"", kFormat, "\"");
  const nlohmann::json& version = field(j, file, "version");
  if (version != kVersion)
    fail(file.string(), ": field 'version' is ", version.dump(), "; this build reads version ",
         kVersion);
  const nlohmann::json& vocab = field(j, file, "vocab_size");
  // At most what a token of an llm.c shard can hold (uint32).
  if (!json_integer_in_range(vocab, 1, uint64_t{1} << 32))
    fail(file.string(), ": field 'vocab_size' is ", vocab.dump(),
         "; valid: a positive integer, at most 4294967296");

  LlmcDataInfo info;
  info.vocab_size = vocab.get<int64_t>();
  info.tokenizer.kind = TokenizerFacts::Kind::file;
  info.tokenizer.bos_token_id = token_id(j, file, "bos_token_id", info.vocab_size);
  info.tokenizer.eos_token_id = token_id(j, file, "eos_token_id", info.vocab_size);
  info.tokenizer.pad_token_id = token_id(j, file, "pad_token_id", info.vocab_size);
  const nlohmann::json& tok = field(j, file, "tokenizer");
  // A plain file name: the tokenizer travels with the shards.
  if (!tok.is_string() || tok.get<std::string>().empty() ||
      fs::path(tok.get<std::string>()).has_parent_path())
    fail(file.string(), ": field 'tokenizer' is ", tok.dump(),
         "; valid: the name of a tokenizers JSON file in the same directory");
  info.tokenizer.tokenizer_json = fs::absolute(shard_dir / tok.get<std::string>());
  if (!fs::is_regular_file(info.tokenizer.tokenizer_json))
    fail(file.string(), ": field 'tokenizer' names ", info.tokenizer.tokenizer_json.string(),
         ", which does not exist");
  TokenizerFacts& t = info.tokenizer;
  if (!t.bos_token_id && !t.eos_token_id && !t.pad_token_id) return info;
  const nlohmann::json tokenizer = checkpoint::read_json_file(t.tokenizer_json);
  auto content_of = [&](const char* field_name, const std::optional<int64_t>& id) {
    std::optional<std::string> content;
    if (!id) return content;
    content = token_content(tokenizer, *id);
    if (!content)
      fail(file.string(), ": field '", field_name, "' is ", *id, ", but tokenizer ",
           t.tokenizer_json.string(), " has no token with id ", *id,
           " (neither in added_tokens nor in its vocabulary)");
    return content;
  };
  t.bos_token = content_of("bos_token_id", t.bos_token_id);
  t.eos_token = content_of("eos_token_id", t.eos_token_id);
  t.pad_token = content_of("pad_token_id", t.pad_token_id);
  return info;
}

std::optional<std::string> token_content(const nlohmann::json& tokenizer, int64_t id) {
  if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array())
    for (const nlohmann::json& t : tokenizer["added_tokens"])
      if (t.is_object() && t.value("id", int64_t{-1}) == id && t.contains("content") &&
          t["content"].is_string())
        return t["content"].get<std::string>();
  // Special tokens may also be ordinary vocabulary entries (BPE, WordPiece:
  // an object from token to id).
  if (tokenizer.contains("model") && tokenizer["model"].is_object()) {
    const nlohmann::json& model = tokenizer["model"];
    if (model.contains("vocab") && model["vocab"].is_object())
      for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it)
        if (it.value().is_number_integer() && it.value().get<int64_t>() == id) return it.key();
  }
  return std::nullopt;
}

}  // namespace sdp::data
