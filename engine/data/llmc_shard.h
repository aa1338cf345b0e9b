#pragma once
// Token shards in llm.c's .bin format (dev/data/data_common.py,
// write_datafile): a header of 256 little-endian int32, then the tokens.
//   header[0] = magic, header[1] = version, header[2] = number of tokens.
//   GPT-2:   magic 20240520, version 1, tokens uint16 (default vocab 50257)
//   LLaMA-3: magic 20240801, version 7, tokens uint32 (default vocab 128256)
// All shards of one source must share a format. Shards are one concatenated
// stream in sorted path order, read in file order or, for the train split
// with shuffle on, in shuffled windows (see sequential_source.h).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/mapped_file.h"
#include "engine/data/tokenizer_facts.h"
#include "engine/data/sequential_source.h"

namespace sdp::data {

inline constexpr int32_t kLlmcMagicGpt2 = 20240520;
inline constexpr int32_t kLlmcVersionGpt2 = 1;
inline constexpr int32_t kLlmcMagicLlama3 = 20240801;
inline constexpr int32_t kLlmcVersionLlama3 = 7;
inline constexpr int64_t kLlmcHeaderInts = 256;
inline constexpr int64_t kGpt2Vocab = 50257;
inline constexpr int64_t kLlama3Vocab = 128256;

// One validated, mapped shard.
class LlmcShard {
 public:
  // Throws sdp::Error naming the file: missing, bad magic, unsupported
  // version, or a size that disagrees with the header's token count.
  explicit LlmcShard(const std::string& path);
  const std::string& path() const { return file_.path(); }
  int32_t magic() const { return magic_; }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t token_bytes() const { return token_bytes_; }  // 2 or 4
  // Raw token values [begin, begin + count) of this shard.
  void read(int64_t begin, int64_t count, uint32_t* out) const;
  // Index of the first token in [begin, begin + count) whose value is >=
  // `limit`, or -1 when there is none. One pass over the mapped tokens.
  int64_t find_token_at_least(int64_t begin, int64_t count, uint64_t limit) const;

 private:
  MappedFile file_;
  int32_t magic_ = 0;
  int64_t num_tokens_ = 0;
  int64_t token_bytes_ = 2;
};

// Expands each pattern (a path, or a glob with * ? [..]) and returns the
// sorted, de-duplicated file list. Throws when a pattern matches nothing.
std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns);

class LlmcTokenSource : public SequentialTokenSource {
 public:
  // vocab <= 0 picks data.json's vocab_size where the directory of the first
  // matched shard has one (llmc_data_info.h), else the format's default
  // (GPT-2 50257, LLaMA-3 128256).
  // The split rule is in token_source.h. Every token of the split is checked
  // against the vocabulary once, here (sdp::Error naming the file, the
  // token's index in it and its value), so that a bad token fails the run
  // at start-up, not at the step that reads it.
  // shuffle and seed: the train split's order (sequential_source.h).
  LlmcTokenSource(const std::vector<std::string>& patterns, int64_t vocab = 0,
                  Split split = Split::train, StreamPart part = {}, bool shuffle = false,
                  uint64_t seed = 0);

  int64_t vocab_size() const override { return vocab_; }
  // From data.json (Kind::file); Kind::none where the shards have none.
  TokenizerFacts tokenizer() const override { return tokenizer_; }
  std::string describe() const override;
  const std::vector<std::string>& files() const { return files_; }
  int64_t total_tokens() const { return offsets_.back(); }

 protected:
  void copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const override;
  nlohmann::json identity() const override;
  std::string error_name() const override;

 private:
  void check_split_vocabulary() const;
  std::vector<std::string> files_;
  std::vector<LlmcShard> shards_;
  std::vector<int64_t> offsets_;  // [shards + 1]: stream position of each shard's first token
  int64_t vocab_ = 0;
  TokenizerFacts tokenizer_;
  std::string split_rule_;
};

}  // namespace sdp::data
