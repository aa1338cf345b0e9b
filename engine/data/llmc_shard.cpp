#include "engine/data/llmc_shard.h"

#include <glob.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <optional>

#include "engine/core/error.h"
#include "engine/data/llmc_data_info.h"

namespace sdp::data {
namespace {

int32_t read_le_i32(const uint8_t* p) {
  const uint32_t v = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                     (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  return static_cast<int32_t>(v);
}

// The largest token of `count` little-endian tokens of type T at `p`. The
// loop has no early exit so that the compiler vectorizes it.
template <typename T>
T max_token(const uint8_t* p, int64_t count) {
  static_assert(std::endian::native == std::endian::little,
                "llm.c tokens are little-endian; a big-endian host would need byte swaps");
  T largest = 0;
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    largest = std::max(largest, v);
  }
  return largest;
}

bool has_glob_chars(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

MappedFile open_shard(const std::string& path) {
  if (!std::filesystem::exists(path)) fail("llm.c shard '", path, "' does not exist");
  return MappedFile(path);
}

}  // namespace

LlmcShard::LlmcShard(const std::string& path) : file_(open_shard(path)) {
  const int64_t header_bytes = kLlmcHeaderInts * 4;
  const int64_t size = static_cast<int64_t>(file_.size());
  if (size < header_bytes)
    fail("llm.c shard '", path, "' is truncated: ", size,
         " bytes, fewer than its 1024-byte header (256 int32)");
  const uint8_t* p = file_.data();
  magic_ = read_le_i32(p);
  const int32_t version = read_le_i32(p + 4);
  const int32_t count = read_le_i32(p + 8);
  if (magic_ == kLlmcMagicGpt2) {
    if (version != kLlmcVersionGpt2)
      fail("llm.c shard '", path, "' has unsupported version ", version, " for magic ",
           magic_, " (GPT-2 uint16 tokens); supported: version ", kLlmcVersionGpt2);
    token_bytes_ = 2;
  } else if (magic_ == kLlmcMagicLlama3) {
    if (version != kLlmcVersionLlama3)
      fail("llm.c shard '", path, "' has unsupported version ", version, " for magic ",
           magic_, " (LLaMA-3 uint32 tokens); supported: version ", kLlmcVersionLlama3);
    token_bytes_ = 4;
  } else {
    fail("llm.c shard '", path, "' has bad magic ", magic_, "; expected ", kLlmcMagicGpt2,
         " (GPT-2, uint16 tokens) or ", kLlmcMagicLlama3, " (LLaMA-3, uint32 tokens)");
  }
  if (count < 0) fail("llm.c shard '", path, "' has a negative token count ", count);
  num_tokens_ = count;
  const int64_t expected = header_bytes + num_tokens_ * token_bytes_;
  if (size < expected)
    fail("llm.c shard '", path, "' is truncated: header says ", num_tokens_, " tokens (",
         expected, " bytes with the header) but the file holds ", size, " bytes (",
         (size - header_bytes) / token_bytes_, " tokens)");
  if (size > expected)
    fail("llm.c shard '", path, "' is longer than its header says: header says ",
         num_tokens_, " tokens (", expected, " bytes with the header) but the file holds ",
         size, " bytes");
}

void LlmcShard::read(int64_t begin, int64_t count, uint32_t* out) const {
  SDP_CHECK(begin >= 0 && count >= 0 && begin + count <= num_tokens_, "read [", begin, ", +",
            count, ") outside ", num_tokens_, " tokens of '", path(), "'");
  const uint8_t* p = file_.data() + kLlmcHeaderInts * 4 + begin * token_bytes_;
  if (token_bytes_ == 2) {
    for (int64_t i = 0; i < count; ++i, p += 2)
      out[i] = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
  } else {
    for (int64_t i = 0; i < count; ++i, p += 4) out[i] = static_cast<uint32_t>(read_le_i32(p));
  }
}

int64_t LlmcShard::find_token_at_least(int64_t begin, int64_t count, uint64_t limit) const {
  SDP_CHECK(begin >= 0 && count >= 0 && begin + count <= num_tokens_, "scan [", begin, ", +",
            count, ") outside ", num_tokens_, " tokens of '", path(), "'");
  const uint8_t* tokens = file_.data() + kLlmcHeaderInts * 4;
  // Chunks of 1 Mi tokens: a fast maximum per chunk, and only in a chunk that
  // holds a bad token a second look for the first one.
  constexpr int64_t kChunk = int64_t{1} << 20;
  for (int64_t at = begin; at < begin + count; at += kChunk) {
    const int64_t n = std::min(kChunk, begin + count - at);
    const uint8_t* p = tokens + at * token_bytes_;
    const uint64_t largest =
        token_bytes_ == 2 ? max_token<uint16_t>(p, n) : max_token<uint32_t>(p, n);
    if (largest < limit) continue;
    uint32_t raw[1024];
    for (int64_t done = 0; done < n; done += 1024) {
      const int64_t m = std::min<int64_t>(1024, n - done);
      read(at + done, m, raw);
      for (int64_t i = 0; i < m; ++i)
        if (raw[i] >= limit) return at + done + i;
    }
  }
  return -1;
}

std::vector<std::string> expand_shard_patterns(const std::vector<std::string>& patterns) {
  if (patterns.empty()) fail("llmc data spec names no files; expected llmc:GLOB_OR_PATH[,...]");
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    if (!has_glob_chars(pattern)) {
      files.push_back(pattern);  // a missing plain path is reported by LlmcShard
      continue;
    }
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (rc == GLOB_NOMATCH) fail("llm.c shard pattern '", pattern, "' matches no files");
    if (rc != 0) fail("llm.c shard pattern '", pattern, "' could not be expanded (glob error ", rc, ")");
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

LlmcTokenSource::LlmcTokenSource(const std::vector<std::string>& patterns, int64_t vocab,
                                 Split split, StreamPart part, bool shuffle, uint64_t seed)
    : SequentialTokenSource("llmc", split, part, shuffle, seed) {
  std::vector<std::string> all = expand_shard_patterns(patterns);
  // Name-based split only when the names actually distinguish the two sets.
  const auto is_val = [](const std::string& f) {
    return std::filesystem::path(f).filename().string().find("val") != std::string::npos;
  };
  const auto n_val = std::count_if(all.begin(), all.end(), is_val);
  const bool by_name = n_val > 0 && n_val < static_cast<int64_t>(all.size());
  for (const std::string& f : all)
    if (!by_name || is_val(f) == (split == Split::val)) files_.push_back(f);

  offsets_.push_back(0);
  for (const std::string& f : files_) {
    shards_.emplace_back(f);
    if (shards_.back().magic() != shards_.front().magic())
      fail("llm.c shards '", shards_.front().path(), "' (magic ", shards_.front().magic(),
           ") and '", f, "' (magic ", shards_.back().magic(),
           ") have different formats; one source reads one format");
    offsets_.push_back(offsets_.back() + shards_.back().num_tokens());
  }
  const bool llama3 = shards_.front().magic() == kLlmcMagicLlama3;
  const std::optional<LlmcDataInfo> info =
      read_llmc_data_info(std::filesystem::path(all.front()).parent_path());
  const int64_t default_vocab = llama3 ? kLlama3Vocab : kGpt2Vocab;
  vocab_ = vocab > 0 ? vocab : info ? info->vocab_size : default_vocab;
  if (info) {
    tokenizer_ = info->tokenizer;
    for (const auto& id : {tokenizer_.bos_token_id, tokenizer_.eos_token_id,
                           tokenizer_.pad_token_id})
      if (id && *id >= vocab_)
        fail("llmc vocab=", vocab_, " does not hold special token id ", *id, " of ",
             (std::filesystem::path(all.front()).parent_path() / kLlmcDataInfoName).string());
  }
  const int64_t max_vocab = llama3 ? (int64_t{1} << 31) - 1 : int64_t{1} << 16;
  if (vocab_ > max_vocab)
    fail("llmc vocab=", vocab_, " exceeds what ", llama3 ? "uint32" : "uint16",
         " tokens can hold (", max_vocab, ")");

  const int64_t total = offsets_.back();
  if (by_name) {
    set_range(0, total);
    split_rule_ = format("files named *val* are val (", n_val, " of ", all.size(), ")");
  } else {
    int64_t cut = total - total / 20;
    if (cut == total && total >= 2) cut = total - 1;
    if (split == Split::train)
      set_range(0, cut);
    else
      set_range(cut, total);
    split_rule_ = "train = first 95% of tokens, val = last 5%";
  }
  check_split_vocabulary();
}

void LlmcTokenSource::check_split_vocabulary() const {
  // uint16 tokens are below 65536: nothing to check for such a vocabulary.
  if (shards_.front().token_bytes() == 2 && vocab_ >= (int64_t{1} << 16)) return;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const int64_t begin = std::max(range_begin(), offsets_[s]);
    const int64_t end = std::min(range_end(), offsets_[s + 1]);
    if (begin >= end) continue;
    const LlmcShard& shard = shards_[s];
    const int64_t local = begin - offsets_[s];
    const int64_t bad = shard.find_token_at_least(local, end - begin, static_cast<uint64_t>(vocab_));
    if (bad < 0) continue;
    uint32_t value = 0;
    shard.read(bad, 1, &value);
    fail("llm.c shard '", shard.path(), "': token ", value, " at index ", bad,
         " is outside the vocabulary [0, ", vocab_, ") (found checking the ", split_name(split()),
         " split at start-up); pass vocab=N in the data spec if the tokenizer is larger");
  }
}

void LlmcTokenSource::copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const {
  // Buffer raw values in the output itself: uint32 and int32 have the same size.
  static_assert(sizeof(uint32_t) == sizeof(int32_t));
  auto shard = std::upper_bound(offsets_.begin(), offsets_.end(), abs_begin) - offsets_.begin() - 1;
  while (count > 0) {
    while (offsets_[shard + 1] <= abs_begin) ++shard;  // skip empty shards
    const LlmcShard& s = shards_[shard];
    const int64_t local = abs_begin - offsets_[shard];
    const int64_t n = std::min(count, s.num_tokens() - local);
    uint32_t raw[1024];
    for (int64_t done = 0; done < n;) {
      const int64_t chunk = std::min<int64_t>(n - done, 1024);
      s.read(local + done, chunk, raw);
      for (int64_t i = 0; i < chunk; ++i) {
        if (raw[i] >= static_cast<uint64_t>(vocab_))
          fail("llm.c shard '", s.path(), "': token ", raw[i], " at index ", local + done + i,
               " is outside the vocabulary [0, ", vocab_, "); pass vocab=N in the data spec",
               " if the tokenizer is larger");
        out[done + i] = static_cast<int32_t>(raw[i]);
      }
      done += chunk;
    }
    out += n;
    abs_begin += n;
    count -= n;
  }
}

nlohmann::json LlmcTokenSource::identity() const {
  nlohmann::json shards = nlohmann::json::array();
  for (const LlmcShard& s : shards_) shards.push_back({s.path(), s.num_tokens()});
  return {{"shards", shards}, {"vocab", vocab_}};
}

std::string LlmcTokenSource::error_name() const {
  return format("llmc source (", files_.size(), " shard(s) from '", files_.front(), "', ",
                total_tokens(), " tokens)");
}

std::string LlmcTokenSource::describe() const {
  return format("llmc: ", files_.size(), " shard(s) ", files_.front(),
                files_.size() > 1 ? format(" .. ", files_.back()) : std::string(), ", ",
                total_tokens(), " tokens, ", shards_.front().token_bytes() == 2 ? "uint16" : "uint32",
                ", vocab ", vocab_,
                tokenizer_.kind == TokenizerFacts::Kind::file
                    ? format(" (tokenizer ", tokenizer_.tokenizer_json.filename().string(),
                             " from ", kLlmcDataInfoName, ")")
                    : std::string(),
                "; ", split_name(split()), " split = tokens [", range_begin(),
                ", ", range_end(), ") (", split_rule_, "), ", describe_order());
}

}  // namespace sdp::data
