#pragma once
// JSON files for checkpoints (config.json, trainer state): written atomically,
// read with errors that name the file and the position of a parse error.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace sdp::checkpoint {

// Pretty-printed (2-space indent, trailing newline), via write_file_atomically.
void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& value);

// Throws sdp::Error naming the file when it cannot be read or is not valid
// JSON (with the line, column and byte offset of the error).
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace sdp::checkpoint
