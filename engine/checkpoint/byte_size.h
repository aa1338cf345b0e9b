#pragma once
// Byte sizes as people write them: "5GB", "500MB", "2GiB", "1048576".
// Decimal units are powers of 1000 (KB, MB, GB, TB), binary ones powers of
// 1024 (KiB, MiB, GiB, TiB), as transformers' max_shard_size reads them;
// units are case-insensitive, the number a positive integer.
#include <cstdint>
#include <string>

namespace sdp::checkpoint {

// Throws sdp::Error naming `what` (the option or field), the text and the
// valid forms.
uint64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace sdp::checkpoint
