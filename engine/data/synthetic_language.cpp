#include "engine/data/synthetic_language.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.h"
#include "engine/core/json_integer.h"

namespace sdp::data {
namespace {

// splitmix64's output function: a bijective 64-bit mix.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A splitmix64 sequence from a key; every draw is a fixed function of
// (key, draw number), so sampling is identical on every platform.
class Counter {
 public:
  explicit Counter(uint64_t key) : state_(key) {}
  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return next() % n; }  // bias < n / 2^64, irrelevant here

 private:
  uint64_t state_;
};

// Index of the first cdf entry > u; the last entry is 1 up to rounding, so
// clamp in case u lands beyond it.
int32_t sample_cdf(const double* cdf, int64_t n, double u) {
  const double* it = std::upper_bound(cdf, cdf + n, u);
  return static_cast<int32_t>(std::min<int64_t>(it - cdf, n - 1));
}

double entropy(const double* p, int64_t n) {
  double h = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (p[i] > 0.0) h -= p[i] * std::log(p[i]);
  return h;
}

constexpr uint64_t kSplitTag[2] = {0x7472616e5f5f5f5fULL, 0x76616c5f5f5f5f5fULL};

}  // namespace

SyntheticLanguage::SyntheticLanguage(SyntheticLanguageConfig config, uint64_t stream_seed,
                                     Split split, StreamPart part)
    : config_(config), stream_seed_(stream_seed), split_(split), part_(part) {
  detail::check_stream_part(part);
  const SyntheticLanguageConfig& c = config_;
  if (c.vocab < 2 || c.vocab > 1024)
    fail("synthetic vocab=", c.vocab, " is out of range; valid: 2 .. 1024");
  if (c.max_successors < 1 || c.max_successors > c.vocab)
    fail("synthetic successors=", c.max_successors, " is out of range; valid: 1 .. vocab (",
         c.vocab, ")");
  if (!(c.zipf >= 0.0) || !std::isfinite(c.zipf))
    fail("synthetic zipf=", c.zipf, " is invalid; valid: a finite number >= 0");
  if (!(c.floor > 0.0 && c.floor <= 1.0))
    fail("synthetic floor=", c.floor,
         " is out of range; valid: (0, 1] (a positive floor keeps the chain ergodic)");
  build_language();
}

void SyntheticLanguage::build_language() {
  const int64_t v = config_.vocab;
  const auto vs = static_cast<size_t>(v);
  transition_.assign(vs * vs, config_.floor / static_cast<double>(v));
  Counter rng(mix64(config_.language_seed ^ 0x6c616e6775616765ULL));
  const int64_t k_max = config_.max_successors;
  const int64_t k_min = (k_max + 1) / 2;
  std::vector<int32_t> perm(vs);
  std::vector<double> weights;
  for (int64_t s = 0; s < v; ++s) {
    const int64_t k = k_min + static_cast<int64_t>(rng.below(static_cast<uint64_t>(k_max - k_min + 1)));
    // Partial Fisher-Yates: the first k entries become the successors, in rank order.
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = i + static_cast<int64_t>(rng.below(static_cast<uint64_t>(v - i)));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
    weights.assign(static_cast<size_t>(k), 0.0);
    for (int64_t r = 0; r < k; ++r)
      weights[static_cast<size_t>(r)] = std::pow(static_cast<double>(r + 1), -config_.zipf);
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double* row = &transition_[static_cast<size_t>(s) * vs];
    for (int64_t r = 0; r < k; ++r)
      row[perm[static_cast<size_t>(r)]] +=
          (1.0 - config_.floor) * weights[static_cast<size_t>(r)] / total;
  }

  // Stationary distribution: solve (P^T - I) pi = 0 with the last equation
  // replaced by sum(pi) = 1; the floor makes the solution unique.
  std::vector<double> a(vs * (vs + 1));  // augmented [v, v + 1]
  const auto at = [&](int64_t r, int64_t c) -> double& {
    return a[static_cast<size_t>(r) * (vs + 1) + static_cast<size_t>(c)];
  };
  for (int64_t r = 0; r < v; ++r) {
    for (int64_t c = 0; c < v; ++c)
      at(r, c) = transition_[static_cast<size_t>(c) * vs + static_cast<size_t>(r)] - (r == c ? 1.0 : 0.0);
    at(r, v) = 0.0;
  }
  for (int64_t c = 0; c <= v; ++c) at(v - 1, c) = 1.0;
  for (int64_t col = 0; col < v; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < v; ++r)
      if (std::abs(at(r, col)) > std::abs(at(pivot, col))) pivot = r;
    SDP_CHECK(std::abs(at(pivot, col)) > 1e-300, "singular stationary system at column ", col);
    if (pivot != col)
      for (int64_t c = 0; c <= v; ++c) std::swap(at(col, c), at(pivot, c));
    for (int64_t r = col + 1; r < v; ++r) {
      const double f = at(r, col) / at(col, col);
      if (f == 0.0) continue;
      for (int64_t c = col; c <= v; ++c) at(r, c) -= f * at(col, c);
    }
  }
  stationary_.assign(vs, 0.0);
  for (int64_t r = v - 1; r >= 0; --r) {
    double x = at(r, v);
    for (int64_t c = r + 1; c < v; ++c) x -= at(r, c) * stationary_[static_cast<size_t>(c)];
    stationary_[static_cast<size_t>(r)] = x / at(r, r);
  }
  // A few power steps polish rounding; then clip and renormalise.
  std::vector<double> next(vs);
  for (int iter = 0; iter < 4; ++iter) {
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t s = 0; s < v; ++s) {
      const double ps = stationary_[static_cast<size_t>(s)];
      const double* row = &transition_[static_cast<size_t>(s) * vs];
      for (int64_t t = 0; t < v; ++t) next[static_cast<size_t>(t)] += ps * row[t];
    }
    stationary_.swap(next);
  }
  for (double& p : stationary_) p = std::max(p, 0.0);
  const double norm = std::accumulate(stationary_.begin(), stationary_.end(), 0.0);
  for (double& p : stationary_) p /= norm;

  entropy_rate_ = 0.0;
  for (int64_t s = 0; s < v; ++s)
    entropy_rate_ += stationary_[static_cast<size_t>(s)] *
                     entropy(&transition_[static_cast<size_t>(s) * vs], v);
  stationary_entropy_ = entropy(stationary_.data(), v);

  transition_cdf_.resize(vs * vs);
  for (int64_t s = 0; s < v; ++s) {
    const size_t base = static_cast<size_t>(s) * vs;
    std::partial_sum(transition_.begin() + static_cast<std::ptrdiff_t>(base),
                     transition_.begin() + static_cast<std::ptrdiff_t>(base + vs),
                     transition_cdf_.begin() + static_cast<std::ptrdiff_t>(base));
  }
  stationary_cdf_.resize(vs);
  std::partial_sum(stationary_.begin(), stationary_.end(), stationary_cdf_.begin());
}

std::optional<double> SyntheticLanguage::best_achievable_loss(int64_t seq) const {
  if (seq < 1) fail("best_achievable_loss: seq must be >= 1, got ", seq);
  return entropy_rate_;
}

void SyntheticLanguage::sample_window(uint64_t window, int32_t* out, int64_t length) const {
  Counter rng(mix64(mix64(mix64(stream_seed_) ^ kSplitTag[split_ == Split::val ? 1 : 0]) ^ window));
  const int64_t v = config_.vocab;
  int32_t token = sample_cdf(stationary_cdf_.data(), v, rng.uniform());
  out[0] = token;
  for (int64_t i = 1; i < length; ++i) {
    token = sample_cdf(&transition_cdf_[static_cast<size_t>(token * v)], v, rng.uniform());
    out[i] = token;
  }
}

void SyntheticLanguage::next_batch(int32_t* windows, int64_t batch, int64_t seq) {
  detail::check_batch_args("synthetic", windows, batch, seq);
  for (int64_t row = 0; row < batch; ++row) {
    const int64_t window = next_window_ + row * part_.world + part_.rank;
    sample_window(static_cast<uint64_t>(window), windows + row * (seq + 1), seq + 1);
  }
  next_window_ += batch * part_.world;
}

nlohmann::json SyntheticLanguage::identity() const {
  return {{"vocab", config_.vocab},       {"language", config_.language_seed},
          {"successors", config_.max_successors}, {"zipf", config_.zipf},
          {"floor", config_.floor},       {"stream_seed", stream_seed_}};
}

nlohmann::json SyntheticLanguage::state() const {
  return {{"kind", "synthetic"},
          {"identity", identity()},
          {"split", split_name(split_)},
          {"next_window", next_window_}};
}

void SyntheticLanguage::restore(const nlohmann::json& state) {
  const std::string who = "synthetic source";
  detail::expect_state_field(state, "kind", "synthetic", who);
  detail::expect_state_field(state, "identity", identity(), who);
  detail::expect_state_field(state, "split", split_name(split_), who);
  if (!state.contains("next_window") || !state["next_window"].is_number_integer())
    fail(who, ": saved data state has no non-negative integer field 'next_window'");
  next_window_ = json_integer<int64_t>(state["next_window"],
                                       who + ": saved data state field 'next_window'", 0);
}

std::string SyntheticLanguage::describe() const {
  return format("synthetic: order-1 Markov language, vocab ", config_.vocab, ", language ",
                config_.language_seed, ", successors ", (config_.max_successors + 1) / 2, "..",
                config_.max_successors, ", zipf ", config_.zipf, ", floor ", config_.floor,
                "; entropy rate ", entropy_rate_, " nats/token (best achievable loss), ",
                "stationary entropy ", stationary_entropy_, "; ", split_name(split_),
                " stream, seed ", stream_seed_);
}

}  // namespace sdp::data
