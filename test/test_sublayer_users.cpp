// Which shared parameters are averaged over the ranks that run their
// sublayer (SubnetLayout::sublayer_users), for every model family at neuron
// granularity: the norms in front of a block's head and FFN groups (LLaMA,
// Swin) and a ResNet block's bn2 after its channel groups; never the
// parameters every rank reads (Swin's output biases, the embedding, the
// head). The averaging itself is held to an f64 reference on a real job in
// test/mpi/test_user_averaging.cpp.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/json_file.h"
#include "engine/parallel/strategy.h"
#include "test/test_temp_dir.h"

using namespace sdp;
using sdp::testing::TempDir;

namespace {

ParallelSettings neuron_settings(const std::string& strategy, const std::string& plan) {
  ParallelSettings p;
  p.strategy = strategy;
  p.active_fraction = 0.5;
  p.plan = plan;
  return p;
}

// A plan file over two ranks (or replicas) for `model`: the first owns
// every neuron component, the second all but those of the blocks listed,
// so it runs no sublayer of them.
std::string plan_without_blocks_on_rank1(const TempDir& dir, const std::string& model,
                                         const std::vector<int>& blocks) {
  const ParallelSettings cyclic = neuron_settings("n-sdp", "cyclic");
  const SubnetLayout L =
      SubnetLayout::build(model, StrategySpec::from_settings(cyclic, model), 2, 0);
  std::string rank0, rank1;
  for (const std::string& name : L.component_names) {
    bool skipped = false;
    for (int b : blocks) skipped |= name.rfind("block." + std::to_string(b) + ".", 0) == 0;
    rank0 += '1';
    rank1 += skipped ? '0' : '1';
  }
  const std::string path = dir.file(model + "_plan.json");
  checkpoint::write_json_atomically(path, {{"matrix", {rank0, rank1}}});
  return path;
}

// Each listed parameter's name with its users.
std::map<std::string, std::vector<int>> averaged_over_users(const SubnetLayout& L) {
  std::map<std::string, std::vector<int>> out;
  for (const SublayerUsers& u : L.sublayer_users) out[u.name] = u.users;
  return out;
}

}  // namespace

TEST_CASE("sublayer parameters: each family's norms of a skipped sublayer, over its users",
          "[parallel][plan]") {
  TempDir dir;
  struct Case {
    const char* model;
    std::set<std::string> want;  // block 1's sublayer parameters
  };
  const Case cases[] = {
      {"mini",
       {"model.layers.1.input_layernorm.weight", "model.layers.1.post_attention_layernorm.weight"}},
      {"resnet-tiny", {"layer1.1.bn2.weight", "layer1.1.bn2.bias"}},
      {"swin-micro",
       {"layers.0.blocks.1.norm1.weight", "layers.0.blocks.1.norm1.bias",
        "layers.0.blocks.1.norm2.weight", "layers.0.blocks.1.norm2.bias"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.model);
    const std::string plan = "file:" + plan_without_blocks_on_rank1(dir, c.model, {1});
    std::map<std::string, std::vector<int>> want;
    for (const std::string& name : c.want) want[name] = {0};
    for (int rank : {0, 1}) {
      // Forward masking: rank 1 skips block 1's sublayers.
      const SubnetLayout fwd = SubnetLayout::build(
          c.model, StrategySpec::from_settings(neuron_settings("n-sdp", plan), c.model), 2, rank);
      CHECK(averaged_over_users(fwd) == want);
      // Backward masking: every rank runs every sublayer.
      const SubnetLayout bwd = SubnetLayout::build(
          c.model, StrategySpec::from_settings(neuron_settings("nb-sdp", plan), c.model), 2, rank);
      CHECK(bwd.sublayer_users.empty());
    }
    // A plan that gives every rank every component: every rank a user.
    ParallelSettings all = neuron_settings("n-sdp", "cyclic");
    all.active_fraction = 1.0;
    CHECK(SubnetLayout::build(c.model, StrategySpec::from_settings(all, c.model), 2, 0)
              .sublayer_users.empty());
  }
}

TEST_CASE("sublayer parameters in a pipeline: users among the replicas of their stage",
          "[parallel][plan][pipeline]") {
  // mini on 2 stages x 2 replicas (blocks 0-1, 2-3): replica 1 holds no
  // group of blocks 1 and 3, so their norms are averaged over replica 0 of
  // their stage alone, a world rank of stage 0 and one of stage 1.
  TempDir dir;
  const std::string plan = "file:" + plan_without_blocks_on_rank1(dir, "mini", {1, 3});
  const std::vector<StageSpan> spans{{0, 2}, {2, 4}};
  const StrategySpec spec = StrategySpec::from_settings(neuron_settings("n-sdp", plan), "mini");
  const SubnetLayout L = SubnetLayout::build("mini", spec, 4, 0, {}, spans);
  const int first = L.mesh.rank_at(0, 0), second = L.mesh.rank_at(1, 0);
  const std::map<std::string, std::vector<int>> want{
      {"model.layers.1.input_layernorm.weight", {first}},
      {"model.layers.1.post_attention_layernorm.weight", {first}},
      {"model.layers.3.input_layernorm.weight", {second}},
      {"model.layers.3.post_attention_layernorm.weight", {second}}};
  CHECK(averaged_over_users(L) == want);
}
