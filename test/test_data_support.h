#pragma once
// Temporary files for the data tests: a fresh directory per test, removed
// when the test ends, and writers for llm.c shards and raw bytes.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test/test_temp_dir.h"

#include <unistd.h>

namespace sdp::testing {

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
