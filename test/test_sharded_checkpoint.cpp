// The sharded checkpoint form (engine/train/sharded_checkpoint.h) in one
// process: k parameter sets stand for the k ranks of a job (a sharded group
// over all of them, an unsharded one written by its root, a buffer), their
// chunks and index load into an unsharded set, a differently sharded one
// and another dtype with exactly the values written; bad directories fail
// naming the file and what is wrong; and a Trainer saving the sharded form
// resumes bit-identically, evaluates as the hf form does, and sdp-export's
// output equals the hf form tensor by tensor.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "engine/checkpoint/json_file.h"
#include "engine/checkpoint/tensor_collection.h"
#include "engine/train/checkpoint_dir.h"
#include "engine/train/sharded_checkpoint.h"
#include "engine/train/sharded_export.h"
#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "models/common/parameter_pieces.h"
#include "test/test_temp_dir.h"
#include "test/train_config_util.h"

using namespace sdp;
namespace fs = std::filesystem;
using Part = TrainingState::Part;

namespace {

// Group 0 "block" (sharded in the job): w [2, 5], gain [7], rows [2, 5) of
// m [5, 2]. Group 1 "other" (unsharded): solo [4], rows [0, 2) of m, and a
// buffer stat [3]. 10 + 7 + 6 = 23 elements in group 0, 4 + 4 in group 1.
void declare(ParameterSet& p, const Shape& w_shape = {2, 5}) {
  const int g = p.add_group("block");
  const int o = p.add_group("other");
  p.declare("w", w_shape, g, InitKind::normal);
  p.declare("gain", {7}, g, InitKind::ones);
  p.declare_piece("m", {5, 2}, 0, 2, 3, "hi", g, InitKind::normal);
  p.declare("solo", {4}, o, InitKind::normal);
  p.declare_piece("m", {5, 2}, 0, 0, 2, "lo", o, InitKind::normal);
  p.declare_buffer("stat", {3}, o, InitKind::ones);
}

// The value of element e of full tensor `name`'s part: distinct everywhere,
// exact in f32 too.
double expected(const std::string& name, ChunkPart part, int64_t e) {
  double base = 0;
  for (char ch : name) base += ch;
  return base + 1000.0 * static_cast<int>(part) + static_cast<double>(e) * 0.25;
}

// The full tensor `name` of shape `shape` filled with expected() ([shape], f64, host).
OwnedTensor full_of(Allocator& a, const std::string& name, const Shape& shape, ChunkPart part) {
  OwnedTensor t(a, shape, DType::f64, MemCategory::workspace);
  for (int64_t e = 0; e < shape.numel(); ++e) t->data<double>()[e] = expected(name, part, e);
  return t;
}

// Fills what `p` holds (values, moments of trained parameters, buffers) from expected().
void fill(TrainingState& state) {
  const ParameterSet& p = state.params();
  CpuAllocator a;
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const ParamDecl& d = p.decl(id);
    auto put = [&](ChunkPart part, Part into) {
      const OwnedTensor full = full_of(a, d.full_name, d.full_shape, part);
      OwnedTensor piece(a, d.shape, DType::f64, MemCategory::workspace);
      copy_full_to_part(d, *full, *piece);
      state.assign(id, into, *piece);
    };
    put(d.buffer ? ChunkPart::buffer : ChunkPart::values, Part::values);
    if (d.buffer || !p.is_trained(id)) continue;
    put(ChunkPart::exp_avg, Part::adam_m);
    put(ChunkPart::exp_avg_sq, Part::adam_v);
  }
}

// Every element `p` stores (values, moments, buffers) as expected() says;
// elements of shards checked through shard_slice. Returns the count compared.
int64_t check_holds_expected(const TrainingState& state) {
  const ParameterSet& p = state.params();
  int64_t compared = 0, wrong = 0;
  CpuAllocator a;
  for (int id = 0; id < p.count(); ++id) {
    if (!p.is_materialized(id)) continue;
    const ParamDecl& d = p.decl(id);
    auto compare = [&](ChunkPart part, const Tensor& stored, int64_t param_begin) {
      const OwnedTensor full = full_of(a, d.full_name, d.full_shape, part);
      OwnedTensor piece(a, d.shape, DType::f64, MemCategory::workspace);
      copy_full_to_part(d, *full, *piece);
      for (int64_t i = 0; i < stored.numel(); ++i, ++compared)
        wrong += ops::item(stored, i) != piece->data<double>()[param_begin + i];
    };
    const int g = d.group;
    if (d.buffer) {
      compare(ChunkPart::buffer, p.param(id), 0);
      continue;
    }
    if (!state.group_shard(g).sharded()) {
      compare(ChunkPart::values, state.values(id).view({d.shape.numel()}), 0);
      if (p.is_trained(id)) {
        compare(ChunkPart::exp_avg, state.adam_m(id).view({d.shape.numel()}), 0);
        compare(ChunkPart::exp_avg_sq, state.adam_v(id).view({d.shape.numel()}), 0);
      }
      continue;
    }
    const TrainingState::ShardSlice sl = state.shard_slice(id);
    if (sl.length == 0) continue;
    auto cut = [&](const Tensor& shard) { return shard.narrow(0, sl.shard_begin, sl.length); };
    compare(ChunkPart::values, cut(state.shard_values(g)), sl.param_begin);
    compare(ChunkPart::exp_avg, cut(state.shard_adam_m(g)), sl.param_begin);
    compare(ChunkPart::exp_avg_sq, cut(state.shard_adam_v(g)), sl.param_begin);
  }
  CHECK(wrong == 0);
  return compared;
}

// A 3-"rank" job: group 0 sharded over ranks 0..2 at `level`, group 1 held
// and trained by ranks 1 and 2 (root 1). Writes its sharded checkpoint
// into `dir` the way save_sharded_checkpoint does, minus the communication.
void write_job(const fs::path& dir, ShardLevel level) {
  constexpr int kRanks = 3;
  std::vector<nlohmann::json> chunks_by_rank;
  ParameterSet decls;
  declare(decls);
  for (int r = 0; r < kRanks; ++r) {
    CpuAllocator a;
    ParameterSet p;
    declare(p);
    const std::vector<bool> held = {true, r != 0};
    const auto state = TrainingState::materialize(p, a, DType::f64, held, held,
                                                  {GroupShard{level, kRanks, r}, GroupShard{}});
    state->allocate_adam_state();
    fill(*state);
    ChunkSelection sel;
    sel.root = {false, r == 1};
    std::vector<OwnedTensor> keep_alive;
    const std::string file = rank_file_name(r, kRanks);
    chunks_by_rank.push_back(
        write_rank_file(dir, file, rank_chunks(*state, sel, file, a, keep_alive)));
  }
  ShardIndexHeader header;
  header.world_size = kRanks;
  header.architecture = {{"test", "sets"}};
  header.dtype = DType::f64;
  checkpoint::write_json_atomically(dir / kShardIndexFileName,
                                    make_shard_index(header, decls, chunks_by_rank));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// Loads `dir` into a fresh whole f64 set (everything held and trained).
void load_whole(const fs::path& dir, const Shape& w_shape = {2, 5}) {
  CpuAllocator a;
  ParameterSet p;
  declare(p, w_shape);
  const auto state = TrainingState::materialize(p, a, DType::f64);
  state->allocate_adam_state();
  read_sharded_parameter_set(*state, ShardedCheckpoint(dir), true);
}

}  // namespace

TEST_CASE("sharded checkpoint chunks of k ranks load into any cut of the parameters",
          "[checkpoint][sharded]") {
  for (ShardLevel level : {ShardLevel::optimizer, ShardLevel::full}) {
    CAPTURE(shard_level_name(level));
    const sdp::testing::TempDir temp;
    write_job(temp.path(), level);
    const ShardedCheckpoint ck(temp.path());
    CHECK(ck.world_size() == 3);
    REQUIRE(ck.tensors().size() == 5);  // w, gain, m, solo, stat: m once, in first order
    CHECK(ck.tensors()[2].name == "m");
    CHECK(ck.tensors()[2].shape == Shape{5, 2});
    CHECK(ck.tensors()[4].buffer);
    // Rank 0 wrote only its shard of group 0: no whole "solo", no buffer.
    const checkpoint::SafetensorsFile rank0(temp / rank_file_name(0, 3));
    CHECK(!rank0.contains("solo"));
    CHECK(!rank0.contains("stat"));
    CHECK(rank0.contains("exp_avg.w"));

    {  // one process, nothing sharded
      CpuAllocator a;
      ParameterSet p;
      declare(p);
      const auto state = TrainingState::materialize(p, a, DType::f64);
      state->allocate_adam_state();
      read_sharded_parameter_set(*state, ck, true);
      CHECK(check_holds_expected(*state) == 3 * (23 + 8) + 3);
    }
    // Two ranks, sharded at another level and count: each holds its half.
    int64_t compared = 0;
    for (int r = 0; r < 2; ++r) {
      CpuAllocator a;
      ParameterSet p;
      declare(p);
      const auto state = TrainingState::materialize(
          p, a, DType::f64, {}, {}, {GroupShard{ShardLevel::full, 2, r}, GroupShard{}});
      state->allocate_adam_state();
      read_sharded_parameter_set(*state, ck, true);
      compared += check_holds_expected(*state);
    }
    CHECK(compared == 3 * 23 + 2 * (3 * 8 + 3));
    // Another dtype: f64 chunks converted into an f32 set (the values are exact in f32).
    CpuAllocator a;
    ParameterSet p32;
    declare(p32);
    const auto state32 = TrainingState::materialize(p32, a, DType::f32);
    state32->allocate_adam_state();
    read_sharded_parameter_set(*state32, ck, true);
    CHECK(check_holds_expected(*state32) == 3 * (23 + 8) + 3);
  }
}

TEST_CASE("bad sharded checkpoints fail naming the file and what is wrong",
          "[checkpoint][sharded][errors]") {
  const sdp::testing::TempDir temp;
  const fs::path dir = temp.path();
  write_job(dir, ShardLevel::optimizer);
  const fs::path index_file = dir / kShardIndexFileName;
  const nlohmann::json index = checkpoint::read_json_file(index_file);
  REQUIRE(error_of([&] { load_whole(dir); }) == "(no error)");
  auto with_index = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = index;
    edit(j);
    checkpoint::write_json_atomically(index_file, j);
    return error_of([&] { load_whole(dir); });
  };

  // Another version of the index.
  CHECK_THAT(with_index([](nlohmann::json& j) { j["format_version"] = 2; }),
             Catch::Contains(index_file.string()) &&
                 Catch::Contains("format_version = 2 (this build reads version 1)"));
  // A chunk missing: its tensor's elements are not all covered.
  CHECK_THAT(with_index([](nlohmann::json& j) {
               auto& chunks = j["chunks"];
               for (auto it = chunks.begin(); it != chunks.end(); ++it)
                 if ((*it)["full_name"] == "w" && (*it)["part"] == "exp_avg" &&
                     (*it)["begin"] != 0) {
                   chunks.erase(it);
                   break;
                 }
             }),
             Catch::Contains(index_file.string()) && Catch::Contains("the exp_avg of 'w' [2, 5]") &&
                 Catch::Contains("no chunk covers elements ["));
  // The same chunk twice.
  CHECK_THAT(with_index([](nlohmann::json& j) { j["chunks"].push_back(j["chunks"][0]); }),
             Catch::Contains("chunks overlap on"));
  // A chunk of a tensor the index does not list.
  CHECK_THAT(with_index([](nlohmann::json& j) { j["chunks"][0]["full_name"] = "ghost"; }),
             Catch::Contains("names tensor 'ghost', which the index does not list"));
  // An index that is not JSON, or none at all.
  {
    std::ofstream(index_file) << "{\"format\": \"sdp-sharded\", ";
  }
  CHECK_THAT(error_of([&] { load_whole(dir); }), Catch::Contains(index_file.string()));
  fs::remove(index_file);
  CHECK_THAT(error_of([&] { load_whole(dir); }),
             Catch::Contains(index_file.string()) && Catch::Contains("is missing"));

  // A model whose tensor has another shape, and one the checkpoint lacks.
  checkpoint::write_json_atomically(index_file, index);
  CHECK_THAT(error_of([&] { load_whole(dir, {5, 2}); }),
             Catch::Contains("tensor 'w' is [2, 5] there, but this model's is [5, 2]"));
  CHECK_THAT(error_of([&] {
               CpuAllocator a;
               ParameterSet p;
               declare(p);
               p.declare("extra", {3}, 1, InitKind::zeros);
               const auto state = TrainingState::materialize(p, a, DType::f64);
               read_sharded_parameter_set(*state, ShardedCheckpoint(dir), false);
             }),
             Catch::Contains(dir.string()) && Catch::Contains("has no tensor 'extra'"));

  // A rank file missing, or lacking a tensor the index places there.
  const fs::path rank1 = dir / rank_file_name(1, 3);
  fs::rename(rank1, dir / "moved");
  CHECK_THAT(error_of([&] { load_whole(dir); }),
             Catch::Contains("names rank file '" + rank1.string() + "', which is missing"));
  fs::rename(dir / "moved", rank1);
  CHECK_THAT(with_index([](nlohmann::json& j) {
               for (auto& c : j["chunks"])
                 if (c["file"] == "rank-00001-of-00003.safetensors" && c["tensor"] == "solo")
                   c["tensor"] = "solo.renamed";
             }),
             Catch::Contains(rank1.string()) && Catch::Contains("lacks tensor 'solo.renamed'"));
}

namespace {

// Every tensor of two collections: the same names, dtypes, shapes and bytes.
void check_same_tensors(const checkpoint::TensorCollection& a,
                        const checkpoint::TensorCollection& b) {
  REQUIRE(a.names() == b.names());
  CpuAllocator scratch;
  for (const std::string& name : a.names()) {
    CAPTURE(name);
    const auto ia = a.info(name), ib = b.info(name);
    REQUIRE(ia.dtype == ib.dtype);
    REQUIRE(ia.shape == ib.shape);
    OwnedTensor ta(scratch, ia.shape, ia.dtype, MemCategory::workspace);
    OwnedTensor tb(scratch, ib.shape, ib.dtype, MemCategory::workspace);
    a.read_into(name, *ta);
    b.read_into(name, *tb);
    CHECK(std::memcmp(ta->raw(), tb->raw(), ia.nbytes) == 0);
  }
}

}  // namespace

TEST_CASE("a trainer's sharded checkpoint resumes, evaluates and exports as the hf form",
          "[trainer][checkpoint][sharded]") {
  const sdp::testing::TempDir temp;
  for (const char* model : {"tiny", "resnet-tiny", "swin-micro"}) {
    CAPTURE(model);
    TrainConfig c = sdp::testing::tiny_train_config(2, 16, 4, 1);
    if (std::string(model) == "resnet-tiny") {
      c.model = model;
      c.data = "synthetic-images:height=8,width=8,classes=5";
      c.batch = 4;
    }
    if (std::string(model) == "swin-micro") {
      c.model = model;
      c.data = "synthetic-images:height=16,width=16,classes=5";
      c.batch = 4;
      c.drop_path = 0.2;  // the resumed steps draw the same samples
    }
    c.eval_batches = 2;
    const fs::path hf = temp / (std::string(model) + "-hf");
    const fs::path sharded = temp / (std::string(model) + "-sharded");
    const fs::path exported = temp / (std::string(model) + "-exported");
    double next_loss = 0;
    {
      Trainer t(c);
      t.train_step();
      t.train_step();
      t.save_checkpoint(hf);
      TrainConfig cs = c;
      cs.checkpoint_format = "sharded";
      Trainer ts(cs);
      ts.load_checkpoint(hf);
      ts.save_checkpoint(sharded);
      next_loss = t.train_step().loss;
    }
    REQUIRE(is_sharded_checkpoint(sharded));
    CHECK(!checkpoint::tensor_collection_exists(sharded, "model"));
    CHECK(fs::exists(sharded / "config.json"));
    CHECK(checkpoint::read_json_file(sharded / "config.json") ==
          checkpoint::read_json_file(hf / "config.json"));

    Trainer from_hf(c), from_sharded(c);
    from_hf.load_checkpoint(hf);
    from_sharded.load_checkpoint(sharded);
    CHECK(from_sharded.step() == 2);
    CHECK(from_sharded.evaluate() == from_hf.evaluate());
    CHECK(from_sharded.train_step().loss == next_loss);

    export_sharded_checkpoint(sharded, exported, checkpoint::kDefaultMaxShardBytes);
    check_same_tensors(checkpoint::TensorCollection(exported, "model"),
                       checkpoint::TensorCollection(hf, "model"));
    check_same_tensors(checkpoint::TensorCollection(exported, "optimizer"),
                       checkpoint::TensorCollection(hf, "optimizer"));
    for (const char* file : {"config.json", "generation_config.json"})
      CHECK(fs::exists(hf / file) == fs::exists(exported / file));
    Trainer from_export(c);
    from_export.load_checkpoint(exported);
    CHECK(from_export.train_step().loss == next_loss);
  }
}

TEST_CASE("checkpoint_format names its valid values", "[checkpoint][sharded][config]") {
  TrainConfig c = sdp::testing::tiny_train_config();
  c.checkpoint_format = "sharded";
  REQUIRE_NOTHROW(c.validate());
  CHECK(TrainConfig::from_json(c.to_json()).checkpoint_format == "sharded");
  c.checkpoint_format = "zip";
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("checkpoint_format") &&
                                        Catch::Contains("'zip' is invalid (valid: hf, sharded)"));
}
