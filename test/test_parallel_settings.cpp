// The parallel settings: their flat JSON keys (old files load, new keys
// round-trip), their validation messages, the strategy table they read, the
// composition labels and the name[:C][+shard][+ac] items of sdp-plan.
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "engine/parallel/composition.h"
#include "engine/parallel/parallel_settings.h"
#include "engine/parallel/strategy.h"
#include "engine/parallel/strategy_table.h"
#include "engine/train/train_config.h"

using namespace sdp;
using Catch::Contains;

namespace {

// The message of the ConfigFieldError `f` throws, and that it names `field`.
template <typename F>
std::string field_error(F&& f, const std::string& field) {
  try {
    f();
  } catch (const ConfigFieldError& e) {
    CHECK(e.field() == field);
    return e.what();
  }
  FAIL("no ConfigFieldError for field " << field);
  return "";
}

ParallelSettings settings(const std::string& strategy, double c = 1.0,
                          const std::string& shard = "", const std::string& ac = "none") {
  ParallelSettings p;
  p.strategy = strategy;
  p.active_fraction = c;
  p.shard = shard;
  p.activation_checkpointing = ac;
  return p;
}

// The message of the sdp::Error parse_composition(item) throws.
std::string composition_error(const std::string& item) {
  try {
    parse_composition(item);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("no error for item '" << item << "'");
  return "";
}

}  // namespace

TEST_CASE("parallel settings JSON: new keys round-trip as flat keys", "[config][parallel]") {
  const nlohmann::json j = {{"strategy", "b-sdp"},
                            {"active_fraction", 0.5},
                            {"shard", "grad"},
                            {"reshard_after_forward", false},
                            {"activation_checkpointing", "every:3"}};
  const TrainConfig c = TrainConfig::from_json(j);
  CHECK(c.parallel.strategy == "b-sdp");
  CHECK(c.parallel.active_fraction == 0.5);
  CHECK(c.parallel.shard == "grad");
  CHECK(c.parallel.reshard_after_forward == false);
  CHECK(c.parallel.activation_checkpointing == "every:3");
  CHECK(c.parallel.shard_level() == ShardLevel::grad);
  CHECK(c.parallel.recompute().every == 3);
  c.validate();

  const nlohmann::json out = c.to_json();
  CHECK_FALSE(out.contains("parallel"));  // flat, as the fields always were
  for (const char* key : {"strategy", "active_fraction", "plan", "plan_seed", "ffn_groups",
                          "head_groups", "channel_groups", "shard", "reshard_after_forward",
                          "activation_checkpointing"})
    CHECK(out.contains(key));
  CHECK(out.at("shard") == "grad");
  CHECK(out.at("reshard_after_forward") == false);
  CHECK(out.at("activation_checkpointing") == "every:3");
  CHECK(TrainConfig::from_json(out).to_json() == out);
  // The defaults round-trip too: the strategy's own shard level is "".
  CHECK(TrainConfig::from_json(TrainConfig().to_json()).to_json() == TrainConfig().to_json());
  CHECK(TrainConfig().to_json().at("shard") == "");
}

TEST_CASE("parallel settings JSON: a config written before the new keys still loads",
          "[config][parallel]") {
  // The flat keys of an older config file (or a checkpoint's sdp_state.json
  // train_config): no shard, reshard_after_forward or activation_checkpointing.
  const nlohmann::json old = nlohmann::json::parse(R"({
    "model": "tiny", "data": "synthetic", "batch": 2, "seq": 16, "grad_accum": 1,
    "steps": 4, "lr": 0.003, "min_lr": 0.0003, "warmup": 0, "weight_decay": 0.1,
    "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "grad_clip": 1.0, "eval_every": 0,
    "eval_batches": 4, "recalibration_images": 1024, "seed": 1234, "device": "cpu",
    "dtype": "f32", "threads": 0, "strategy": "nb-sdp", "active_fraction": 0.25,
    "plan": "random", "plan_seed": 9, "ffn_groups": 2, "head_groups": 1,
    "channel_groups": 0, "comm_timeout": 600.0, "bucket_mb": -1.0,
    "grad_reduce_dtype": "f32", "skip_nonfinite": 0, "emulate_world": 0,
    "emulate_rank": 0, "save_dir": "", "save_every": 0, "resume": "",
    "max_shard_size": "5GB", "metrics": "", "progress": false})");
  const TrainConfig c = TrainConfig::from_json(old);
  c.validate();
  CHECK(c.parallel.strategy == "nb-sdp");
  CHECK(c.parallel.active_fraction == 0.25);
  CHECK(c.parallel.plan == "random");
  CHECK(c.parallel.plan_seed == 9);
  CHECK(c.parallel.ffn_groups == 2);
  CHECK(c.parallel.head_groups == 1);
  CHECK(c.parallel.shard.empty());
  CHECK(c.parallel.shard_level() == ShardLevel::none);
  CHECK(c.parallel.reshard_after_forward == true);
  CHECK_FALSE(c.parallel.recompute().enabled());
  CHECK(c.parallel.masking() == Masking::backward);
  CHECK(c.parallel.granularity() == Granularity::neuron);
  // Every old key is still a key of the new form.
  for (const auto& [key, value] : old.items()) CHECK(c.to_json().at(key) == value);

  // The new keys have their types checked like every field.
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"reshard_after_forward", "yes"}}); },
                         "reshard_after_forward"),
             Contains("field 'reshard_after_forward' has the wrong type (string \"yes\"; "
                      "expected true or false)"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"shard", 3}}); }, "shard"),
             Contains("expected a string"));
  CHECK_THAT(field_error([] { TrainConfig::from_json({{"sharding", "full"}}); }, "sharding"),
             Contains("unknown field 'sharding' (valid fields: model, "));
}

TEST_CASE("parallel settings: validation names the field and what is valid",
          "[config][parallel]") {
  auto error_of = [](const ParallelSettings& p, const std::string& field) {
    return field_error([&] { p.validate(); }, field);
  };
  CHECK(error_of(settings("zero"), "strategy") ==
        "config: strategy = 'zero' is invalid (valid: ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp)");
  CHECK(error_of(settings("ddp", 1.0, "zero3"), "shard") ==
        "config: shard = 'zero3' is invalid (valid: none, optimizer, grad, full; empty = the "
        "strategy's level: full for fsdp, none otherwise)");
  // fsdp is ddp with full sharding: any other explicit level contradicts it.
  for (const char* level : {"none", "optimizer", "grad"})
    CHECK(error_of(settings("fsdp", 1.0, level), "shard") ==
          format("config: shard = '", level, "' with strategy fsdp is invalid: fsdp means "
                 "--shard full; use --strategy ddp --shard ", level));
  CHECK(error_of(settings("fsdp", 0.5), "active_fraction") ==
        "config: active_fraction = 0.5 needs an SDP strategy (fsdp trains the whole model on "
        "every rank: C = 1)");
  CHECK(error_of(settings("ddp", 0.5), "active_fraction") ==
        "config: active_fraction = 0.5 needs an SDP strategy (ddp trains the whole model on "
        "every rank: C = 1)");
  CHECK(error_of(settings("b-sdp", 0.0), "active_fraction") ==
        "config: active_fraction = 0 is invalid (valid: (0, 1])");
  for (const char* ac : {"every:0", "every:x", "blocks", "every:", ""})
    CHECK(error_of(settings("ddp", 1.0, "", ac), "activation_checkpointing") ==
          format("config: activation_checkpointing = '", ac,
                 "' is invalid (valid: none, block, every:K with K a positive integer)"));
  ParallelSettings plan = settings("b-sdp", 0.5);
  plan.plan = "ring";
  CHECK(error_of(plan, "plan") ==
        "config: plan = 'ring' is invalid (valid: cyclic, random, file:PATH of an ownership "
        "matrix, weighted:W0,W1,... one weight per rank, e.g. weighted:80GiBx4,40GiBx4)");
  ParallelSettings groups = settings("n-sdp", 0.5);
  groups.channel_groups = -1;
  CHECK(error_of(groups, "channel_groups") ==
        "config: channel_groups = -1 is invalid (valid: [0, 65536])");
  // TrainConfig::validate reports them under the same field.
  TrainConfig c;
  c.parallel.shard = "all";
  CHECK_THAT(field_error([&] { c.validate(); }, "shard"), Contains("shard = 'all' is invalid"));

  // Valid: every level with ddp and with an SDP strategy, fsdp alone or
  // with full written out, and reshard_after_forward at any level (it is
  // ignored below full).
  for (const char* level : {"", "none", "optimizer", "grad", "full"}) {
    ParallelSettings p = settings("b-sdp", 0.5, level, "every:2");
    p.reshard_after_forward = false;
    p.validate();
    settings("ddp", 1.0, level, "block").validate();
    settings("bb-sdp", 0.5, level, "every:2").validate();
  }
  settings("fsdp").validate();
  settings("fsdp", 1.0, "full").validate();
}

TEST_CASE("parallel settings: fsdp implies full sharding; levels and policies as written",
          "[parallel]") {
  CHECK(settings("fsdp").shard_level() == ShardLevel::full);
  CHECK(settings("ddp").shard_level() == ShardLevel::none);
  CHECK(settings("b-sdp", 0.5).shard_level() == ShardLevel::none);
  CHECK(settings("ddp", 1, "optimizer").shard_level() == ShardLevel::optimizer);
  CHECK(settings("n-sdp", 0.5, "grad").shard_level() == ShardLevel::grad);
  CHECK(settings("ddp", 1, "full").shard_level() == ShardLevel::full);
  CHECK(settings("ddp", 1, "none").shard_level() == ShardLevel::none);
  CHECK(settings("ddp").recompute().every == 0);
  CHECK(settings("ddp", 1, "", "block").recompute().every == 1);
  CHECK(settings("ddp", 1, "", "every:4").recompute().every == 4);
  CHECK_THAT(field_error([] { settings("ddp", 1, "", "all").recompute(); },
                         "activation_checkpointing"),
             Contains("activation_checkpointing = 'all' is invalid"));
  CHECK_THAT(field_error([] { settings("fdsp").shard_level(); }, "strategy"),
             Contains("strategy = 'fdsp' is invalid"));
  CHECK(settings("ddp").subnetworks() == false);
  CHECK(settings("fsdp").subnetworks() == false);
  CHECK(settings("b-sdp", 0.5).subnetworks() == true);
}

TEST_CASE("parallel settings: composition labels", "[parallel]") {
  struct Case {
    ParallelSettings p;
    const char* label;
  };
  const std::vector<Case> cases = {
      {settings("ddp"), "DDP"},
      {settings("fsdp"), "FSDP"},
      {settings("fsdp", 1, "full"), "FSDP"},
      {settings("ddp", 1, "full"), "FSDP"},  // the same composition as fsdp
      {settings("fsdp", 1, "", "block"), "FSDP+AC"},
      {settings("b-sdp", 0.6875, "full", "block"), "B-SDP+FSDP+AC"},
      {settings("n-sdp", 0.5, "grad"), "N-SDP+ZeRO-2"},
      {settings("b-sdp", 0.5, "", "block"), "B-SDP+AC"},
      {settings("ddp", 1, "optimizer"), "DDP+ZeRO-1"},
      {settings("ddp", 1, "none"), "DDP"},
      {settings("bb-sdp", 0.5, "", "every:2"), "Bb-SDP+AC:2"},
      {settings("nb-sdp", 0.5, "optimizer", "every:3"), "Nb-SDP+ZeRO-1+AC:3"},
      {settings("n-sdp", 0.5), "N-SDP"},
  };
  for (const Case& c : cases) {
    INFO(c.p.strategy << " shard '" << c.p.shard << "' ac " << c.p.activation_checkpointing);
    CHECK(c.p.composition_label() == c.label);
  }
}

TEST_CASE("strategy table: one row per strategy; StrategySpec and describe read it",
          "[parallel]") {
  CHECK(strategy_names() == "ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp");
  CHECK(strategy_table().size() == 6);
  CHECK(find_strategy("zero") == nullptr);
  CHECK(find_strategy("DDP") == nullptr);  // names are lower case, as written on the command line
  for (const StrategyRow& row : strategy_table()) {
    CHECK(find_strategy(row.name) == &row);
    CHECK_THAT(strategy_help(),
               Contains(std::string(row.name) + " (" + std::string(row.help) + ")"));
  }
  const StrategyRow& fsdp = *find_strategy("fsdp");
  CHECK(fsdp.display == "FSDP");
  CHECK(fsdp.granularity == Granularity::block);
  CHECK(fsdp.masking == Masking::forward);
  CHECK_FALSE(fsdp.takes_fraction);
  CHECK(fsdp.implied_shard == ShardLevel::full);
  for (const char* name : {"ddp", "b-sdp", "n-sdp", "bb-sdp", "nb-sdp"})
    CHECK_FALSE(find_strategy(name)->implied_shard);

  struct Expected {
    const char* name;
    double c;
    Granularity granularity;
    Masking masking;
    const char* description;
  };
  const std::vector<Expected> expected = {
      {"ddp", 1.0, Granularity::block, Masking::forward, "DDP"},
      {"fsdp", 1.0, Granularity::block, Masking::forward, "FSDP"},
      {"b-sdp", 0.5, Granularity::block, Masking::forward, "B-SDP (C = 0.5, cyclic)"},
      {"n-sdp", 0.25, Granularity::neuron, Masking::forward, "N-SDP (C = 0.25, cyclic)"},
      {"bb-sdp", 0.5, Granularity::block, Masking::backward, "Bb-SDP (C = 0.5, cyclic)"},
      {"nb-sdp", 0.75, Granularity::neuron, Masking::backward, "Nb-SDP (C = 0.75, cyclic)"},
  };
  for (const Expected& e : expected) {
    INFO(e.name);
    const StrategySpec s = StrategySpec::from_settings(settings(e.name, e.c), "tiny");
    CHECK(s.name == e.name);
    CHECK(s.granularity == e.granularity);
    CHECK(s.masking == e.masking);
    CHECK(s.active_fraction == e.c);
    CHECK(s.describe() == e.description);
  }
  ParallelSettings random = settings("b-sdp", 0.5);
  random.plan = "random";
  CHECK(StrategySpec::from_settings(random, "tiny").describe() == "B-SDP (C = 0.5, random)");
  CHECK_THAT(field_error([] { StrategySpec::from_settings(settings("zero"), "tiny"); },
                         "strategy"),
             Contains("strategy = 'zero' is invalid"));
}

TEST_CASE("compositions: the items sdp-plan accepts", "[parallel]") {
  struct Case {
    const char* item;
    const char* strategy;
    double c;  // 0: not written
    std::optional<ShardLevel> shard;
    int64_t every;
    const char* label;
  };
  const std::vector<Case> cases = {
      {"fsdp", "fsdp", 0, std::nullopt, 0, "FSDP"},
      {"fsdp+ac", "fsdp", 0, std::nullopt, 1, "FSDP+AC"},
      {"b-sdp:0.6875+fsdp+ac", "b-sdp", 0.6875, ShardLevel::full, 1, "B-SDP+FSDP+AC"},
      {"n-sdp:0.5+zero2", "n-sdp", 0.5, ShardLevel::grad, 0, "N-SDP+ZeRO-2"},
      {"ddp+zero1", "ddp", 0, ShardLevel::optimizer, 0, "DDP+ZeRO-1"},
      {"bb-sdp:0.5+ac:2", "bb-sdp", 0.5, std::nullopt, 2, "Bb-SDP+AC:2"},
      {"ddp+zero3", "ddp", 0, ShardLevel::full, 0, "FSDP"},
      {"fsdp+zero3", "fsdp", 0, ShardLevel::full, 0, "FSDP"},
      {"fsdp+fsdp", "fsdp", 0, ShardLevel::full, 0, "FSDP"},
      {"nb-sdp:0.25+ac:3+zero1", "nb-sdp", 0.25, ShardLevel::optimizer, 3, "Nb-SDP+ZeRO-1+AC:3"},
      {"b-sdp", "b-sdp", 0, std::nullopt, 0, "B-SDP"},
      {"ddp", "ddp", 0, std::nullopt, 0, "DDP"},
  };
  for (const Case& e : cases) {
    INFO(e.item);
    const Composition c = parse_composition(e.item);
    CHECK(c.strategy == e.strategy);
    CHECK(c.active_fraction.has_value() == (e.c != 0));
    if (e.c != 0) CHECK(*c.active_fraction == e.c);
    CHECK(c.shard == e.shard);
    CHECK(c.recompute.every == e.every);
    CHECK(c.plain() == (!e.shard && e.every == 0));
    ParallelSettings p;
    p.active_fraction = 0.5;  // what an SDP item without C gets in sdp-plan
    c.apply_to(p);
    if (!find_strategy(c.strategy)->takes_fraction) p.active_fraction = 1.0;
    p.validate();
    CHECK(p.composition_label() == e.label);
    CHECK(p.shard_level() == e.shard.value_or(c.strategy == std::string("fsdp")
                                                  ? ShardLevel::full
                                                  : ShardLevel::none));
  }
}

TEST_CASE("compositions: bad items say which part is wrong and what is valid", "[parallel]") {
  const std::string forms = "name[:C][+fsdp|+zero1|+zero2|+zero3][+ac|+ac:K]";
  CHECK(composition_error("foo:0.5") ==
        "strategy 'foo' is invalid (valid: ddp, fsdp, b-sdp, n-sdp, bb-sdp, nb-sdp; an item is " +
            forms + ")");
  // A suffix is no strategy of its own.
  CHECK_THAT(composition_error("zero1"), Contains("strategy 'zero1' is invalid"));
  CHECK(composition_error("b-sdp:half") ==
        "C = 'half' is not a number (expected " + forms + " with C in (0, 1], e.g. b-sdp:0.5)");
  CHECK_THAT(composition_error("b-sdp:+ac"), Contains("C = '' is not a number"));
  CHECK_THAT(composition_error("b-sdp:0.5:1"), Contains("C = '0.5:1' is not a number"));
  const std::string suffixes =
      "(valid after the strategy: +fsdp or +zero3 (full sharding), +zero2, +zero1, +ac or +ac:K "
      "(activation checkpointing); an item is " + forms + ")";
  CHECK(composition_error("b-sdp:0.5+zero4") == "'+zero4' is invalid " + suffixes);
  CHECK(composition_error("b-sdp+") == "'+' is invalid " + suffixes);
  CHECK(composition_error("b-sdp+AC") == "'+AC' is invalid " + suffixes);
  for (const char* ac : {"ac:0", "ac:", "ac:x", "ac:-1"})
    CHECK(composition_error(std::string("ddp+") + ac) ==
          format("'+", ac, "' is invalid (valid: +ac, or +ac:K with K a positive integer)"));
  CHECK(composition_error("b-sdp+zero1+fsdp") ==
        "two sharding parts ('+zero1' and '+fsdp'; at most one)");
  CHECK(composition_error("b-sdp+ac+ac:2") ==
        "two activation checkpointing parts ('+ac' and '+ac:2'; at most one)");
  CHECK(composition_error("fsdp+zero1") == "fsdp means --shard full; for '+zero1' use ddp+zero1");
  CHECK(composition_error("fsdp+zero2+ac") ==
        "fsdp means --shard full; for '+zero2' use ddp+zero2");
}
