#pragma once
// Temporary files for the data tests: a fresh directory per test, removed
// when the test ends, and writers for llm.c shards and raw bytes.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace sdp::testing {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("sdp_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(stamp) + "_" +
             std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// An llm.c shard; header_count < 0 writes the true token count.
inline void write_llmc_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                             int32_t magic = 20240520, int32_t version = 1,
                             int token_bytes = 2, int64_t header_count = -1) {
  std::vector<uint8_t> bytes;
  int32_t header[256] = {};
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<int32_t>(header_count < 0 ? static_cast<int64_t>(tokens.size()) : header_count);
  for (int32_t h : header) put_le(bytes, static_cast<uint32_t>(h), 4);
  for (uint32_t t : tokens) put_le(bytes, t, token_bytes);
  write_bytes(path, bytes);
}

}  // namespace sdp::testing
