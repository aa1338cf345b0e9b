// Sharded checkpoints (transformers' form): byte sizes as --max-shard-size
// reads them, greedy packing with an index, reading either form the same,
// clear errors for a broken index, and a trainer checkpoint split into
// shards that reloads the same values and resumes bit-identically.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/byte_size.h"
#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/core/error.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/trainer.h"
#include "test/test_checkpoint_support.h"
#include "test/test_support.h"
#include "test/train_config_util.h"

using namespace sdp;
using namespace sdp::checkpoint;
using sdp::testing::Arena;
using sdp::testing::list_dir;
using sdp::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// f32 tensors of the given element counts, values 1000 * k + i.
std::vector<NamedTensor> make_tensors(Arena& arena, const std::vector<int64_t>& sizes) {
  std::vector<NamedTensor> out;
  for (size_t k = 0; k < sizes.size(); ++k) {
    Tensor t = arena.make({sizes[k]}, DType::f32);
    for (int64_t i = 0; i < sizes[k]; ++i) t.data<float>()[i] = static_cast<float>(1000 * k + i);
    std::string name = "t";
    name += std::to_string(k);
    out.push_back({name, t});
  }
  return out;
}

void require_same_values(const TensorCollection& c, const std::vector<NamedTensor>& tensors) {
  Arena arena;
  REQUIRE(c.names().size() == tensors.size());
  for (const NamedTensor& t : tensors) {
    Tensor back = arena.make(t.tensor.shape(), t.tensor.dtype());
    c.read_into(t.name, back);
    REQUIRE(std::memcmp(back.raw(), t.tensor.raw(), t.tensor.bytes()) == 0);
  }
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

TrainConfig small_run() { return testing::tiny_train_config(4, 32, 6, 2); }

}  // namespace

TEST_CASE("byte sizes: decimal and binary units, plain bytes, clear errors", "[checkpoint][shards]") {
  REQUIRE(parse_byte_size("5GB", "x") == 5'000'000'000ull);
  REQUIRE(parse_byte_size("500MB", "x") == 500'000'000ull);
  REQUIRE(parse_byte_size("2GiB", "x") == 2ull << 30);
  REQUIRE(parse_byte_size("3kib", "x") == 3072);
  REQUIRE(parse_byte_size("1048576", "x") == 1048576);
  REQUIRE(parse_byte_size("7B", "x") == 7);
  for (const char* bad : {"", "GB", "0", "-1", "1.5GB", "5 GB", "5XB", "99999999999TB"})
    REQUIRE_THROWS_WITH(parse_byte_size(bad, "--max-shard-size"),
                        Catch::Contains("--max-shard-size = '" + std::string(bad) + "'") &&
                            Catch::Contains("GiB") && Catch::Contains("1048576"));
  TrainConfig c;
  c.max_shard_size = "lots";
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("max_shard_size = 'lots'"));
}

TEST_CASE("tensor collections: greedy shards with an index, or one file", "[checkpoint][shards]") {
  TempDir dir;
  Arena arena;
  // 40, 40, 40, 100 and 8 bytes with 100-byte shards: [t0 t1] [t2] [t3] [t4].
  const auto tensors = make_tensors(arena, {10, 10, 10, 25, 2});
  const auto written = save_tensor_collection(dir.path(), "model", tensors, 100, {{"format", "pt"}});
  const std::vector<std::string> shards = {
      "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
      "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"};
  std::vector<std::string> expected = shards;
  expected.push_back("model.safetensors.index.json");
  REQUIRE(written == expected);
  REQUIRE(list_dir(dir.path()) == std::set<std::string>(expected.begin(), expected.end()));
  const nlohmann::json index = read_json_file(dir / "model.safetensors.index.json");
  REQUIRE(index.at("metadata").at("total_size") == 228);
  REQUIRE(index.at("weight_map") == nlohmann::json{{"t0", shards[0]}, {"t1", shards[0]},
                                                   {"t2", shards[1]}, {"t3", shards[2]},
                                                   {"t4", shards[3]}});
  REQUIRE(SafetensorsFile(dir / shards[0]).metadata().at("format") == "pt");
  const TensorCollection sharded(dir.path(), "model");
  REQUIRE(sharded.file_count() == 4);
  REQUIRE(sharded.path() == dir / "model.safetensors.index.json");
  require_same_values(sharded, tensors);

  // Rewritten under a larger limit: one file, and the shards are gone.
  REQUIRE(save_tensor_collection(dir.path(), "model", tensors, 228) ==
          std::vector<std::string>{"model.safetensors"});
  REQUIRE(list_dir(dir.path()) == std::set<std::string>{"model.safetensors"});
  const TensorCollection single(dir.path(), "model");
  REQUIRE(single.file_count() == 1);
  require_same_values(single, tensors);

  // A tensor larger than the limit gets a shard of its own.
  save_tensor_collection(dir.path(), "big", make_tensors(arena, {100, 1}), 16);
  REQUIRE(read_json_file(dir / "big.safetensors.index.json").at("weight_map").size() == 2);
  REQUIRE(fs::exists(dir / "big-00002-of-00002.safetensors"));
}

TEST_CASE("tensor collections: a broken index is an error naming the file", "[checkpoint][shards]") {
  TempDir dir;
  Arena arena;
  const auto tensors = make_tensors(arena, {10, 10, 10});
  save_tensor_collection(dir.path(), "model", tensors, 40);
  const fs::path index = dir / "model.safetensors.index.json";
  SECTION("a shard the index names is missing") {
    fs::remove(dir / "model-00002-of-00003.safetensors");
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "model"),
                        Catch::Contains(index.string()) &&
                            Catch::Contains("model-00002-of-00003.safetensors") &&
                            Catch::Contains("does not exist"));
  }
  SECTION("a tensor in two shards") {
    const std::vector<NamedTensor> both = {tensors[0], tensors[1]};
    save_safetensors(dir / "model-00002-of-00003.safetensors", both);
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "model"),
                        Catch::Contains(index.string()) && Catch::Contains("'t0'") &&
                            Catch::Contains("two shards") &&
                            Catch::Contains("model-00001-of-00003.safetensors") &&
                            Catch::Contains("model-00002-of-00003.safetensors"));
  }
  SECTION("the index places a tensor in a shard without it") {
    nlohmann::json j = read_json_file(index);
    j["weight_map"]["t0"] = "model-00003-of-00003.safetensors";
    write_json_atomically(index, j);
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "model"),
                        Catch::Contains("'t0'") && Catch::Contains("does not hold it"));
  }
  SECTION("no weight_map") {
    write_text(index, "{\"metadata\": {}}");
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "model"),
                        Catch::Contains(index.string()) && Catch::Contains("weight_map"));
  }
  SECTION("both forms present") {
    save_safetensors(dir / "model.safetensors", tensors);
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "model"), Catch::Contains("ambiguous"));
  }
  SECTION("neither form present") {
    REQUIRE_THROWS_WITH(TensorCollection(dir.path(), "optimizer"),
                        Catch::Contains("neither optimizer.safetensors nor "
                                        "optimizer.safetensors.index.json"));
  }
}

TEST_CASE("a sharded trainer checkpoint reloads the same values and resumes bit-identically",
          "[checkpoint][shards][trainer]") {
  const TempDir temp;
  const fs::path save_dir = temp / "run";
  TrainConfig c = small_run();
  c.max_shard_size = "100KB";  // tiny: a 64 KiB embedding, 0.46 MB of weights in all
  std::vector<double> straight;
  {
    Trainer t(c);
    for (int i = 0; i < 6; ++i) straight.push_back(t.train_step().loss);
  }
  std::vector<double> resumed;
  std::vector<float> saved_values;
  {
    Trainer t(c);
    for (int i = 0; i < 3; ++i) resumed.push_back(t.train_step().loss);
    save_and_mark_latest(t, save_dir);
    const Tensor v = t.training_state().values(0);
    saved_values.assign(v.data<float>(), v.data<float>() + v.numel());
  }
  const fs::path dir = resolve_checkpoint(save_dir);
  REQUIRE_FALSE(fs::exists(dir / "model.safetensors"));
  REQUIRE_FALSE(fs::exists(dir / "optimizer.safetensors"));
  const TensorCollection model(dir, "model"), optimizer(dir, "optimizer");
  REQUIRE(model.file_count() >= 4);
  REQUIRE(optimizer.file_count() >= 8);  // twice the bytes of the weights
  for (const auto* index : {"model.safetensors.index.json", "optimizer.safetensors.index.json"}) {
    uint64_t total = 0;
    const nlohmann::json j = read_json_file(dir / index);
    const TensorCollection& c2 = std::string(index).rfind("model", 0) == 0 ? model : optimizer;
    for (const std::string& name : c2.names()) total += c2.info(name).nbytes;
    REQUIRE(j.at("metadata").at("total_size") == total);
    REQUIRE(j.at("weight_map").size() == c2.names().size());
  }
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors")
      REQUIRE((fs::file_size(e.path()) <= 100'000 ||
               SafetensorsFile(e.path()).names().size() == 1));
  {
    Trainer t(c);
    t.load_checkpoint(dir);
    REQUIRE(t.step() == 3);
    const Tensor v = t.training_state().values(0);
    REQUIRE(std::vector<float>(v.data<float>(), v.data<float>() + v.numel()) == saved_values);
    for (int i = 0; i < 3; ++i) resumed.push_back(t.train_step().loss);
  }
  REQUIRE(resumed == straight);
}
