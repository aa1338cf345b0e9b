#include "engine/parallel/strategy.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "comm/communicator.h"
#include "engine/core/config_limits.h"
#include "engine/core/error.h"
#include "engine/plan/plan_file.h"

namespace sdp {

StrategySpec StrategySpec::from_settings(const ParallelSettings& p, const std::string& model) {
  const StrategyRow& row = p.strategy_row();
  StrategySpec s;
  s.name = std::string(row.name);
  s.granularity = row.granularity;
  s.masking = row.masking;
  s.active_fraction = p.active_fraction;
  if (p.plan.rfind("file:", 0) == 0) {
    s.plan_file = p.plan.substr(5);
  } else if (p.plan.rfind("weighted:", 0) == 0) {
    s.construction = PlanConstruction::weighted;
    s.rank_weights = parse_rank_weights(p.plan.substr(9));
  } else {
    s.construction = parse_plan_construction(p.plan);
  }
  s.plan_seed = p.plan_seed;
  // 0 = automatic (models/registry.h), so that every model has a valid default.
  // Narrowed to int only within the config's bound: a wrapped count would
  // silently read as "automatic".
  auto group_count = [](const char* field, int64_t v) {
    if (v < 0 || v > config_limits::kGroups)
      fail("config: ", field, " = ", v, " is invalid (valid: [0, ", config_limits::kGroups, "])");
    return static_cast<int>(v);
  };
  ModelLayout requested;
  requested.ffn_groups = group_count("ffn_groups", p.ffn_groups);
  requested.head_groups = group_count("head_groups", p.head_groups);
  requested.channel_groups = group_count("channel_groups", p.channel_groups);
  const ModelLayout groups = with_default_groups(model, requested);
  s.ffn_groups = groups.ffn_groups;
  s.head_groups = groups.head_groups;
  s.channel_groups = groups.channel_groups;
  s.shard = p.shard_level();
  return s;
}

std::string StrategySpec::describe(double held_fraction) const {
  const StrategyRow* row = find_strategy(name);
  SDP_CHECK(row, "strategy '", name, "' is not in the strategy table");
  if (!row->takes_fraction) return std::string(row->display);
  const bool moved = held_fraction > 0 && std::abs(held_fraction - active_fraction) > 1e-9;
  return format(row->display, " (C = ", active_fraction,
                moved ? format(", held ", held_fraction) : std::string(), ", ",
                plan_file.empty() ? std::string(plan_construction_name(construction))
                                  : "plan " + plan_file,
                ")");
}

namespace {

std::string owners_name(const std::vector<int>& owners, int world) {
  if (static_cast<int>(owners.size()) == world) return "owners:all";
  return "owners:" + comm::rank_list(owners);
}
}  // namespace

SubnetLayout SubnetLayout::build(const std::string& model, const StrategySpec& spec, int world,
                                 int rank, const ModelDataFacts& facts,
                                 const std::vector<StageSpan>& stages) {
  SDP_CHECK(world >= 1 && rank >= 0 && rank < world, "rank ", rank, " of a ", world,
            "-rank world");
  SubnetLayout L;
  L.spec = spec;
  L.world = world;
  L.rank = rank;
  L.stages = stages.empty() ? std::vector<StageSpan>{StageSpan{}} : stages;
  const int P = L.stage_count();
  L.mesh = RankMesh(world, P);
  L.replicas = L.mesh.replicas();
  L.stage = L.mesh.stage_of(rank);
  L.replica = L.mesh.replica_of(rank);
  ModelLayout& ml = L.model_layout;
  ml.granularity = spec.granularity;
  ml.ffn_groups = spec.ffn_groups;
  ml.head_groups = spec.head_groups;
  ml.channel_groups = spec.channel_groups;
  ml.split_shared = L.pipelined();
  const std::unique_ptr<Model> declared = make_model(model, ml, facts);
  const std::vector<Component>& comps = declared->components();
  const int blocks = declared->block_count();

  // The stage that runs a component: the one whose span holds its site.
  auto stage_of = [&](const Component& comp) {
    const int site = comp.kind == ComponentKind::shared ? comp.site : comp.block + 1;
    SDP_CHECK(site >= 0 || !L.pipelined(), "component ", comp.name,
              " serves several sites and cannot be placed on one pipeline stage");
    if (site < 0) return 0;
    for (int s = 0; s < P; ++s)
      if (L.stages[static_cast<size_t>(s)].contains_site(site, blocks)) return s;
    fail("component ", comp.name, " (site ", site, ") lies on no pipeline stage");
  };
  // The world ranks of stage s's replicas listed by replica index.
  auto world_ranks = [&](int s, const std::vector<int>& replicas) {
    std::vector<int> out;
    for (int d : replicas) out.push_back(L.mesh.rank_at(s, d));
    return out;
  };
  std::vector<int> all_replicas(static_cast<size_t>(L.replicas));
  for (int d = 0; d < L.replicas; ++d) all_replicas[static_cast<size_t>(d)] = d;

  std::vector<int> maskable;  // component index of each plan column
  for (size_t c = 0; c < comps.size(); ++c)
    if (comps[c].kind != ComponentKind::shared) {
      maskable.push_back(static_cast<int>(c));
      L.component_names.push_back(comps[c].name);
    }
  PlanRequest req;
  req.world = L.replicas;  // the plan is over one stage's replicas (all of them without a pipeline)
  req.components = static_cast<int>(maskable.size());
  req.active_fraction = spec.active_fraction;
  req.construction = spec.construction;
  req.seed = spec.plan_seed;
  req.rank_weights = spec.rank_weights;
  // Neuron plans: a column's class is its sublayer (block and kind: a
  // block's FFN groups, its head groups, a basic block's channel groups),
  // so that every rank holds a group of every sublayer it runs, and the
  // plan interleaves the sublayers (subnet_plan.h, Construction). Block
  // columns are each their own block: nothing to cover.
  const auto classes_of = [&](const std::vector<size_t>& columns) {
    std::vector<int> out;
    if (spec.granularity != Granularity::neuron) return out;
    std::map<std::pair<int, int>, int> id;  // (block, kind) -> class, by first column
    for (size_t k : columns) {
      const Component& comp = comps[static_cast<size_t>(maskable[k])];
      const auto key = std::make_pair(comp.block, static_cast<int>(comp.kind));
      out.push_back(id.emplace(key, static_cast<int>(id.size())).first->second);
    }
    return out;
  };
  std::vector<size_t> every_column(maskable.size());
  for (size_t k = 0; k < maskable.size(); ++k) every_column[k] = k;
  req.classes = classes_of(every_column);
  try {
    if (!spec.plan_file.empty()) {
      std::vector<std::vector<bool>> owns =
          read_plan_matrix(spec.plan_file, L.replicas, static_cast<int>(maskable.size()));
      // An unowned component is named (block.3, block.1.heads.0), not
      // numbered: the file's columns are the model's components in order.
      std::vector<std::string> unowned;
      for (size_t k = 0; k < maskable.size(); ++k) {
        bool owned = false;
        for (const std::vector<bool>& row : owns) owned = owned || row[k];
        if (!owned) unowned.push_back(L.component_names[k]);
      }
      if (!unowned.empty()) {
        std::string names;
        for (size_t i = 0; i < unowned.size() && i < 8; ++i) names += (i ? ", " : "") + unowned[i];
        if (unowned.size() > 8) names += format(" and ", unowned.size() - 8, " more");
        fail("plan file '", spec.plan_file, "': component", unowned.size() > 1 ? "s " : " ", names,
             unowned.size() > 1 ? " have" : " has",
             " no owner (valid: every component owned by at least one rank)");
      }
      L.plan = SubnetPlan::from_matrix(std::move(owns));
    } else if (!L.pipelined()) {
      // Every rank (and every emulated rank of a planner job) asks for the
      // same plan: built once per process.
      L.plan = SubnetPlan::cached(SubnetPlan::cache_key(req), [&] { return SubnetPlan::build(req); });
    } else {
      // One plan per stage over its own components, so that every replica
      // owns its share of every stage (one plan over all of them would hand
      // a replica whole stages, leaving it idle on the others).
      std::vector<int> column_stage(maskable.size());
      std::string key = SubnetPlan::cache_key(req) + ":stages:";
      for (size_t k = 0; k < maskable.size(); ++k) {
        column_stage[k] = stage_of(comps[static_cast<size_t>(maskable[k])]);
        key += std::to_string(column_stage[k]) + ",";
      }
      L.plan = SubnetPlan::cached(key, [&] {
        std::vector<std::vector<bool>> owns(static_cast<size_t>(L.replicas),
                                            std::vector<bool>(maskable.size(), false));
        for (int st = 0; st < P; ++st) {
          std::vector<size_t> columns;
          for (size_t k = 0; k < maskable.size(); ++k)
            if (column_stage[k] == st) columns.push_back(k);
          if (columns.empty()) continue;
          PlanRequest stage_req = req;
          stage_req.components = static_cast<int>(columns.size());
          stage_req.classes = classes_of(columns);
          stage_req.seed = req.seed + static_cast<uint64_t>(st);
          const SubnetPlan stage_plan = SubnetPlan::build(stage_req);
          for (size_t c = 0; c < columns.size(); ++c)
            for (int d : stage_plan.owners(static_cast<int>(c)))
              owns[static_cast<size_t>(d)][columns[c]] = true;
        }
        return SubnetPlan::from_matrix(std::move(owns));
      });
    }
  } catch (const Error& e) {
    // Every rank builds the same plan: every rank fails alike.
    throw CollectiveError(format("strategy ", spec.describe(), " on ", L.replicas,
                                 L.pipelined() ? " replicas per stage" : " ranks", " with model ",
                                 model, " (", maskable.size(), " ",
                                 granularity_name(spec.granularity), " components): ", e.what()));
  }

  // Storage groups: one per distinct owner set, the all-ranks set first
  // (without a pipeline; with one, each stage's sets, in component order).
  // Sharded: one group per owner set and block, so that a block's
  // parameters are gathered alone; shared components stay one group (the
  // root unit: embedding and head, stem and classifier).
  const bool by_block = spec.shard != ShardLevel::none;
  std::map<std::pair<std::vector<int>, int>, int> index;
  auto group_of = [&](const std::vector<int>& owners, int block) {
    const int key_block = by_block ? block : -1;
    auto [it, fresh] = index.emplace(std::make_pair(owners, key_block),
                                     static_cast<int>(L.groups.size()));
    if (fresh) {
      StorageGroup g;
      g.name = owners_name(owners, world);
      if (key_block >= 0) g.name += "/block." + std::to_string(key_block);
      g.owners = owners;
      const bool mine = std::binary_search(owners.begin(), owners.end(), rank);
      g.trained = mine;
      // Backward masking runs the whole network of the rank's stage.
      g.held = mine || (spec.masking == Masking::backward &&
                        L.mesh.stage_of(owners.front()) == L.stage);
      L.groups.push_back(std::move(g));
    }
    return it->second;
  };
  ml.component_group.assign(comps.size(), 0);
  if (!L.pipelined()) group_of(world_ranks(0, all_replicas), -1);
  std::vector<int> column(comps.size(), -1);
  for (size_t k = 0; k < maskable.size(); ++k) column[static_cast<size_t>(maskable[k])] = static_cast<int>(k);
  for (size_t c = 0; c < comps.size(); ++c) {
    const Component& comp = comps[c];
    const int s = stage_of(comp);
    const std::vector<int> owners =
        column[c] < 0 ? world_ranks(s, all_replicas) : world_ranks(s, L.plan.owners(column[c]));
    ml.component_group[c] = group_of(owners, comp.kind == ComponentKind::shared ? -1 : comp.block);
  }
  for (const StorageGroup& g : L.groups) ml.group_names.push_back(g.name);

  // Roots send a group's values (backward-masking broadcasts, gathers to
  // rank 0): the largest groups first, each to the owner that sends the
  // fewest bytes so far, so no rank carries much more than its share.
  // Sizes come from the model's declarations (nothing is allocated).
  const std::unique_ptr<Model> sizes = make_model(model, ml, facts);
  std::vector<size_t> order(L.groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  auto numel = [&](size_t g) { return sizes->params().group_decl(static_cast<int>(g)).numel; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return numel(a) > numel(b); });
  std::vector<int64_t> sent(static_cast<size_t>(world), 0);
  for (size_t g : order) {
    StorageGroup& group = L.groups[g];
    int best = group.owners.front();
    for (int r : group.owners)
      if (sent[static_cast<size_t>(r)] < sent[static_cast<size_t>(best)]) best = r;
    group.root = best;
    // The all-ranks group never broadcasts: its root only serves gathers.
    if (!L.all_ranks(group)) sent[static_cast<size_t>(best)] += numel(g);
  }

  // The users of each sublayer parameter: under forward masking, the ranks
  // of its stage that hold a component of its sublayer (the others skip the
  // sublayer and add an exact zero to the group's average); under backward
  // masking every rank of the stage runs the whole sublayer.
  if (spec.masking == Masking::forward) {
    for (const SublayerParam& sp : sizes->sublayer_params()) {
      std::vector<int> replicas;
      int stage = -1;
      for (size_t k = 0; k < maskable.size(); ++k) {
        const Component& comp = comps[static_cast<size_t>(maskable[k])];
        if (comp.block != sp.block || comp.kind != sp.serves) continue;
        stage = stage_of(comp);
        for (int d : L.plan.owners(static_cast<int>(k))) replicas.push_back(d);
      }
      std::sort(replicas.begin(), replicas.end());
      replicas.erase(std::unique(replicas.begin(), replicas.end()), replicas.end());
      const ParamDecl& decl = sizes->params().decl(sp.param);
      const StorageGroup& group = L.groups[static_cast<size_t>(decl.group)];
      SDP_CHECK(stage >= 0 && !replicas.empty(), "parameter ", decl.name,
                " serves a sublayer of block ", sp.block, " that no rank holds");
      std::vector<int> users = world_ranks(stage, replicas);
      std::sort(users.begin(), users.end());
      SDP_CHECK(std::includes(group.owners.begin(), group.owners.end(), users.begin(), users.end()),
                "the users of ", decl.name, " are not all owners of its group ", group.name);
      if (users.size() < group.owners.size())
        L.sublayer_users.push_back({sp.param, decl.name, std::move(users)});
    }
  }
  return L;
}

bool SubnetLayout::held_by(const StorageGroup& g, int r) const {
  if (std::binary_search(g.owners.begin(), g.owners.end(), r)) return true;
  return spec.masking == Masking::backward && mesh.stage_of(r) == stage_of(g);
}

std::vector<bool> SubnetLayout::held_mask() const {
  std::vector<bool> m;
  for (const StorageGroup& g : groups) m.push_back(g.held);
  return m;
}

std::vector<GroupShard> SubnetLayout::shard_plan() const {
  std::vector<GroupShard> out(groups.size());
  if (spec.shard == ShardLevel::none) return out;
  // Backward masking keeps every group of a stage on every rank of it:
  // fully sharded, each is cut over the stage's replicas (the world without
  // a pipeline; sharding.h), like the shared group.
  for (size_t g = 0; g < groups.size(); ++g) {
    const StorageGroup& sg = groups[g];
    if (cut_over_stage()) {
      if (sg.held) out[g] = {spec.shard, replicas, replica};
      continue;
    }
    if (!sg.trained) continue;
    const auto at = std::find(sg.owners.begin(), sg.owners.end(), rank);
    out[g] = {spec.shard, static_cast<int>(sg.owners.size()),
              static_cast<int>(at - sg.owners.begin())};
  }
  return out;
}

std::vector<bool> SubnetLayout::trained_mask() const {
  std::vector<bool> m;
  for (const StorageGroup& g : groups) m.push_back(g.trained);
  return m;
}

nlohmann::json SubnetLayout::to_json() const {
  nlohmann::json groups_json = nlohmann::json::array();
  for (const StorageGroup& g : groups)
    groups_json.push_back({{"name", g.name}, {"owners", g.owners}, {"root", g.root}});
  nlohmann::json stages_json = nlohmann::json::array();
  for (const StageSpan& span : stages)
    stages_json.push_back({{"first_block", span.first_block}, {"end_block", span.end_block}});
  nlohmann::json out = {{"strategy", spec.name},
                        {"pipeline_stages", stage_count()},
                        {"stages", stages_json},
                        {"replicas", replicas},
                        {"description", spec.describe()},
                        {"granularity", granularity_name(spec.granularity)},
                        {"masking", masking_name(spec.masking)},
                        {"world", world},
                        {"shard", shard_level_name(spec.shard)},
                        {"plan", plan.to_json()},
                        {"storage_groups", groups_json}};
  // Only where some shared parameter is averaged over fewer ranks than its
  // group (the summaries of every other job stay as they were).
  if (!sublayer_users.empty()) {
    nlohmann::json users_json = nlohmann::json::array();
    for (const SublayerUsers& u : sublayer_users)
      users_json.push_back({{"param", u.name}, {"users", u.users}});
    out["averaged_over_users"] = users_json;
  }
  return out;
}

}  // namespace sdp
