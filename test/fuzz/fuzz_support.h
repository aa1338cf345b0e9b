#pragma once
// Shared by the fuzz targets: the readers under test take paths, so each
// input is written to a file inside a temporary directory that belongs to
// this process (created on first use, removed at exit). An sdp::Error is the
// expected answer to bad input; any other exception escapes the target and
// libFuzzer reports it as a crash, like a sanitizer report or a leak.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "engine/core/error.h"

namespace sdp::fuzz {

class ProcessTempDir {
 public:
  static const std::filesystem::path& path() {
    static ProcessTempDir dir;
    return dir.path_;
  }
  ~ProcessTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

 private:
  ProcessTempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("sdp_fuzz-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  std::filesystem::path path_;
};

// Writes `size` bytes to `path` (replacing it), creating its directory.
inline void write_input(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    // The harness, not the reader, failed: stop rather than report noise.
    std::fprintf(stderr, "fuzz harness: cannot write '%s'\n", path.c_str());
    std::abort();
  }
}

// Runs `body`, accepting sdp::Error (rejected input) as a normal outcome.
template <typename Body>
void expect_only_sdp_errors(Body&& body) {
  try {
    body();
  } catch (const sdp::Error&) {
  }
}

}  // namespace sdp::fuzz
