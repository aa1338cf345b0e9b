#include "engine/plan/subnet_plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

#include "engine/core/counter_rng.h"
#include "engine/core/error.h"
#include "engine/plan/plan_repair.h"
#include "engine/plan/spectral_gap.h"

namespace sdp {

PlanConstruction parse_plan_construction(const std::string& name) {
  if (name == "cyclic") return PlanConstruction::cyclic;
  if (name == "random") return PlanConstruction::random;
  if (name == "weighted") return PlanConstruction::weighted;
  fail("unknown plan construction '", name, "' (valid: cyclic, random, weighted)");
}

std::string_view plan_construction_name(PlanConstruction construction) {
  switch (construction) {
    case PlanConstruction::cyclic: return "cyclic";
    case PlanConstruction::random: return "random";
    case PlanConstruction::weighted: return "weighted";
  }
  fail("plan construction ", static_cast<int>(construction), " is not a PlanConstruction");
}

namespace {

using Matrix = std::vector<std::vector<bool>>;

// m = round(C K), halves up (the 1e-9 keeps a C written in decimals, such
// as 0.35 of 20, from falling just below its half); or PlanRequest::per_rank.
int components_per_rank(const PlanRequest& q) {
  const int K = q.components, N = q.world;
  // One rank has no one to share with: it holds every component (DDP, which
  // ownership_shortfall says), as a single-process run of an SDP strategy
  // always has.
  if (N == 1 && q.per_rank == 0) return K;
  int m = q.per_rank;
  if (m != 0) {
    if (m < 1 || m > K)
      fail("subnet plan: per_rank = ", m, " components per rank is invalid with ", K,
           " components (valid: 1 .. ", K, ", or 0 for round(C K))");
  } else {
    const double exact = q.active_fraction * K;
    m = static_cast<int>(std::min<double>(K, std::floor(exact + 0.5 + 1e-9)));
    if (m < 1)
      fail("subnet plan: active_fraction C = ", q.active_fraction, " with K = ", K,
           " components gives each rank round(C K) = 0 of them (valid: C >= 1/(2K) = ",
           0.5 / K, ", which rounds to 1 component per rank)");
  }
  if (static_cast<int64_t>(m) * N < K) {
    const int64_t need = (static_cast<int64_t>(K) + N - 1) / N;  // ceil(K / N) per rank
    fail("subnet plan: active_fraction C = ", q.active_fraction, " on world N = ", N,
         " gives each rank m = ", m, " of the K = ", K, " components, m N = ",
         static_cast<int64_t>(m) * N, " ownerships for ", K,
         " components, so some component would have no owner (valid: C >= ceil(K / N) / K = ",
         static_cast<double>(need) / K, " on ", N, " ranks, or world >= ceil(K / m) = ",
         (static_cast<int64_t>(K) + m - 1) / m, " ranks for this C)");
  }
  return m;
}

// The walk order of the constructions: position p holds column order[p].
// Without classes the columns' own order. With classes each class is spread
// evenly along the walk: its j-th column (of G) sits at key (j + 1/2) / G,
// ties kept in class order, so a window of w consecutive positions holds a
// column of every class once w >= max_c ceil(K / G_c) (S when every class
// has the same G). The models list neuron groups group-major (group g of
// every sublayer before group g + 1), which is this order when all G are
// equal: such plans are unchanged by it.
std::vector<int> walk_order(int components, const std::vector<int>& classes) {
  std::vector<int> order(static_cast<size_t>(components));
  std::iota(order.begin(), order.end(), 0);
  if (classes.empty()) return order;
  const int S = *std::max_element(classes.begin(), classes.end()) + 1;
  std::vector<int64_t> size(static_cast<size_t>(S), 0), index(static_cast<size_t>(components));
  for (int k = 0; k < components; ++k)
    index[static_cast<size_t>(k)] = size[static_cast<size_t>(classes[static_cast<size_t>(k)])]++;
  // (2 j + 1) / (2 G) compared by cross-multiplying: exact.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    const int ca = classes[ua], cb = classes[ub];
    const int64_t ka = (2 * index[ua] + 1) * size[static_cast<size_t>(cb)];
    const int64_t kb = (2 * index[ub] + 1) * size[static_cast<size_t>(ca)];
    if (ka != kb) return ka < kb;
    return ca < cb;
  });
  return order;
}

Matrix build_cyclic(int world, int components, int m) {
  Matrix owns(static_cast<size_t>(world), std::vector<bool>(static_cast<size_t>(components)));
  for (int i = 0; i < world; ++i) {
    const int64_t end =
        ((static_cast<int64_t>(i) + 1) * components + world - 1) / world - 1;  // e_i
    for (int j = 0; j < m; ++j)
      owns[static_cast<size_t>(i)][static_cast<size_t>((end - j + components) % components)] = true;
  }
  return owns;
}

// Taking the o least-loaded ranks keeps every load within one of the others
// (if loads are in {a, a+1} before, they are in {a, a+1} or {a+1, a+2}
// after); they sum to m N at the end, so every rank holds m. The draws come
// from the counter-based generator rather than std:: distributions, whose
// output is implementation-defined, so every process builds the same plan.
// When m N / K is whole every component takes r = m N / K ranks, the same
// draws as the construction before fractional C.
Matrix build_random(int world, int components, int m, uint64_t seed) {
  Matrix owns(static_cast<size_t>(world), std::vector<bool>(static_cast<size_t>(components)));
  const uint64_t key = splitmix64(seed ^ stable_hash("sdp.subnet_plan.random"));
  const int64_t total = static_cast<int64_t>(m) * world;
  std::vector<int> load(static_cast<size_t>(world), 0);
  std::vector<int> order(static_cast<size_t>(world));
  std::vector<double> tie(static_cast<size_t>(world));
  for (int k = 0; k < components; ++k) {
    const int64_t owners = (k + 1) * total / components - k * total / components;
    for (int i = 0; i < world; ++i)
      tie[static_cast<size_t>(i)] = counter_uniform(
          key, static_cast<uint64_t>(k) * static_cast<uint64_t>(world) + static_cast<uint64_t>(i));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
      if (load[ua] != load[ub]) return load[ua] < load[ub];
      if (tie[ua] != tie[ub]) return tie[ua] < tie[ub];
      return a < b;
    });
    for (int64_t j = 0; j < owners; ++j) {
      const auto rank = static_cast<size_t>(order[static_cast<size_t>(j)]);
      owns[rank][static_cast<size_t>(k)] = true;
      ++load[rank];
    }
  }
  return owns;
}

// Integer quotas q_i summing to `total` ownerships: the shares min(K,
// lambda w_i) that sum to it (lambda by bisection), floored, and the
// remaining ownerships to the largest remainders (ties to the lower rank),
// never above K.
std::vector<int> weighted_quotas(int components, int64_t total_ownerships,
                                 const std::vector<double>& weights) {
  const double total = static_cast<double>(total_ownerships);
  const auto share = [&](double lambda, double w) { return std::min<double>(components, lambda * w); };
  double lo = 0, hi = 1;
  const auto sum_at = [&](double lambda) {
    double sum = 0;
    for (double w : weights) sum += share(lambda, w);
    return sum;
  };
  while (sum_at(hi) < total) hi *= 2;
  for (int it = 0; it < 200; ++it) ((sum_at((lo + hi) / 2) < total) ? lo : hi) = (lo + hi) / 2;
  std::vector<int> quota(weights.size());
  std::vector<double> remainder(weights.size());
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double s = share(hi, weights[i]);
    quota[i] = static_cast<int>(std::floor(s + 1e-9));
    remainder[i] = s - quota[i];
    given += quota[i];
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t j = 0; given < total_ownerships; j = (j + 1) % order.size())
    if (quota[order[j]] < components) {
      ++quota[order[j]];
      ++given;
    }
  return quota;
}

// The ranks' quotas laid end to end in rank order as m N slots; slot s goes
// to component s mod K. A rank's run of at most K consecutive slots holds at
// most one of any K apart, so its components are distinct, and it maps to a
// cyclic window of components; the slots of component k are k, k + K, ...,
// floor or ceil of m N / K of them.
Matrix build_weighted(int world, int components, int m, const std::vector<double>& weights) {
  Matrix owns(static_cast<size_t>(world), std::vector<bool>(static_cast<size_t>(components)));
  const std::vector<int> quota =
      weighted_quotas(components, static_cast<int64_t>(m) * world, weights);
  int64_t slot = 0;
  for (int rank = 0; rank < world; ++rank)
    for (int j = 0; j < quota[static_cast<size_t>(rank)]; ++j, ++slot)
      owns[static_cast<size_t>(rank)][static_cast<size_t>(slot % components)] = true;
  return owns;
}

uint64_t matrix_hash(const Matrix& owns) {
  uint64_t h = splitmix64(stable_hash("sdp.subnet_plan"));
  auto mix = [&h](uint64_t word) { h = splitmix64(h ^ word); };
  mix(owns.size());
  mix(owns.empty() ? 0 : owns[0].size());
  for (const auto& row : owns) {
    uint64_t word = 0;
    int bits = 0;
    for (bool b : row) {
      word |= static_cast<uint64_t>(b) << bits;
      if (++bits == 64) {
        mix(word);
        word = 0;
        bits = 0;
      }
    }
    mix(word);  // every row ends a word, so rows never run into each other
  }
  return h;
}

std::string join(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out;
}

}  // namespace

SubnetPlan SubnetPlan::build(const PlanRequest& q) {
  if (q.world < 1) fail("subnet plan: world = ", q.world, " is invalid (valid: >= 1 rank)");
  if (q.components < 1)
    fail("subnet plan: components = ", q.components,
         " is invalid (valid: >= 1 maskable component; a model with only shared components "
         "needs no plan)");
  if (!(q.active_fraction > 0 && q.active_fraction <= 1))
    fail("subnet plan: active_fraction C = ", q.active_fraction,
         " is invalid (valid: (0, 1]; C = 1 is DDP)");
  const int m = components_per_rank(q);
  if (q.construction == PlanConstruction::weighted) {
    if (static_cast<int>(q.rank_weights.size()) != q.world)
      fail("subnet plan: a weighted plan has ", q.rank_weights.size(), " rank weights for ",
           q.world, " ranks (valid: one per rank)");
    for (size_t i = 0; i < q.rank_weights.size(); ++i)
      if (!(q.rank_weights[i] > 0) || !std::isfinite(q.rank_weights[i]))
        fail("subnet plan: rank ", i, "'s weight ", q.rank_weights[i],
             " is invalid (valid: a finite number > 0)");
  }
  if (!q.classes.empty()) {
    if (static_cast<int>(q.classes.size()) != q.components)
      fail("subnet plan: ", q.classes.size(), " component classes for ", q.components,
           " components (valid: none, or one per component)");
    std::vector<bool> seen(q.classes.size(), false);
    for (int c : q.classes) {
      if (c < 0 || c >= q.components)
        fail("subnet plan: component class ", c, " is invalid (valid: 0 .. ", q.components - 1,
             ")");
      seen[static_cast<size_t>(c)] = true;
    }
    const int S = *std::max_element(q.classes.begin(), q.classes.end()) + 1;
    for (int c = 0; c < S; ++c)
      if (!seen[static_cast<size_t>(c)])
        fail("subnet plan: component class ", c, " has no component (valid: ids 0 .. S - 1, each used)");
  }
  // Built along the walk order, then each position's owners moved to its column.
  const Matrix walked = q.construction == PlanConstruction::cyclic
                            ? build_cyclic(q.world, q.components, m)
                        : q.construction == PlanConstruction::random
                            ? build_random(q.world, q.components, m, q.seed)
                            : build_weighted(q.world, q.components, m, q.rank_weights);
  const std::vector<int> order = walk_order(q.components, q.classes);
  Matrix owns(walked.size(), std::vector<bool>(static_cast<size_t>(q.components)));
  for (size_t i = 0; i < walked.size(); ++i)
    for (size_t p = 0; p < order.size(); ++p)
      owns[i][static_cast<size_t>(order[p])] = walked[i][p];
  cover_classes(owns, q.classes);
  join_parts(owns, q.classes);
  return SubnetPlan(std::move(owns), q.active_fraction,
                    std::string(plan_construction_name(q.construction)), q.seed, q.classes);
}

int SubnetPlan::per_rank(const PlanRequest& request) { return components_per_rank(request); }

SubnetPlan SubnetPlan::from_matrix(std::vector<std::vector<bool>> owns) {
  if (owns.empty())
    fail("subnet plan matrix has no ranks (valid: one row of components per rank, >= 1 row)");
  const size_t components = owns[0].size();
  if (components == 0) fail("subnet plan matrix has no components (valid: >= 1 column per row)");
  for (size_t i = 0; i < owns.size(); ++i)
    if (owns[i].size() != components)
      fail("subnet plan matrix is ragged: rank ", i, " has ", owns[i].size(),
           " components but rank 0 has ", components, " (valid: every row the same length)");
  std::vector<int> orphans;
  size_t owned = 0;
  for (size_t k = 0; k < components; ++k) {
    bool any = false;
    for (const auto& row : owns) {
      any = any || row[k];
      owned += row[k];
    }
    if (!any) orphans.push_back(static_cast<int>(k));
  }
  if (!orphans.empty())
    fail("subnet plan matrix: component", orphans.size() > 1 ? "s " : " ", join(orphans),
         orphans.size() > 1 ? " have" : " has",
         " no owner (valid: every component owned by at least one rank)");
  const double fraction =
      static_cast<double>(owned) / static_cast<double>(owns.size() * components);
  return SubnetPlan(std::move(owns), fraction, "matrix", 0);
}

SubnetPlan::SubnetPlan(std::vector<std::vector<bool>> owns, double active_fraction,
                       std::string construction, uint64_t seed, std::vector<int> classes) {
  auto s = std::make_shared<State>();
  s->owns = std::move(owns);
  s->active_fraction = active_fraction;
  s->classes = std::move(classes);
  s->construction = std::move(construction);
  s->seed = seed;
  const size_t components = s->owns[0].size();
  s->owners.resize(components);
  for (size_t i = 0; i < s->owns.size(); ++i)
    for (size_t k = 0; k < components; ++k)
      if (s->owns[i][k]) s->owners[k].push_back(static_cast<int>(i));

  std::map<std::vector<int>, int> index;  // ordered: set ids follow the sets' order
  for (const auto& set : s->owners) index.emplace(set, 0);
  for (auto& [set, id] : index) {
    id = static_cast<int>(s->owner_sets.size());
    s->owner_sets.push_back(set);
  }
  for (const auto& set : s->owners) s->owner_set_of.push_back(index.at(set));

  size_t owned = 0;
  for (const auto& set : s->owners) owned += set.size();
  s->held_fraction =
      static_cast<double>(owned) / static_cast<double>(s->owns.size() * components);
  s->spectral_gap = mask_graph_spectral_gap(s->owns);
  s->hash = matrix_hash(s->owns);
  s_ = std::move(s);
}

std::string SubnetPlan::cache_key(const PlanRequest& q) {
  std::string key = format("build:", plan_construction_name(q.construction), ":", q.world, ":",
                           q.components, ":", std::bit_cast<uint64_t>(q.active_fraction), ":",
                           q.seed, ":", q.per_rank, ":classes");
  for (int c : q.classes) {
    key += ',';
    key += std::to_string(c);
  }
  for (double w : q.rank_weights) {
    key += ':';
    key += std::to_string(std::bit_cast<uint64_t>(w));
  }
  return key;
}


SubnetPlan SubnetPlan::cached(const std::string& key, const std::function<SubnetPlan()>& make) {
  // Few entries: a process plans one job at a time, and a job asks for at
  // most one plan per strategy and pipeline stage, each many times in a row.
  constexpr size_t kept = 8;
  static std::mutex mutex;
  static std::list<std::pair<std::string, SubnetPlan>> recent;  // newest first
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (it->first == key) {
        recent.splice(recent.begin(), recent, it);
        return recent.front().second;
      }
  }
  // Built outside the lock: a failing request throws here and caches nothing.
  SubnetPlan plan = make();
  const std::lock_guard<std::mutex> lock(mutex);
  recent.emplace_front(key, plan);
  if (recent.size() > kept) recent.pop_back();
  return plan;
}

void SubnetPlan::check_rank(int rank) const {
  if (rank < 0 || rank >= world())
    fail("subnet plan: rank ", rank, " is out of range (valid: 0 .. ", world() - 1, ")");
}

void SubnetPlan::check_component(int component) const {
  if (component < 0 || component >= components())
    fail("subnet plan: component ", component, " is out of range (valid: 0 .. ", components() - 1,
         ")");
}

bool SubnetPlan::owns(int rank, int component) const {
  check_rank(rank);
  check_component(component);
  return s_->owns[static_cast<size_t>(rank)][static_cast<size_t>(component)];
}

const std::vector<int>& SubnetPlan::owners(int component) const {
  check_component(component);
  return s_->owners[static_cast<size_t>(component)];
}

std::vector<int> SubnetPlan::owned(int rank) const {
  check_rank(rank);
  std::vector<int> out;
  const auto& row = s_->owns[static_cast<size_t>(rank)];
  for (size_t k = 0; k < row.size(); ++k)
    if (row[k]) out.push_back(static_cast<int>(k));
  return out;
}

std::string SubnetPlan::coverage_warning(const std::vector<std::string>& component_names) const {
  const auto missing = uncovered();
  if (missing.empty()) return "";
  // A class named after its first component, less the group index.
  const auto class_name = [&](int cls) {
    for (int c = 0; c < components(); ++c)
      if (s_->classes[static_cast<size_t>(c)] == cls &&
          static_cast<int>(component_names.size()) == components()) {
        const std::string& name = component_names[static_cast<size_t>(c)];
        return name.substr(0, name.rfind('.'));
      }
    return "class " + std::to_string(cls);
  };
  std::string out = format("warning: ", missing.size(), " (rank, sublayer) pair",
                           missing.size() > 1 ? "s hold" : " holds",
                           " no component of a sublayer the rank runs (a rank holding fewer "
                           "components than sublayers cannot hold them all; a larger C can): ");
  const size_t shown = std::min<size_t>(missing.size(), 8);
  for (size_t i = 0; i < shown; ++i)
    out += format(i ? ", " : "", "rank ", missing[i].first, " ", class_name(missing[i].second));
  if (shown < missing.size()) out += ", ...";
  return out + "\n";
}

std::vector<std::pair<int, int>> SubnetPlan::uncovered() const {
  std::vector<std::pair<int, int>> out;
  if (s_->classes.empty()) return out;
  const int S = *std::max_element(s_->classes.begin(), s_->classes.end()) + 1;
  const auto count = class_counts(s_->owns, s_->classes, S);
  for (int i = 0; i < world(); ++i)
    for (int c = 0; c < S; ++c)
      if (count[static_cast<size_t>(i)][static_cast<size_t>(c)] == 0) out.emplace_back(i, c);
  return out;
}

int SubnetPlan::owner_set_of(int component) const {
  check_component(component);
  return s_->owner_set_of[static_cast<size_t>(component)];
}

std::string SubnetPlan::table(const std::vector<std::string>& component_names) const {
  if (!component_names.empty() && static_cast<int>(component_names.size()) != components())
    fail("subnet plan table: ", component_names.size(), " component names for ", components(),
         " components (valid: none, or one per component)");
  const int n = world(), k = components();
  std::vector<int> owned_count(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < k; ++c)
      owned_count[static_cast<size_t>(i)] += s_->owns[static_cast<size_t>(i)][static_cast<size_t>(c)];
  std::vector<int> owner_count;
  for (const auto& set : s_->owners) owner_count.push_back(static_cast<int>(set.size()));

  std::ostringstream os;
  os << "subnet plan: " << n << " ranks x " << k << " components, active fraction "
     << s_->active_fraction;
  // The C actually used, beside the one asked for, where rounding to whole
  // components per rank moved it.
  if (std::abs(s_->held_fraction - s_->active_fraction) > 1e-9)
    os << " (held " << s_->held_fraction << ")";
  os << ", " << s_->construction;
  if (s_->construction == "random") os << " (seed " << s_->seed << ")";
  os << "\n";

  // Column header: the component index written downwards, most significant
  // digit first, aligned with the matrix columns.
  const size_t width = std::to_string(n - 1).size();  // of the widest rank id
  const std::string rank_label_pad(std::string("rank ").size() + width + std::string(" | ").size(),
                                   ' ');
  const size_t digits = std::to_string(k - 1).size();
  for (size_t d = 0; d < digits; ++d) {
    std::string line = rank_label_pad;
    for (int c = 0; c < k; ++c) {
      const std::string id = std::to_string(c);
      const size_t pad = digits - id.size();
      line += d < pad ? ' ' : id[d - pad];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  for (int i = 0; i < n; ++i) {
    std::string id = std::to_string(i);
    os << "rank " << std::string(width - id.size(), ' ') << id << " | ";
    for (int c = 0; c < k; ++c)
      os << (s_->owns[static_cast<size_t>(i)][static_cast<size_t>(c)] ? '#' : '.');
    os << " | " << owned_count[static_cast<size_t>(i)] << "\n";
  }

  const auto [min_owned, max_owned] = std::minmax_element(owned_count.begin(), owned_count.end());
  os << "owned per rank: " << *min_owned;
  if (*max_owned != *min_owned) os << " .. " << *max_owned;
  os << " of " << k << "\n";
  const auto [min_owners, max_owners] = std::minmax_element(owner_count.begin(), owner_count.end());
  os << "owners per component: " << *min_owners;
  if (*max_owners != *min_owners) os << " .. " << *max_owners;
  os << " of " << n << "\n";
  os << "owner sets: " << s_->owner_sets.size() << " distinct (one collective each)\n";
  char gap[32];
  std::snprintf(gap, sizeof gap, "%.4f", s_->spectral_gap);
  os << "spectral gap: " << gap << "\n";

  std::vector<int> idle;
  for (int i = 0; i < n; ++i)
    if (owned_count[static_cast<size_t>(i)] == 0) idle.push_back(i);
  if (!idle.empty())
    os << "warning: rank" << (idle.size() > 1 ? "s " : " ") << join(idle)
       << (idle.size() > 1 ? " own" : " owns")
       << " no component and train only the shared parameters\n";

  os << coverage_warning(component_names);

  if (!component_names.empty()) {
    os << "components:";
    for (int c = 0; c < k; ++c)
      os << (c ? ", " : " ") << c << " = " << component_names[static_cast<size_t>(c)];
    os << "\n";
  }
  return os.str();
}

nlohmann::json SubnetPlan::to_json() const {
  nlohmann::json j;
  j["world"] = world();
  j["components"] = components();
  j["active_fraction"] = s_->active_fraction;
  j["held_fraction"] = s_->held_fraction;
  j["construction"] = s_->construction;
  if (!s_->classes.empty()) {
    nlohmann::json missing = nlohmann::json::array();
    for (const auto& [rank, cls] : uncovered()) missing.push_back({rank, cls});
    j["uncovered"] = missing;
  }
  if (s_->construction == "random") j["seed"] = s_->seed;
  std::vector<int> owners_per_component, owned_per_rank;
  for (const auto& set : s_->owners) owners_per_component.push_back(static_cast<int>(set.size()));
  std::vector<std::string> matrix;
  for (const auto& row : s_->owns) {
    std::string bits;
    for (bool b : row) bits += b ? '1' : '0';
    owned_per_rank.push_back(static_cast<int>(std::count(bits.begin(), bits.end(), '1')));
    matrix.push_back(std::move(bits));
  }
  j["owners_per_component"] = owners_per_component;
  j["owned_per_rank"] = owned_per_rank;
  j["owner_sets"] = s_->owner_sets.size();
  j["spectral_gap"] = s_->spectral_gap;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(s_->hash));
  j["hash"] = hex;  // a string: JSON readers may not hold 64-bit integers exactly
  j["matrix"] = matrix;
  return j;
}

}  // namespace sdp
