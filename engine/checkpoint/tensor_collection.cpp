#include "engine/checkpoint/tensor_collection.h"

#include <algorithm>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/json_file.h"
#include "engine/core/error.h"

namespace sdp::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string single_name(const std::string& base) { return base + ".safetensors"; }
std::string index_name(const std::string& base) { return base + ".safetensors.index.json"; }

std::string shard_name(const std::string& base, size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu.safetensors", k, n);
  return base + buf;
}

bool is_shard_name(const std::string& base, const std::string& file) {
  static const std::regex digits("-[0-9]{5,}-of-[0-9]{5,}\\.safetensors");
  return file.size() > base.size() && file.compare(0, base.size(), base) == 0 &&
         std::regex_match(file.substr(base.size()), digits);
}

uint64_t nbytes(const Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
}

}  // namespace

std::vector<std::string> save_tensor_collection(const fs::path& dir, const std::string& base,
                                                std::span<const NamedTensor> tensors,
                                                uint64_t max_shard_bytes,
                                                const std::map<std::string, std::string>& metadata) {
  SDP_CHECK(max_shard_bytes > 0, "save_tensor_collection: max_shard_bytes must be positive");
  // Greedy packing in order; a tensor is never split.
  std::vector<std::vector<NamedTensor>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const NamedTensor& t : tensors) {
    const uint64_t size = nbytes(t.tensor);
    if (!shards.back().empty() && in_shard + size > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += size;
    total += size;
  }
  fs::create_directories(dir);
  std::vector<std::string> written;
  if (shards.size() == 1) {
    written.push_back(single_name(base));
  } else {
    for (size_t k = 0; k < shards.size(); ++k)
      written.push_back(shard_name(base, k + 1, shards.size()));
    written.push_back(index_name(base));
  }
  // Whatever an earlier write left under this base and this one does not
  // rewrite goes first: a directory never holds both forms.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    const bool ours = file == single_name(base) || file == index_name(base) ||
                      is_shard_name(base, file);
    if (ours && std::find(written.begin(), written.end(), file) == written.end())
      fs::remove(entry.path(), ec);
  }
  if (shards.size() == 1) {
    save_safetensors(dir / written.front(), shards.front(), metadata);
    return written;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    save_safetensors(dir / written[k], shards[k], metadata);
    for (const NamedTensor& t : shards[k]) weight_map[t.name] = written[k];
  }
  write_json_atomically(dir / index_name(base),
                        {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  return written;
}

bool tensor_collection_exists(const fs::path& dir, const std::string& base) {
  return fs::exists(dir / single_name(base)) || fs::exists(dir / index_name(base));
}

TensorCollection::TensorCollection(const fs::path& dir, const std::string& base) {
  const fs::path single = dir / single_name(base);
  const fs::path index = dir / index_name(base);
  const bool has_single = fs::exists(single), has_index = fs::exists(index);
  if (has_single && has_index)
    fail("checkpoint ", dir.string(), " holds both ", single.filename().string(), " and ",
         index.filename().string(), "; which one is meant is ambiguous (keep one)");
  if (!has_single && !has_index)
    fail("checkpoint ", dir.string(), " has neither ", single.filename().string(), " nor ",
         index.filename().string());
  if (has_single) {
    path_ = single;
    files_.emplace_back(single);
    for (const std::string& name : files_.front().names()) where_[name] = 0;
    return;
  }
  path_ = index;
  const nlohmann::json j = read_json_file(index);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index.string(), ": expected an object with a \"weight_map\" object {tensor: shard file}");
  // Each shard opened once, in the order the index first names it.
  std::map<std::string, size_t> shard_of_file;
  std::map<std::string, std::string> listed;  // tensor -> shard file, as the index says
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string() || it.value().get<std::string>().empty() ||
        fs::path(it.value().get<std::string>()).has_parent_path())
      fail(index.string(), ": tensor '", it.key(), "' maps to ", it.value().dump(),
           "; valid: the name of a shard file in the same directory");
    const std::string file = it.value().get<std::string>();
    listed[it.key()] = file;
    if (shard_of_file.count(file)) continue;
    if (!fs::exists(dir / file))
      fail(index.string(), " names shard ", file, " (for tensor '", it.key(),
           "'), which does not exist in ", dir.string());
    shard_of_file[file] = files_.size();
    files_.emplace_back(dir / file);
  }
  for (size_t k = 0; k < files_.size(); ++k)
    for (const std::string& name : files_[k].names()) {
      const auto [at, inserted] = where_.emplace(name, k);
      if (!inserted)
        fail(index.string(), ": tensor '", name, "' is in two shards, ",
             files_[at->second].path().filename().string(), " and ",
             files_[k].path().filename().string());
    }
  for (const auto& [name, file] : listed) {
    const auto at = where_.find(name);
    if (at == where_.end() || files_[at->second].path().filename() != file)
      fail(index.string(), " places tensor '", name, "' in ", file, ", which does not hold it");
  }
}

std::vector<std::string> TensorCollection::names() const {
  std::vector<std::string> out;
  for (const auto& [name, k] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& TensorCollection::file_of(const std::string& name) const {
  const auto at = where_.find(name);
  if (at == where_.end()) fail(path_.string(), ": no tensor named '", name, "'");
  return files_[at->second];
}

SafetensorsTensorInfo TensorCollection::info(const std::string& name) const {
  return file_of(name).info(name);
}

void TensorCollection::read_into(const std::string& name, const Tensor& dst) const {
  file_of(name).read_into(name, dst);
}

}  // namespace sdp::checkpoint
