#pragma once
// A seeded synthetic language with a known entropy rate, generated on the fly.
//
// The process is a stationary, ergodic order-1 Markov chain over `vocab`
// tokens. Each token s has k_s "likely successors" (k_s drawn uniformly from
// [ceil(K/2), K], K = max_successors), chosen at random without repetition
// and weighted by Zipf's law (weight 1/r^zipf for rank r = 1..k_s). A total
// probability `floor` is spread uniformly over all tokens, so every
// transition has positive probability: the chain is irreducible and
// aperiodic, hence has one stationary distribution pi. pi comes from solving
// pi P = pi, sum(pi) = 1 directly (Gaussian elimination in double), and
//   entropy_rate = sum_s pi(s) H(P(.|s))   in nats/token.
// With the defaults (vocab 64, K = 8, zipf 1, floor 0.01) the rate is about
// 1.5 nats: a 64x64 table with 4-8 strong successors per row, which a small
// LLaMA (dim 64, 2 layers) can learn in a few hundred steps.
//
// Windows are independent: the first token is drawn from pi and each next
// token from P(.|previous). Window g of the stream (g = 0, 1, ...) is sampled
// by a counter-based generator keyed by (stream seed, split, g), so any
// window can be produced without the ones before it and state() is a counter.
//
// Best achievable loss: target t (t = 1..seq) of a window is token t, and the
// model sees tokens 0..t-1, which include token t-1 -- the whole context an
// order-1 chain has. Token 0 is drawn from pi, so token t-1 is distributed as
// pi for every t and E[-log P(token t | token t-1)] = entropy_rate exactly.
// So the best possible mean cross-entropy over the targets of a window is the
// entropy rate for every seq >= 1; best_achievable_loss(seq) returns it.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/token_source.h"

namespace sdp::data {

struct SyntheticLanguageConfig {
  int64_t vocab = 64;           // 2 .. 1024
  uint64_t language_seed = 1;   // picks the transition table
  int64_t max_successors = 8;   // K: each token has ceil(K/2) .. K likely successors; 1 .. vocab
  double zipf = 1.0;            // exponent of the successor weights; >= 0
  double floor = 0.01;          // total probability spread uniformly; in (0, 1]
};

class SyntheticLanguage : public TokenSource {
 public:
  // stream_seed keys the sampling; the split picks an independent stream.
  SyntheticLanguage(SyntheticLanguageConfig config, uint64_t stream_seed,
                    Split split = Split::train, StreamPart part = {});

  int64_t vocab_size() const override { return config_.vocab; }
  void next_batch(int32_t* windows, int64_t batch, int64_t seq) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;

  // nats/token; see the top of this file.
  double entropy_rate() const { return entropy_rate_; }
  // Entropy of the stationary distribution (of the first token of a window).
  double stationary_entropy() const { return stationary_entropy_; }
  // Best mean cross-entropy over a window's seq targets: the entropy rate.
  std::optional<double> best_achievable_loss(int64_t seq) const override;
  // P(next = to | current = from).
  double probability(int32_t from, int32_t to) const {
    return transition_[static_cast<size_t>(from * config_.vocab + to)];
  }
  const std::vector<double>& stationary() const { return stationary_; }
  const SyntheticLanguageConfig& config() const { return config_; }
  uint64_t stream_seed() const { return stream_seed_; }
  int64_t next_window() const { return next_window_; }

 private:
  void build_language();
  void sample_window(uint64_t window, int32_t* out, int64_t length) const;
  nlohmann::json identity() const;

  SyntheticLanguageConfig config_;
  uint64_t stream_seed_;
  Split split_;
  StreamPart part_;
  std::vector<double> transition_;      // [vocab, vocab], rows sum to 1
  std::vector<double> transition_cdf_;  // [vocab, vocab], inclusive prefix sums
  std::vector<double> stationary_;      // [vocab]
  std::vector<double> stationary_cdf_;  // [vocab]
  double entropy_rate_ = 0.0;
  double stationary_entropy_ = 0.0;
  int64_t next_window_ = 0;  // global index of the next window of the stream
};

}  // namespace sdp::data
