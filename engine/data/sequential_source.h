#pragma once
// Shared reading logic for sources backed by one long token stream (text
// bytes, llm.c shards): a split is a range [begin, end) of the stream, read
// as a ring. Window k of the stream starts `seq` tokens after window k-1, so
// consecutive windows share their boundary token and every token of the
// range is a target exactly once per pass (as llm.c and nanoGPT read).
// Windows that run past the end of the range wrap to its start.
#include <cstdint>
#include <string>

#include "engine/data/token_source.h"

namespace sdp::data {

class SequentialTokenSource : public TokenSource {
 public:
  void next_batch(int32_t* windows, int64_t batch, int64_t seq) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;

  Split split() const { return split_; }
  StreamPart part() const { return part_; }
  int64_t range_begin() const { return begin_; }
  int64_t range_end() const { return end_; }
  // Offset, within the range, of the next window of the global stream.
  int64_t cursor() const { return cursor_; }

 protected:
  SequentialTokenSource(std::string kind, Split split, StreamPart part);
  // The tokens this split reads, as absolute stream positions.
  void set_range(int64_t begin, int64_t end);
  // Copies tokens [abs_begin, abs_begin + count) of the stream; never asked
  // to cross the end of the range. Throws on tokens outside the vocabulary.
  virtual void copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const = 0;
  // What a saved state must match to be restored here (files, sizes, ...).
  virtual nlohmann::json identity() const = 0;
  // Names the source and its data in errors, e.g. "text source 'a.txt'".
  virtual std::string error_name() const = 0;

 private:
  std::string kind_;
  Split split_;
  StreamPart part_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
  int64_t cursor_ = 0;
};

}  // namespace sdp::data
