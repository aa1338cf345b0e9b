#pragma once
// A named set of tensors stored as safetensors in one of two forms, the ones
// transformers writes and reads:
//   <base>.safetensors                    everything in one file, or
//   <base>-00001-of-0000N.safetensors ... shards, each tensor whole in one,
//   <base>.safetensors.index.json         {"metadata": {"total_size": bytes},
//                                          "weight_map": {name: shard file}}
// The writer packs tensors greedily in the order given: a shard is closed
// when the next tensor would take it past max_shard_bytes (a larger tensor
// gets a shard of its own); if everything fits in one, the single file is
// written and no index.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"

namespace sdp::checkpoint {

// transformers' default max_shard_size, "5GB".
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ull;

// Writes `tensors` under `base` in `dir` (each file atomically, the index
// last) with `metadata` in every file. Files of the other form left from an
// earlier write under the same base are removed, so readers never see both.
// Returns the files written (names relative to dir).
std::vector<std::string> save_tensor_collection(const std::filesystem::path& dir,
                                                const std::string& base,
                                                std::span<const NamedTensor> tensors,
                                                uint64_t max_shard_bytes,
                                                const std::map<std::string, std::string>& metadata = {});

// Whether `dir` holds either form of `base`.
bool tensor_collection_exists(const std::filesystem::path& dir, const std::string& base);

class TensorCollection {
 public:
  // Opens <base>.safetensors or, where it is absent, the index and every
  // shard it names. Throws sdp::Error naming the file: neither form present
  // (or both), an index that is not the format above, a shard it names that
  // is missing, a tensor in two shards, a tensor the index places in a shard
  // that lacks it.
  TensorCollection(const std::filesystem::path& dir, const std::string& base);

  // What was opened: the single file or the index.
  const std::filesystem::path& path() const { return path_; }
  size_t file_count() const { return files_.size(); }
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  SafetensorsTensorInfo info(const std::string& name) const;
  // As SafetensorsFile::read_into; a name in no file is an error naming path().
  void read_into(const std::string& name, const Tensor& dst) const;

 private:
  const SafetensorsFile& file_of(const std::string& name) const;

  std::filesystem::path path_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace sdp::checkpoint
