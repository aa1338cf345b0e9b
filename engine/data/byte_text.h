#pragma once
// Any file read as bytes: token = byte value, vocabulary 256. Train reads the
// first 95% of the bytes, val the last 5% (at least one byte each); the train
// split in shuffled windows when `shuffle` (sequential_source.h).
#include <string>

#include "engine/data/mapped_file.h"
#include "engine/data/sequential_source.h"

namespace sdp::data {

class ByteTextSource : public SequentialTokenSource {
 public:
  // Throws sdp::Error naming the file when it is missing or empty.
  explicit ByteTextSource(const std::string& path, Split split = Split::train,
                          StreamPart part = {}, bool shuffle = false, uint64_t seed = 0);

  int64_t vocab_size() const override { return 256; }
  TokenizerFacts tokenizer() const override {
    TokenizerFacts facts;
    facts.kind = TokenizerFacts::Kind::byte_level;
    return facts;
  }
  std::string describe() const override;
  int64_t file_bytes() const { return static_cast<int64_t>(file_.size()); }

 protected:
  void copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const override;
  nlohmann::json identity() const override;
  std::string error_name() const override;

 private:
  MappedFile file_;
};

}  // namespace sdp::data
