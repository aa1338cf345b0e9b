// Sharded training state (TrainingState, engine/optim/shard_level.h): the
// sizes and categories of every level, shards that tile the whole values
// exactly, and AdamW on shards equal to AdamW on the whole group, with k
// parameter sets standing for the k ranks of one owner set.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "engine/optim/adamw.h"
#include "engine/optim/training_state.h"
#include "kernels/ops.h"
#include "models/common/parameter_set.h"

using namespace sdp;

namespace {

// One group of 10 + 7 + 6 = 23 elements: a matrix (decayed), a vector, a
// piece of a matrix; a second, unsharded group.
void declare(ParameterSet& p) {
  const int g = p.add_group("block");
  p.add_group("other");
  p.declare("w", {2, 5}, g, InitKind::normal, 0.5);
  p.declare("gain", {7}, g, InitKind::ones);
  p.declare_piece("m", {5, 2}, 0, 2, 3, "rows", g, InitKind::normal, 0.3);
  p.declare("solo", {4}, 1, InitKind::normal, 0.1);
}

std::vector<GroupShard> plan(ShardLevel level, int parts, int index) {
  return {GroupShard{level, parts, index}, GroupShard{}};
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = ops::item(t, i);
  return out;
}

// Element e of an f64 host tensor.
void set_value(const Tensor& t, int64_t e, double v) { t.data<double>()[e] = v; }

// A gradient value for element i of the group, the same for every layout.
double grad_at(int64_t i) { return 0.01 * static_cast<double>((i * 7919) % 23) - 0.1; }

}  // namespace

TEST_CASE("a sharded group is padded to equal shards and keeps only its shard per level",
          "[params][shard]") {
  for (ShardLevel level : {ShardLevel::optimizer, ShardLevel::grad, ShardLevel::full}) {
    CAPTURE(shard_level_name(level));
    MetaAllocator alloc(4);  // 4-byte granularity: byte counts are element counts * 4
    ParameterSet p;
    declare(p);
    const auto state = TrainingState::materialize(p, alloc, DType::f32, {}, {}, plan(level, 4, 1));
    state->allocate_grads();
    state->allocate_adam_state();
    CHECK(p.padded_numel(0) == 24);
    CHECK(state->shard_numel(0) == 6);
    CHECK(state->shard_begin(0) == 6);
    CHECK(state->shard_numel(1) == 4);  // the unsharded group
    const MemoryStats& m = alloc.stats();
    const size_t whole = 24 * 4, shard = 6 * 4, other = 4 * 4;
    CHECK(m.current(MemCategory::param) == (level == ShardLevel::full ? shard : whole) + other);
    CHECK(m.current(MemCategory::grad) == (level == ShardLevel::optimizer ? whole : shard) + other);
    CHECK(m.current(MemCategory::optim) == 2 * shard + 2 * other);
    CHECK(m.current(MemCategory::gathered) == 0);
    if (level == ShardLevel::full) {
      CHECK_FALSE(p.has_full_params(0));
      CHECK_THROWS_WITH(p.param(0), Catch::Contains("not gathered"));
      p.allocate_full_params(0);
      CHECK(m.current(MemCategory::gathered) == whole);
      CHECK(p.param(0).shape() == Shape{2, 5});
      p.release_full_params(0);
      CHECK(m.current(MemCategory::gathered) == 0);
    }
    if (level != ShardLevel::optimizer) {
      CHECK_FALSE(p.has_full_grads(0));
      CHECK_THROWS_WITH(p.grad(0), Catch::Contains("do not exist now"));
      p.allocate_full_grads(0);
      CHECK(m.current(MemCategory::grad) == whole + shard + other);
      p.release_full_grads(0);
    }
    CHECK_THROWS_WITH(state->adam_m(0), Catch::Contains("sharded"));
  }
}

TEST_CASE("one part, or no shard level, stores a group whole", "[params][shard]") {
  MetaAllocator alloc(4);
  ParameterSet p;
  declare(p);
  const auto state = TrainingState::materialize(p, alloc, DType::f32, {}, {},
                                                plan(ShardLevel::full, 1, 0));
  CHECK_FALSE(state->group_shard(0).sharded());
  CHECK(p.has_full_params(0));
  CHECK(state->shard_numel(0) == 23);
  CHECK(alloc.stats().current(MemCategory::param) == (23 + 4) * 4);
}

TEST_CASE("only held groups may be sharded; an untrained one keeps its shard's state",
          "[params][shard]") {
  MetaAllocator alloc(4);
  ParameterSet p;
  declare(p);
  CHECK_THROWS_WITH(TrainingState::materialize(p, alloc, DType::f32, {false, true}, {false, true},
                                               plan(ShardLevel::grad, 2, 0)),
                    Catch::Contains("sharded but not held"));
  ParameterSet q;
  declare(q);
  const auto state = TrainingState::materialize(q, alloc, DType::f32, {true, true}, {false, true},
                                                plan(ShardLevel::full, 2, 0));
  state->allocate_grads();
  state->allocate_adam_state();
  CHECK_FALSE(q.is_trained(0));
  CHECK(state->keeps_training_state(0));
  CHECK(state->shard_grads(0).numel() == 12);
  CHECK(state->shard_adam_m(0).numel() == 12);
}

TEST_CASE("the shards of k ranks tile the whole initial values exactly", "[params][shard]") {
  CpuAllocator alloc;
  ParameterSet whole;
  declare(whole);
  whole.materialize(alloc, DType::f64);
  whole.init_values(42);
  const std::vector<double> want = values_of(whole.group_params(0));
  for (ShardLevel level : {ShardLevel::optimizer, ShardLevel::full})
    for (int parts : {2, 3, 4}) {
      CAPTURE(shard_level_name(level), parts);
      std::vector<double> tiled;
      for (int i = 0; i < parts; ++i) {
        ParameterSet p;
        declare(p);
        const auto state =
            TrainingState::materialize(p, alloc, DType::f64, {}, {}, plan(level, parts, i));
        state->init_values(42);
        for (double v : values_of(state->shard_values(0))) tiled.push_back(v);
        if (level == ShardLevel::optimizer) {
          // Whole parameters persist and are initialized whole.
          const std::vector<double> all = values_of(p.group_params(0));
          CHECK(all == want);
        }
      }
      REQUIRE(tiled.size() == static_cast<size_t>((23 + parts - 1) / parts * parts));
      for (size_t e = 0; e < tiled.size(); ++e) {
        CAPTURE(e);
        CHECK(tiled[e] == (e < want.size() ? want[e] : 0.0));  // padding stays zero
      }
    }
}

TEST_CASE("AdamW on k shards equals AdamW on the whole group", "[params][shard][optim]") {
  CpuAllocator alloc;
  const AdamWSettings settings{0.9, 0.95, 1e-8, 0.1};
  ParameterSet whole_params;
  declare(whole_params);
  const auto whole = TrainingState::materialize(whole_params, alloc, DType::f64);
  whole->init_values(7);
  whole->allocate_grads();
  AdamW reference(*whole, settings);
  const int parts = 3;
  std::vector<std::unique_ptr<ParameterSet>> rank_params;
  std::vector<std::unique_ptr<TrainingState>> ranks;
  std::vector<std::unique_ptr<AdamW>> optimizers;
  for (int i = 0; i < parts; ++i) {
    rank_params.push_back(std::make_unique<ParameterSet>());
    declare(*rank_params.back());
    ranks.push_back(TrainingState::materialize(*rank_params.back(), alloc, DType::f64, {}, {},
                                               plan(ShardLevel::full, parts, i)));
    ranks.back()->init_values(7);
    ranks.back()->allocate_grads();
    optimizers.push_back(std::make_unique<AdamW>(*ranks.back(), settings));
  }
  for (int step = 1; step <= 3; ++step) {
    Tensor g = whole_params.group_grads(0);
    for (int64_t e = 0; e < g.numel(); ++e) set_value(g, e, grad_at(e + step));
    reference.update(step, 1e-2);
    for (int i = 0; i < parts; ++i) {
      TrainingState& p = *ranks[static_cast<size_t>(i)];
      Tensor sg = p.shard_grads(0);
      for (int64_t e = 0; e < sg.numel(); ++e) {
        const int64_t at = p.shard_begin(0) + e;
        set_value(sg, e, at < 23 ? grad_at(at + step) : 0.0);
      }
      optimizers[static_cast<size_t>(i)]->update(step, 1e-2);
    }
  }
  const std::vector<double> want = values_of(whole->group_values(0));
  for (int i = 0; i < parts; ++i) {
    const TrainingState& p = *ranks[static_cast<size_t>(i)];
    const std::vector<double> got = values_of(p.shard_values(0));
    for (size_t e = 0; e < got.size(); ++e) {
      const size_t at = static_cast<size_t>(p.shard_begin(0)) + e;
      CAPTURE(i, e);
      CHECK(got[e] == (at < want.size() ? want[at] : 0.0));  // bit-identical, padding untouched
    }
  }
}

TEST_CASE("assign writes what a rank stores of a parameter: whole or its shard's slice",
          "[params][shard]") {
  CpuAllocator alloc;
  ParameterSet params;
  declare(params);
  // Elements [12, 24) of the first group.
  const auto state = TrainingState::materialize(params, alloc, DType::f64, {}, {},
                                                plan(ShardLevel::full, 2, 1));
  TrainingState& p = *state;
  p.allocate_adam_state();
  OwnedTensor gain(alloc, {7}, DType::f64, MemCategory::workspace);  // offsets [10, 17)
  for (int64_t e = 0; e < 7; ++e) set_value(*gain, e, 100.0 + static_cast<double>(e));
  p.assign(1, TrainingState::Part::values, *gain);
  p.assign(1, TrainingState::Part::adam_v, *gain);
  const TrainingState::ShardSlice s = p.shard_slice(1);
  CHECK(s.param_begin == 2);
  CHECK(s.shard_begin == 0);
  CHECK(s.length == 5);
  CHECK(ops::item(p.shard_values(0), 0) == 102.0);
  CHECK(ops::item(p.shard_values(0), 4) == 106.0);
  CHECK(ops::item(p.shard_adam_v(0), 4) == 106.0);
  CHECK(p.shard_slice(0).length == 0);  // w lies in shard 0
}

TEST_CASE("bf16 shards keep f32 master shards and bf16 parameter shards", "[params][shard][mixed]") {
  MetaAllocator alloc(2);
  ParameterSet p;
  declare(p);
  const auto state = TrainingState::materialize(p, alloc, DType::bf16, {}, {},
                                                plan(ShardLevel::full, 2, 0));
  CHECK(alloc.stats().current(MemCategory::param) == (12 + 4) * 2);  // bf16 shard + other group
  CHECK(alloc.stats().current(MemCategory::master) == (12 + 4) * 4);
  p.allocate_full_params(0);
  CHECK(alloc.stats().current(MemCategory::gathered) == 24 * 2);  // gathered in bf16
  CHECK(p.group_params_padded(0).dtype() == DType::bf16);
}
