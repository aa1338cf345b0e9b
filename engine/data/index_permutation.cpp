#include "engine/data/index_permutation.h"

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"

namespace sdp::data {

IndexPermutation::IndexPermutation(int64_t n, uint64_t key) : n_(n) {
  SDP_CHECK(n >= 1 && n <= (int64_t{1} << 62), "cannot permute ", n, " indices");
  // The smallest half width h with 2^(2h) >= n (h >= 1, so n = 1 and 2 work).
  while (half_bits_ < 31 && (uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(n))
    ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  for (int r = 0; r < kRounds; ++r)
    round_keys_[static_cast<size_t>(r)] = splitmix64(key ^ splitmix64(static_cast<uint64_t>(r)));
}

uint64_t IndexPermutation::network(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (const uint64_t round_key : round_keys_) {
    const uint64_t mixed = left ^ (splitmix64(right ^ round_key) & half_mask_);
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

int64_t IndexPermutation::at(int64_t i) const {
  SDP_CHECK(i >= 0 && i < n_, "permutation index ", i, " outside [0, ", n_, ")");
  // Cycle walking: the network permutes [0, 2^(2h)); following it from i
  // until it lands in [0, n) is a permutation of [0, n). It ends because the
  // cycle through i returns to i, which is < n.
  uint64_t x = static_cast<uint64_t>(i);
  do {
    x = network(x);
  } while (x >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(x);
}

}  // namespace sdp::data
