#pragma once
// CRC-32C (Castagnoli), the checksum checkpoint files carry per tensor so
// that a flipped byte is found on load. SSE4.2's crc32 instruction where the
// CPU has it (about 5 GB/s on one core), else tables, slice-by-8 (about
// 1.3 GB/s): small beside writing or reading the bytes on disk.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sdp::checkpoint {

// `seed` continues an earlier call's result over the following bytes.
uint32_t crc32c(const void* data, size_t size, uint32_t seed = 0);
// The same by tables alone (what crc32c falls back to), for tests.
uint32_t crc32c_tables(const void* data, size_t size, uint32_t seed = 0);

// As 8 lowercase hex digits (how the files record it).
std::string crc32c_hex(uint32_t crc);

}  // namespace sdp::checkpoint
