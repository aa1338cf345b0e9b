#include "engine/data/sequential_source.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/core/json_integer.h"
#include "engine/data/index_permutation.h"

namespace sdp::data {
namespace {
// (a * b) mod m without overflow: streams may hold billions of tokens.
int64_t mul_mod(int64_t a, int64_t b, int64_t m) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<int64_t>((static_cast<u128>(a) * static_cast<u128>(b)) %
                              static_cast<u128>(m));
}

// The key of epoch `epoch`'s draws; the same on every rank and world size.
uint64_t epoch_key(uint64_t seed, int64_t epoch) {
  return splitmix64(splitmix64(seed ^ stable_hash("token-window-shuffle")) ^
                    static_cast<uint64_t>(epoch));
}

const char* order_name(bool shuffled) {
  return shuffled ? "in shuffled windows" : "in file order";
}
}  // namespace

SequentialTokenSource::SequentialTokenSource(std::string kind, Split split, StreamPart part,
                                             bool shuffle, uint64_t seed)
    : kind_(std::move(kind)),
      split_(split),
      part_(part),
      shuffle_(shuffle && split == Split::train),
      seed_(seed) {
  detail::check_stream_part(part);
}

void SequentialTokenSource::set_range(int64_t begin, int64_t end) {
  SDP_CHECK(0 <= begin && begin <= end, "bad token range [", begin, ", ", end, ")");
  begin_ = begin;
  end_ = end;
  cursor_ = 0;
}

void SequentialTokenSource::check_fits(int64_t seq) const {
  const int64_t length = end_ - begin_;
  if (seq + 1 > length) {
    fail(error_name(), ": the ", split_name(split_), " split holds ", length,
         " tokens, fewer than one window of seq+1 = ", seq + 1,
         " tokens; use a shorter sequence or more data");
  }
}

int64_t SequentialTokenSource::windows_per_epoch(int64_t seq) const {
  SDP_CHECK(seq >= 1 && seq + 1 <= end_ - begin_, "no window of ", seq + 1,
            " tokens fits in a range of ", end_ - begin_);
  return (end_ - begin_ - 1) / seq;
}

int64_t SequentialTokenSource::window_offset(int64_t epoch, int64_t index, int64_t seq) const {
  const int64_t windows = windows_per_epoch(seq);
  // Tokens of the range no window of this epoch covers: a random share of
  // them comes before the first window, the rest after the last.
  const int64_t spare = (end_ - begin_ - 1) - windows * seq;
  const uint64_t key = epoch_key(seed_, epoch);
  const auto start = static_cast<int64_t>(splitmix64(key ^ stable_hash("offset")) %
                                          static_cast<uint64_t>(spare + 1));
  const IndexPermutation order(windows, splitmix64(key ^ stable_hash("order")));
  return start + order.at(index) * seq;
}

void SequentialTokenSource::next_batch(int32_t* windows, int64_t batch, int64_t seq) {
  detail::check_batch_args(kind_.c_str(), windows, batch, seq);
  check_fits(seq);
  if (shuffle_)
    read_shuffled(windows, batch, seq);
  else
    read_file_order(windows, batch, seq);
}

void SequentialTokenSource::read_file_order(int32_t* windows, int64_t batch, int64_t seq) {
  const int64_t length = end_ - begin_;
  for (int64_t row = 0; row < batch; ++row) {
    const int64_t window = row * part_.world + part_.rank;  // index within this call
    int64_t offset = (cursor_ + mul_mod(window, seq, length)) % length;
    int32_t* out = windows + row * (seq + 1);
    int64_t remaining = seq + 1;
    while (remaining > 0) {
      const int64_t count = std::min(remaining, length - offset);
      copy_tokens(begin_ + offset, count, out);
      out += count;
      remaining -= count;
      offset = (offset + count) % length;
    }
  }
  const int64_t consumed = mul_mod(batch * part_.world, seq, length);
  cursor_ = (cursor_ + consumed) % length;
}

void SequentialTokenSource::read_shuffled(int32_t* windows, int64_t batch, int64_t seq) {
  if (seq != window_seq_) {
    // Epochs are cut for one window length; another one begins a new epoch
    // (unless none of the current one has been read).
    if (window_seq_ != 0 && index_ != 0) {
      ++epoch_;
      index_ = 0;
    }
    window_seq_ = seq;
  }
  const int64_t per_epoch = windows_per_epoch(seq);
  for (int64_t row = 0; row < batch; ++row) {
    // Window `ahead` of the global stream from the current position.
    const int64_t ahead = index_ + row * part_.world + part_.rank;
    const int64_t offset = window_offset(epoch_ + ahead / per_epoch, ahead % per_epoch, seq);
    copy_tokens(begin_ + offset, seq + 1, windows + row * (seq + 1));
  }
  const int64_t next = index_ + batch * part_.world;
  epoch_ += next / per_epoch;
  index_ = next % per_epoch;
}

nlohmann::json SequentialTokenSource::order_json() const {
  return {{"shuffle", true}, {"seed", seed_}};
}

std::string SequentialTokenSource::describe_order() const {
  if (shuffle_) return format("windows shuffled each epoch (seed ", seed_, ")");
  return split_ == Split::train ? "file order (unshuffled)" : "file order";
}

nlohmann::json SequentialTokenSource::state() const {
  nlohmann::json s = {{"kind", kind_},
                      {"identity", identity()},
                      {"split", split_name(split_)},
                      {"range", {begin_, end_}}};
  // A file-order state is what it has always been, so that checkpoints from
  // before shuffling existed restore into a file-order source.
  if (!shuffle_) {
    s["cursor"] = cursor_;
    return s;
  }
  s["order"] = order_json();
  s["epoch"] = epoch_;
  s["index"] = index_;
  s["seq"] = window_seq_;
  return s;
}

void SequentialTokenSource::restore(const nlohmann::json& state) {
  const std::string who = error_name();
  detail::expect_state_field(state, "kind", kind_, who);
  detail::expect_state_field(state, "identity", identity(), who);
  detail::expect_state_field(state, "split", split_name(split_), who);
  detail::expect_state_field(state, "range", nlohmann::json{begin_, end_}, who);
  const bool saved_shuffled = state.contains("order");
  if (saved_shuffled != shuffle_)
    fail(who, ": the saved data state reads the ", split_name(split_), " split ",
         order_name(saved_shuffled), " but this source reads it ", order_name(shuffle_),
         "; resume with the shuffle setting the state was saved with (sdp-train --shuffle ",
         saved_shuffled ? "true" : "false", ")");
  if (shuffle_) {
    restore_shuffled(state, who);
    return;
  }
  if (!state.contains("cursor") || !state["cursor"].is_number_integer())
    fail(who, ": saved data state has no integer field 'cursor'");
  const int64_t cursor =
      json_integer<int64_t>(state["cursor"], who + ": saved data state field 'cursor'");
  if (cursor < 0 || cursor >= std::max<int64_t>(end_ - begin_, 1))
    fail(who, ": saved cursor ", cursor, " is outside [0, ", end_ - begin_, ")");
  cursor_ = cursor;
}

void SequentialTokenSource::restore_shuffled(const nlohmann::json& state,
                                             const std::string& who) {
  detail::expect_state_field(state, "order", order_json(), who);
  for (const char* field : {"epoch", "index", "seq"})
    if (!state.contains(field) || !state[field].is_number_integer())
      fail(who, ": saved data state has no non-negative integer field '", field, "'");
  auto read = [&](const char* field) {
    return json_integer<int64_t>(state[field], who + ": saved data state field '" + field + "'",
                                 0);
  };
  const int64_t epoch = read("epoch");
  const int64_t index = read("index");
  const int64_t seq = read("seq");
  const int64_t length = end_ - begin_;
  // Far beyond any run (an epoch reads at least one window), and far enough
  // from int64's end that advancing it cannot overflow.
  constexpr int64_t kMaxEpoch = std::numeric_limits<int64_t>::max() / 4;
  if (epoch > kMaxEpoch)
    fail(who, ": saved data state has 'epoch' ", epoch, ", too large a position (valid: [0, ",
         kMaxEpoch, "])");
  if (seq == 0 && index != 0)
    fail(who, ": saved data state has 'index' ", index, " but 'seq' 0 (no window read yet)");
  if (seq > 0 && seq + 1 > length)
    fail(who, ": saved data state has 'seq' ", seq, ", but windows of seq+1 = ", seq + 1,
         " tokens do not fit in the ", length, " tokens of the ", split_name(split_), " split");
  if (seq > 0 && index >= windows_per_epoch(seq))
    fail(who, ": saved data state has 'index' ", index, ", outside the ",
         windows_per_epoch(seq), " windows of an epoch of seq ", seq);
  epoch_ = epoch;
  index_ = index;
  window_seq_ = seq;
}

}  // namespace sdp::data
