// Fuzz target: a safetensors file is opened (header and layout validated)
// and every tensor it lists is read into a buffer of the size it declares.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "test/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = sdp::fuzz::ProcessTempDir::path() / "input.safetensors";
  sdp::fuzz::write_input(path, data, size);
  sdp::fuzz::expect_only_sdp_errors([&] {
    sdp::checkpoint::SafetensorsFile file(path);
    for (const auto& [key, value] : file.metadata()) (void)key.size(), (void)value.size();
    for (const std::string& name : file.names()) {
      (void)file.dtype_string(name);
      // A tensor of a dtype or rank sdp does not support is refused by name;
      // the others must still read.
      sdp::fuzz::expect_only_sdp_errors([&] {
        const sdp::checkpoint::SafetensorsTensorInfo info = file.info(name);
        // open() checked that the declared bytes lie inside the file, so
        // this allocation is bounded by the input size.
        std::vector<std::byte> buffer(info.nbytes);
        const sdp::Tensor dst(info.nbytes ? buffer.data() : nullptr, info.shape, info.dtype,
                              sdp::Device::cpu);
        file.read_into(name, dst);
      });
    }
  });
  return 0;
}
