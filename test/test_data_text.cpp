// Byte-level text: bytes come back as tokens; short, empty and missing files
// are clear errors.
#include <catch2/catch.hpp>

#include "engine/core/error.h"
#include "engine/data/byte_text.h"
#include "test_data_support.h"

using sdp::data::make_token_source;
using sdp::data::Split;
using sdp::testing::TempDir;

TEST_CASE("text: bytes round-trip as tokens", "[data]") {
  TempDir dir;
  std::vector<uint8_t> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(255 - 2 * i);
  sdp::testing::write_bytes(dir.file("t.txt"), bytes);
  auto src = make_token_source("text:" + dir.file("t.txt"), 0);
  REQUIRE(src->vocab_size() == 256);
  REQUIRE_THAT(src->describe(), Catch::Contains("[0, 95)"));
  std::vector<int32_t> w(3 * 11);
  src->next_batch(w.data(), 3, 10);
  for (int row = 0; row < 3; ++row)
    for (int i = 0; i < 11; ++i)
      REQUIRE(w[static_cast<size_t>(row * 11 + i)] == bytes[static_cast<size_t>(row * 10 + i)]);
  // Val: the last 5 bytes.
  auto val = make_token_source("text:" + dir.file("t.txt"), 0, Split::val);
  std::vector<int32_t> v(5);
  val->next_batch(v.data(), 1, 4);
  for (int i = 0; i < 5; ++i) REQUIRE(v[static_cast<size_t>(i)] == bytes[static_cast<size_t>(95 + i)]);
  // Resume.
  const auto saved = src->state();
  std::vector<int32_t> a(11), b(11);
  src->next_batch(a.data(), 1, 10);
  auto again = make_token_source("text:" + dir.file("t.txt"), 0);
  again->restore(saved);
  again->next_batch(b.data(), 1, 10);
  REQUIRE(a == b);
}

TEST_CASE("text: missing, empty and too-short files are clear errors", "[data]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(make_token_source("text:" + dir.file("none.txt"), 0),
                      Catch::Contains("none.txt") && Catch::Contains("does not exist"));
  sdp::testing::write_bytes(dir.file("empty.txt"), {});
  REQUIRE_THROWS_WITH(make_token_source("text:" + dir.file("empty.txt"), 0),
                      Catch::Contains("empty.txt") && Catch::Contains("empty"));
  sdp::testing::write_bytes(dir.file("short.txt"), {'h', 'e', 'l', 'l', 'o'});
  auto src = make_token_source("text:" + dir.file("short.txt"), 0);
  std::vector<int32_t> w(17);
  REQUIRE_THROWS_AS(src->next_batch(w.data(), 1, 16), sdp::Error);
  REQUIRE_THROWS_WITH(src->next_batch(w.data(), 1, 16),
                      Catch::Contains("short.txt") && Catch::Contains("5 bytes") &&
                          Catch::Contains("seq+1 = 17"));
}
