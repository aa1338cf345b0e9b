#pragma once
// Shared reading logic for sources backed by one long token stream (text
// bytes, llm.c shards): a split is a range [begin, end) of the stream.
//
// The split is read in one of two orders (both numbered windows 0, 1, 2, ...
// of a global stream that does not depend on the world size; see
// token_source.h for the ranks' share):
//
// - File order (the val split always; the train split with shuffle off): the
//   range is read as a ring. Window k of the stream starts `seq` tokens
//   after window k-1, so consecutive windows share their boundary token and
//   every token of the range is a target exactly once per pass (as llm.c and
//   nanoGPT read). Windows that run past the end of the range wrap to its
//   start. The state is the token offset of the next window.
//
// - Shuffled (the train split with shuffle on): an epoch is the
//   N = floor((L - 1) / seq) windows of seq + 1 tokens that fit in the L
//   tokens of the range, window j starting at o_e + j * seq, read in the
//   order of a permutation drawn from (seed, epoch) (index_permutation.h);
//   o_e, in [0, L - 1 - N * seq], is drawn from (seed, epoch) too, so the
//   tail that does not fill a window is not always the same tokens. Each
//   epoch reads every window once, epochs differ, and window k of the global
//   stream is a pure function of (seed, seq, k): no generator state is saved,
//   the state is (epoch, index in the epoch, seq). A run resumed with
//   another seq starts the next epoch cut for the new seq.
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
  // True when this source reads shuffled windows (train split, shuffle on).
  bool shuffled() const { return shuffle_; }
  // File order: offset, within the range, of the next window of the global stream.
  int64_t cursor() const { return cursor_; }
  // Shuffled: the windows of seq + 1 tokens in one epoch of this split.
  int64_t windows_per_epoch(int64_t seq) const;
  // Shuffled: the range offset of the first token of window `index` of
  // epoch `epoch` cut for windows of seq + 1 tokens.
  int64_t window_offset(int64_t epoch, int64_t index, int64_t seq) const;

 protected:
  // shuffle: read the train split in shuffled windows keyed by `seed` (the
  // val split ignores both and reads in file order).
  SequentialTokenSource(std::string kind, Split split, StreamPart part, bool shuffle = false,
                        uint64_t seed = 0);
  // The tokens this split reads, as absolute stream positions.
  void set_range(int64_t begin, int64_t end);
  // Copies tokens [abs_begin, abs_begin + count) of the stream; never asked
  // to cross the end of the range. Throws on tokens outside the vocabulary.
  virtual void copy_tokens(int64_t abs_begin, int64_t count, int32_t* out) const = 0;
  // What a saved state must match to be restored here (files, sizes, ...).
  virtual nlohmann::json identity() const = 0;
  // Names the source and its data in errors, e.g. "text source 'a.txt'".
  virtual std::string error_name() const = 0;
  // "file order" or "windows shuffled each epoch (seed S)", for describe().
  std::string describe_order() const;

 private:
  void check_fits(int64_t seq) const;
  void read_file_order(int32_t* windows, int64_t batch, int64_t seq);
  void read_shuffled(int32_t* windows, int64_t batch, int64_t seq);
  nlohmann::json order_json() const;
  void restore_shuffled(const nlohmann::json& state, const std::string& who);

  std::string kind_;
  Split split_;
  StreamPart part_;
  bool shuffle_;
  uint64_t seed_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
  int64_t cursor_ = 0;  // file order
  // Shuffled: the next window of the global stream is window `index_` of
  // epoch `epoch_`, epochs cut for windows of `window_seq_` + 1 tokens (0
  // before the first batch).
  int64_t epoch_ = 0;
  int64_t index_ = 0;
  int64_t window_seq_ = 0;
};

}  // namespace sdp::data
