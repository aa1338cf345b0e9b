#include "engine/data/token_source.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/byte_text.h"
#include "engine/data/llmc_shard.h"
#include "engine/data/synthetic_language.h"

namespace sdp::data {

const char* split_name(Split split) { return split == Split::train ? "train" : "val"; }

std::string token_source_spec_help() {
  return "valid data specs: 'synthetic', "
         "'synthetic:vocab=V,seed=S,language=L,successors=K,zipf=A,floor=F' (any subset), "
         "'text:PATH', 'llmc:GLOB_OR_PATH[,GLOB_OR_PATH...][,vocab=V]'";
}

namespace detail {

void check_batch_args(const char* who, const int32_t* windows, int64_t batch, int64_t seq) {
  if (windows == nullptr) fail(who, " next_batch: windows buffer is null");
  if (batch < 1) fail(who, " next_batch: batch must be >= 1, got ", batch);
  if (seq < 1) fail(who, " next_batch: seq must be >= 1, got ", seq);
}

void check_stream_part(StreamPart part) {
  if (part.world < 1 || part.rank < 0 || part.rank >= part.world)
    fail("data stream part rank ", part.rank, " of world ", part.world,
         " is invalid; need world >= 1 and 0 <= rank < world");
}

void expect_state_field(const nlohmann::json& state, const char* field,
                        const nlohmann::json& expected, const std::string& source) {
  if (!state.is_object() || !state.contains(field))
    fail(source, ": saved data state has no field '", field, "'; expected ", expected.dump());
  if (state[field] != expected)
    fail(source, ": saved data state does not match this source: '", field, "' is ",
         state[field].dump(), " in the state but ", expected.dump(), " here");
}

}  // namespace detail

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

[[noreturn]] void bad_value(const std::string& spec, const std::string& key,
                            const std::string& value, const char* what) {
  fail("data spec '", spec, "': ", key, "='", value, "' is not ", what);
}

int64_t parse_int(const std::string& spec, const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE) bad_value(spec, key, value, "an integer");
  return v;
}

uint64_t parse_seed(const std::string& spec, const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(value.c_str(), &end, 0);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno == ERANGE)
    bad_value(spec, key, value, "a non-negative 64-bit integer");
  return v;
}

double parse_double(const std::string& spec, const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE) bad_value(spec, key, value, "a number");
  return v;
}

std::unique_ptr<TokenSource> make_synthetic(const std::string& spec, const std::string& options,
                                            uint64_t seed, Split split, StreamPart part) {
  SyntheticLanguageConfig config;
  if (!options.empty()) {
    for (const std::string& item : split_commas(options)) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos)
        fail("data spec '", spec, "': option '", item, "' is not key=value; ",
             token_source_spec_help());
      const std::string key = item.substr(0, eq);
      const std::string value = item.substr(eq + 1);
      if (key == "vocab")
        config.vocab = parse_int(spec, key, value);
      else if (key == "seed")
        seed = parse_seed(spec, key, value);
      else if (key == "language")
        config.language_seed = parse_seed(spec, key, value);
      else if (key == "successors")
        config.max_successors = parse_int(spec, key, value);
      else if (key == "zipf")
        config.zipf = parse_double(spec, key, value);
      else if (key == "floor")
        config.floor = parse_double(spec, key, value);
      else
        fail("data spec '", spec, "': unknown synthetic option '", key,
             "'; valid: vocab, seed, language, successors, zipf, floor");
    }
  }
  return std::make_unique<SyntheticLanguage>(config, seed, split, part);
}

std::unique_ptr<TokenSource> make_llmc(const std::string& spec, const std::string& rest,
                                       uint64_t seed, Split split, StreamPart part,
                                       bool shuffle) {
  std::vector<std::string> patterns;
  int64_t vocab = 0;
  for (const std::string& item : split_commas(rest)) {
    if (item.rfind("vocab=", 0) == 0) {
      vocab = parse_int(spec, "vocab", item.substr(6));
      if (vocab < 1) bad_value(spec, "vocab", item.substr(6), "a positive integer");
    } else if (item.empty()) {
      fail("data spec '", spec, "' has an empty path; ", token_source_spec_help());
    } else {
      patterns.push_back(item);
    }
  }
  if (patterns.empty())
    fail("data spec '", spec, "' names no shard files; ", token_source_spec_help());
  return std::make_unique<LlmcTokenSource>(patterns, vocab, split, part, shuffle, seed);
}

}  // namespace

std::unique_ptr<TokenSource> make_token_source(const std::string& spec, uint64_t seed,
                                               Split split, StreamPart part, bool shuffle) {
  detail::check_stream_part(part);
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? std::string() : spec.substr(colon + 1);
  if (kind == "synthetic") return make_synthetic(spec, rest, seed, split, part);
  if (kind == "text") {
    if (rest.empty()) fail("data spec '", spec, "' names no file; ", token_source_spec_help());
    return std::make_unique<ByteTextSource>(rest, split, part, shuffle, seed);
  }
  if (kind == "llmc") return make_llmc(spec, rest, seed, split, part, shuffle);
  fail("unknown data spec '", spec, "'; ", token_source_spec_help());
}

}  // namespace sdp::data
