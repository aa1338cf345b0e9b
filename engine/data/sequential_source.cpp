#include "engine/data/sequential_source.h"

#include <algorithm>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::data {
namespace {
// (a * b) mod m without overflow: streams may hold billions of tokens.
int64_t mul_mod(int64_t a, int64_t b, int64_t m) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<int64_t>((static_cast<u128>(a) * static_cast<u128>(b)) %
                              static_cast<u128>(m));
}
}  // namespace

SequentialTokenSource::SequentialTokenSource(std::string kind, Split split, StreamPart part)
    : kind_(std::move(kind)), split_(split), part_(part) {
  detail::check_stream_part(part);
}

void SequentialTokenSource::set_range(int64_t begin, int64_t end) {
  SDP_CHECK(0 <= begin && begin <= end, "bad token range [", begin, ", ", end, ")");
  begin_ = begin;
  end_ = end;
  cursor_ = 0;
}

void SequentialTokenSource::next_batch(int32_t* windows, int64_t batch, int64_t seq) {
  detail::check_batch_args(kind_.c_str(), windows, batch, seq);
  const int64_t length = end_ - begin_;
  if (seq + 1 > length) {
    fail(error_name(), ": the ", split_name(split_), " split holds ", length,
         " tokens, fewer than one window of seq+1 = ", seq + 1,
         " tokens; use a shorter sequence or more data");
  }
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

nlohmann::json SequentialTokenSource::state() const {
  return {{"kind", kind_},
          {"identity", identity()},
          {"split", split_name(split_)},
          {"range", {begin_, end_}},
          {"cursor", cursor_}};
}

void SequentialTokenSource::restore(const nlohmann::json& state) {
  const std::string who = error_name();
  detail::expect_state_field(state, "kind", kind_, who);
  detail::expect_state_field(state, "identity", identity(), who);
  detail::expect_state_field(state, "split", split_name(split_), who);
  detail::expect_state_field(state, "range", nlohmann::json{begin_, end_}, who);
  if (!state.contains("cursor") || !state["cursor"].is_number_integer())
    fail(who, ": saved data state has no integer field 'cursor'");
  const int64_t cursor =
      json_integer<int64_t>(state["cursor"], who + ": saved data state field 'cursor'");
  if (cursor < 0 || cursor >= std::max<int64_t>(end_ - begin_, 1))
    fail(who, ": saved cursor ", cursor, " is outside [0, ", end_ - begin_, ")");
  cursor_ = cursor;
}

}  // namespace sdp::data
