#include "engine/train/rank_agreement.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "models/common/tensor_staging.h"

namespace sdp {

namespace {

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// One 64-bit lane mixed per 8 bytes (multiply, rotate, multiply), then a
// final avalanche: fast enough to hash a billion parameters in seconds.
uint64_t hash_bytes(const unsigned char* p, size_t n, uint64_t seed) {
  constexpr uint64_t k1 = 0x9E3779B185EBCA87ULL, k2 = 0xC2B2AE3D27D4EB4FULL;
  uint64_t h = seed ^ (static_cast<uint64_t>(n) * k1);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h ^= rotl(w * k2, 31) * k1;
    h = rotl(h, 27) * k1 + 0x52DCE729;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < n; ++j) tail |= static_cast<uint64_t>(p[i + j]) << (8 * j);
  h ^= rotl(tail * k2, 31) * k1;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  return h ^ (h >> 33);
}

// Every rank's `mine` ([n] 64-bit words), gathered: [size][n].
std::vector<std::vector<uint64_t>> gather_words(comm::Communicator& world,
                                                const std::vector<uint64_t>& mine) {
  const size_t n = mine.size();
  // As pairs of 32-bit words, the unit of the host gathers.
  const std::vector<int32_t> all = comm::all_gather_host_words(
      world, {reinterpret_cast<const int32_t*>(mine.data()), 2 * n});  // [size * 2n]
  std::vector<std::vector<uint64_t>> by_rank(static_cast<size_t>(world.size()),
                                             std::vector<uint64_t>(n));
  for (size_t r = 0; r < by_rank.size(); ++r)
    std::memcpy(by_rank[r].data(), all.data() + r * 2 * n, n * sizeof(uint64_t));
  return by_rank;
}

std::string join(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string rank_list(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(ranks);
}

// Among `members` (world ranks), those whose word `at` differs from the first member's.
std::vector<int> differing(const std::vector<std::vector<uint64_t>>& by_rank,
                           const std::vector<int>& members, size_t at) {
  std::vector<int> out;
  for (int r : members)
    if (by_rank[static_cast<size_t>(r)][at] != by_rank[static_cast<size_t>(members[0])][at])
      out.push_back(r);
  return out;
}

void require_same_step(comm::Communicator& world, int64_t step) {
  const auto by_rank = gather_words(world, {static_cast<uint64_t>(step)});
  std::map<int64_t, std::vector<int>> ranks_at;  // step -> world ranks
  for (size_t r = 0; r < by_rank.size(); ++r)
    ranks_at[static_cast<int64_t>(by_rank[r][0])].push_back(world.world_ranks()[r]);
  if (ranks_at.size() == 1) return;
  std::string list;
  for (const auto& [s, ranks] : ranks_at)
    list += (list.empty() ? "" : "; ") + format("step ", s, " on ", rank_list(ranks));
  throw CollectiveError(format(
      "ranks resumed different checkpoints: ", list,
      ". Every rank must resume the same checkpoint (each rank reads --resume from its own "
      "working directory: give them all the same one)"));
}

}  // namespace

uint64_t tensor_content_hash(const Tensor& t, uint64_t seed) {
  if (t.device() == Device::meta || t.numel() == 0) return seed;
  if (t.device() == Device::cpu)
    return hash_bytes(static_cast<const unsigned char*>(t.raw()), t.bytes(), seed);
  OwnedTensor host(host_allocator(), t.shape(), t.dtype(), MemCategory::workspace);
  Tensor h = *host;
  stage_copy(t, h);
  return hash_bytes(static_cast<const unsigned char*>(h.raw()), h.bytes(), seed);
}

void require_same_group_sizes(comm::Communicator& world, const ParameterSet& params) {
  std::string sizes = format(params.group_count(), " groups, dtype ", dtype_name(params.dtype()), ";");
  for (int g = 0; g < params.group_count(); ++g) {
    const ParamGroupDecl& d = params.group_decl(g);
    sizes += format(d.name, ":", d.numel, "+", d.buffer_numel, ";");
  }
  comm::require_same_on_all_ranks(
      world,
      // Text that is the same on every rank: each throws the same message.
      "the storage groups' sizes (the buffers of the gradient reductions; do all ranks run "
      "the same build of sdp-train?)",
      sizes);
}

void require_same_resumed_state(comm::Communicator& world, const SubnetLayout& layout,
                                const TrainingState& state, int64_t step,
                                const nlohmann::json& data_state) {
  const ParameterSet& params = state.params();
  if (world.size() == 1) return;  // nobody to disagree with
  require_same_step(world, step);
  comm::require_same_on_all_ranks(
      world, "the resumed data position (the checkpoint's data source and stream position)",
      data_state.dump());

  // Per group two hashes: what every holder has (parameters as the forward
  // reads them, buffers) and what only owners have (master values, moments).
  const int groups = params.group_count();
  std::vector<uint64_t> mine(2 * static_cast<size_t>(groups), 0);
  for (int g = 0; g < groups; ++g) {
    const ParamGroupDecl& d = params.group_decl(g);
    const size_t at = 2 * static_cast<size_t>(g);
    // A sharded group's owners hold different shards: only its buffers
    // (whole everywhere) are compared.
    const bool sharded = state.group_shard(g).sharded();
    if (d.materialized) {
      uint64_t h = sharded ? 1 : tensor_content_hash(params.group_params(g), 1);
      if (d.buffer_numel > 0) h = tensor_content_hash(params.group_buffers(g), h);
      mine[at] = h;
    }
    if (d.trained && !sharded) {
      uint64_t h = tensor_content_hash(state.group_values(g), 2);
      h = tensor_content_hash(state.group_adam_m(g), h);
      mine[at + 1] = tensor_content_hash(state.group_adam_v(g), h);
    }
  }
  const auto by_rank = gather_words(world, mine);

  std::vector<std::string> problems;
  for (int g = 0; g < groups; ++g) {
    const StorageGroup& sg = layout.groups[static_cast<size_t>(g)];
    std::vector<int> holders = sg.owners;
    if (layout.spec.masking == Masking::backward) {
      holders.clear();
      for (int r = 0; r < layout.world; ++r) holders.push_back(r);
    }
    const std::string& decl_name = params.group_decl(g).name;
    const std::string name = decl_name == sg.name ? format("group ", sg.name)
                                                  : format("group ", decl_name, " (", sg.name, ")");
    if (const auto bad = differing(by_rank, holders, 2 * static_cast<size_t>(g)); !bad.empty())
      problems.push_back(format(name, ": the weights on ", rank_list(bad), " differ from rank ",
                                holders[0], "'s"));
    else if (const auto bad_owned = differing(by_rank, sg.owners, 2 * static_cast<size_t>(g) + 1);
             !bad_owned.empty())
      problems.push_back(format(name, ": the optimizer state on ", rank_list(bad_owned),
                                " differs from rank ", sg.owners[0], "'s"));
  }
  if (problems.empty()) return;
  std::string text;
  constexpr size_t kShown = 4;
  for (size_t i = 0; i < problems.size() && i < kShown; ++i) text += (i ? "; " : "") + problems[i];
  if (problems.size() > kShown) text += format("; and ", problems.size() - kShown, " more groups");
  throw CollectiveError(format(
      "ranks resumed different checkpoints of step ", step, ": ", text,
      " (compared by 64-bit hashes). Every rank must resume the same checkpoint (each rank "
      "reads --resume from its own working directory: give them all the same one)"));
}

}  // namespace sdp
