// Checkpoint checksums: CRC-32C itself, and a safetensors file whose tensor
// bytes changed after writing refused by name, while a file without
// recorded checksums (written before they existed) still loads.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checksum.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "test/test_checkpoint_support.h"
#include "test/test_support.h"

using namespace sdp;
using namespace sdp::checkpoint;
using namespace sdp::testing;

TEST_CASE("crc32c: the standard check value, continued across calls", "[checkpoint]") {
  const char* text = "123456789";
  REQUIRE(crc32c(text, 9) == 0xE3069283u);  // CRC-32C's published check value
  REQUIRE(crc32c(text + 4, 5, crc32c(text, 4)) == 0xE3069283u);
  REQUIRE(crc32c(text, 0) == 0u);
  REQUIRE(crc32c_tables(text, 9) == 0xE3069283u);
  REQUIRE(crc32c_hex(0xE3069283u) == "e3069283");
  // Long enough for the 8-byte path, at every alignment.
  std::vector<unsigned char> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  for (size_t skip = 0; skip < 8; ++skip) {
    uint32_t bitwise = ~0u;
    for (size_t i = skip; i < bytes.size(); ++i) {
      bitwise ^= bytes[i];
      for (int k = 0; k < 8; ++k) bitwise = (bitwise & 1) ? (bitwise >> 1) ^ 0x82F63B78u : bitwise >> 1;
    }
    REQUIRE(crc32c(bytes.data() + skip, bytes.size() - skip) == ~bitwise);
    REQUIRE(crc32c_tables(bytes.data() + skip, bytes.size() - skip) == ~bitwise);
  }
}

TEST_CASE("safetensors: a tensor whose bytes changed is refused naming file and tensor",
          "[checkpoint]") {
  TempDir dir;
  Arena arena;
  Tensor a = arena.make({4, 3}, DType::f32), b = arena.make({5}, DType::f64);
  fill_uniform(a, 1);
  fill_uniform(b, 2);
  const std::vector<NamedTensor> tensors{{"a", a}, {"b", b}};
  const auto file = dir / "m.safetensors";
  save_safetensors(file, tensors, {{"format", "pt"}});
  {
    SafetensorsFile f(file);
    REQUIRE(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
    Tensor back = arena.make({5}, DType::f64);
    f.read_into("b", back);  // intact: loads
  }
  // Flip one bit of b's last element (the file's last byte).
  std::vector<uint8_t> bytes = read_bytes(file);
  bytes.back() ^= 0x10;
  write_bytes(file, bytes);
  SafetensorsFile f(file);
  Tensor a_back = arena.make({4, 3}, DType::f32), b_back = arena.make({5}, DType::f64);
  f.read_into("a", a_back);  // a's bytes are untouched
  try {
    f.read_into("b", b_back);
    FAIL("a changed tensor was read");
  } catch (const PermanentError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("corrupted checkpoint file '" + file.string() + "'"));
    CHECK_THAT(what, Catch::Contains("tensor 'b' has CRC-32C"));
  }
}
