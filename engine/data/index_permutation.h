#pragma once
// A keyed pseudo-random permutation of 0 .. n-1 evaluated one index at a
// time: at(i) is a pure function of (n, key, i).
//
// Why not a shuffled table (as the image sources keep, epoch_permutation in
// indexed_image_source.h): a token file's windows number in the tens of
// millions, so a table would cost every rank 8 bytes a window and a pass over
// it at each epoch boundary, and a resumed run would have to rebuild it. Here
// a balanced Feistel network over the smallest even number of bits that
// covers n is a bijection of [0, 2^bits); walking the cycle (applying it
// again while the value is >= n) restricts it to a bijection of [0, n)
// (fewer than 4 rounds of the network on average, since 2^bits < 4n). The
// round function is splitmix64 of the half-word and a round key drawn from
// `key` (engine/core/counter_rng.h), six rounds: every output bit depends on
// every input bit, and no generator state needs saving.
#include <array>
#include <cstdint>

namespace sdp::data {

class IndexPermutation {
 public:
  // n in [1, 2^62]; throws sdp::Error otherwise.
  IndexPermutation(int64_t n, uint64_t key);
  int64_t size() const { return n_; }
  // The image of i in [0, n): every i gives a different value in [0, n).
  int64_t at(int64_t i) const;

 private:
  static constexpr int kRounds = 6;
  uint64_t network(uint64_t x) const;  // the Feistel network on 2 * half_bits_ bits

  int64_t n_;
  int half_bits_ = 1;
  uint64_t half_mask_ = 1;
  std::array<uint64_t, kRounds> round_keys_{};
};

}  // namespace sdp::data
