// The synthetic language: determinism, resumption, rank streams, and an
// empirical check of the entropy rate.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "engine/core/error.h"
#include "engine/data/synthetic_language.h"

using sdp::data::make_token_source;
using sdp::data::Split;
using sdp::data::StreamPart;
using sdp::data::SyntheticLanguage;
using sdp::data::SyntheticLanguageConfig;

namespace {
std::vector<int32_t> next(sdp::data::TokenSource& s, int64_t batch, int64_t seq) {
  std::vector<int32_t> w(static_cast<size_t>(batch * (seq + 1)));
  s.next_batch(w.data(), batch, seq);
  return w;
}
}  // namespace

TEST_CASE("synthetic: deterministic per seed, different across seeds and splits", "[data]") {
  auto a = make_token_source("synthetic", 7);
  auto b = make_token_source("synthetic", 7);
  auto c = make_token_source("synthetic", 8);
  auto v = make_token_source("synthetic", 7, Split::val);
  auto d = make_token_source("synthetic:seed=7", 99);  // spec seed overrides
  for (int step = 0; step < 3; ++step) {
    auto wa = next(*a, 4, 32);
    REQUIRE(wa == next(*b, 4, 32));
    REQUIRE(wa == next(*d, 4, 32));
    REQUIRE(wa != next(*c, 4, 32));
    REQUIRE(wa != next(*v, 4, 32));
    for (int32_t t : wa) REQUIRE((t >= 0 && t < 64));
  }
  REQUIRE(a->vocab_size() == 64);
  REQUIRE_THAT(a->describe(), Catch::Contains("entropy rate"));
}

TEST_CASE("synthetic: state/restore resumes bit-identically", "[data]") {
  auto a = make_token_source("synthetic:vocab=100,successors=6", 3);
  next(*a, 5, 17);
  const std::string saved = a->state().dump();
  auto expect1 = next(*a, 3, 40);
  auto expect2 = next(*a, 2, 9);
  auto b = make_token_source("synthetic:vocab=100,successors=6", 3);
  b->restore(nlohmann::json::parse(saved));
  REQUIRE(next(*b, 3, 40) == expect1);
  REQUIRE(next(*b, 2, 9) == expect2);
  auto other = make_token_source("synthetic:vocab=100,successors=5", 3);
  REQUIRE_THROWS_WITH(other->restore(nlohmann::json::parse(saved)),
                      Catch::Contains("identity") && Catch::Contains("successors"));
  auto val = make_token_source("synthetic:vocab=100,successors=6", 3, Split::val);
  REQUIRE_THROWS_WITH(val->restore(nlohmann::json::parse(saved)), Catch::Contains("split"));
}

TEST_CASE("synthetic: ranks read disjoint windows of the global stream", "[data]") {
  auto single = make_token_source("synthetic", 11);
  auto r0 = make_token_source("synthetic", 11, Split::train, StreamPart{0, 3});
  auto r1 = make_token_source("synthetic", 11, Split::train, StreamPart{1, 3});
  auto r2 = make_token_source("synthetic", 11, Split::train, StreamPart{2, 3});
  for (int step = 0; step < 2; ++step) {
    auto all = next(*single, 6, 16);
    std::vector<int32_t> parts[3] = {next(*r0, 2, 16), next(*r1, 2, 16), next(*r2, 2, 16)};
    REQUIRE(parts[0] != parts[1]);
    REQUIRE(parts[1] != parts[2]);
    for (int row = 0; row < 6; ++row)
      for (int i = 0; i < 17; ++i)
        REQUIRE(parts[row % 3][static_cast<size_t>((row / 3) * 17 + i)] ==
                all[static_cast<size_t>(row * 17 + i)]);
  }
  REQUIRE(r0->state() == r2->state());
  REQUIRE_THROWS_WITH(make_token_source("synthetic", 1, Split::train, StreamPart{3, 3}),
                      Catch::Contains("rank 3 of world 3"));
}

TEST_CASE("synthetic: empirical NLL matches the entropy rate", "[data]") {
  for (const char* spec : {"synthetic", "synthetic:vocab=256,successors=16,zipf=0.7,floor=0.02"}) {
    auto src = make_token_source(spec, 5);
    const auto& lang = dynamic_cast<const SyntheticLanguage&>(*src);
    INFO(lang.describe());
    const double rate = lang.entropy_rate();
    REQUIRE(lang.best_achievable_loss(64) == rate);
    // Transition rows and pi are distributions, and pi is stationary.
    const int64_t v = lang.vocab_size();
    for (int64_t s = 0; s < v; ++s) {
      double row = 0.0, flow = 0.0;
      for (int64_t t = 0; t < v; ++t) {
        row += lang.probability(static_cast<int32_t>(s), static_cast<int32_t>(t));
        flow += lang.stationary()[static_cast<size_t>(t)] *
                lang.probability(static_cast<int32_t>(t), static_cast<int32_t>(s));
      }
      REQUIRE(row == Approx(1.0).epsilon(1e-12));
      REQUIRE(flow == Approx(lang.stationary()[static_cast<size_t>(s)]).epsilon(1e-10));
    }
    // ~200k targets: the mean NLL under the true probabilities estimates the rate.
    const int64_t batch = 100, seq = 2000;
    auto w = next(*src, batch, seq);
    double nll = 0.0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 1; t <= seq; ++t)
        nll -= std::log(lang.probability(w[static_cast<size_t>(b * (seq + 1) + t - 1)],
                                         w[static_cast<size_t>(b * (seq + 1) + t)]));
    nll /= static_cast<double>(batch * seq);
    CHECK(std::abs(nll - rate) < 0.02);
    CHECK(rate > 0.5);
    CHECK(rate < std::log(static_cast<double>(v)));
  }
  // The default language's rate sits in the range a tiny model can reach.
  SyntheticLanguage lang(SyntheticLanguageConfig{}, 0);
  CHECK(lang.entropy_rate() > 1.0);
  CHECK(lang.entropy_rate() < 2.0);
}

TEST_CASE("synthetic: bad options are clear errors", "[data]") {
  REQUIRE_THROWS_WITH(make_token_source("synthetic:vocab=1", 0), Catch::Contains("vocab=1"));
  REQUIRE_THROWS_WITH(make_token_source("synthetic:floor=0", 0), Catch::Contains("floor=0"));
  REQUIRE_THROWS_WITH(make_token_source("synthetic:successors=65", 0),
                      Catch::Contains("successors=65"));
  REQUIRE_THROWS_WITH(make_token_source("synthetic:colour=3", 0),
                      Catch::Contains("colour") && Catch::Contains("valid: vocab, seed"));
  REQUIRE_THROWS_WITH(make_token_source("synthetic:vocab=abc", 0), Catch::Contains("vocab='abc'"));
  auto src = make_token_source("synthetic", 0);
  std::vector<int32_t> w(4);
  REQUIRE_THROWS_WITH(src->next_batch(w.data(), 1, 0), Catch::Contains("seq must be >= 1"));
}
