// Fuzz target: CIFAR binary files. The first input byte picks CIFAR-10 or
// CIFAR-100 (bit 0) and how many records the layout expects (bits 1-2: one
// to four); the rest is the file, which must hold exactly that many records.
// Every label and pixel of an accepted file is read.
#include <cstddef>
#include <cstdint>

#include "engine/data/cifar_binary.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using sdp::data::CifarKind;
  const CifarKind kind = (data[0] & 1) ? CifarKind::cifar100 : CifarKind::cifar10;
  const int64_t records = 1 + ((data[0] >> 1) & 3);
  sdp::data::CifarLayout layout = sdp::data::cifar_layout(kind);
  layout.train.resize(1);
  layout.train[0].records = records;
  const auto dir = sdp::fuzz::ProcessTempDir::path() / "cifar";
  sdp::fuzz::write_input(dir / layout.train[0].name, data + 1, size - 1);
  sdp::fuzz::expect_only_sdp_errors([&] {
    const sdp::data::CifarSplitFiles files(layout, dir.string(), sdp::data::Split::train);
    uint32_t sum = 0;
    for (int64_t i = 0; i < files.size(); ++i) {
      sum += static_cast<uint32_t>(files.label(i));
      const uint8_t* pixels = files.pixels(i);
      for (int64_t p = 0; p < sdp::data::kCifarPixelBytes; ++p) sum += pixels[p];
    }
    // Keeps the reads from being optimized away.
    if (sum == 0xdeadbeef) std::fprintf(stderr, "\n");
  });
  return 0;
}
