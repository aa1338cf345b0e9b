#include "comm/emulated_communicator.h"

#include <algorithm>
#include <numeric>

#include "comm/buffer_copy.h"

namespace sdp::comm {

namespace {
std::vector<int> all_ranks(int world_size) {
  SDP_CHECK(world_size >= 1, "emulated world size ", world_size, " is invalid (valid: >= 1)");
  std::vector<int> ranks(static_cast<size_t>(world_size));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

int checked_rank(int world_size, int rank) {
  SDP_CHECK(rank >= 0 && rank < world_size, "emulated rank ", rank,
            " is out of range for a world of ", world_size, " (valid: 0..", world_size - 1, ")");
  return rank;
}
}  // namespace

EmulatedCommunicator::EmulatedCommunicator(int world_size, int rank, CommOptions options)
    : Communicator(checked_rank(world_size, rank), world_size, "world", all_ranks(world_size),
                   std::make_shared<CommStats>(), options) {}

EmulatedCommunicator::EmulatedCommunicator(int rank, std::vector<int> world_ranks,
                                           std::shared_ptr<CommStats> stats,
                                           CommOptions options)
    // world_ranks is copied, not moved: its size is read in the same argument list.
    : Communicator(rank, static_cast<int>(world_ranks.size()), "", world_ranks,
                   std::move(stats), options) {}

void EmulatedCommunicator::do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp) {
  const auto* chunk = static_cast<const char*>(input.raw()) +
                      static_cast<size_t>(rank()) * output.bytes();
  copy_bytes(output.raw(), chunk, output.bytes(), output.device());
}

// Every chunk gets this rank's input, as if every peer held the same values:
// a gathered buffer is then defined everywhere (a transient one of a sharded
// model is freshly allocated, and its other chunks would be whatever the
// allocator's memory held, NaN patterns included), so an emulated rank's
// compute sees finite values and the same ones on every device.
void EmulatedCommunicator::do_all_gather(const Tensor& input, Tensor& output) {
  const size_t n = input.bytes();
  auto* out = static_cast<char*>(output.raw());
  // In place, the input is chunk rank(): written first, and never overwritten.
  copy_bytes(out + static_cast<size_t>(rank()) * n, input.raw(), n, output.device());
  const char* mine = out + static_cast<size_t>(rank()) * n;
  for (int r = 0; r < size(); ++r)
    if (r != rank()) copy_bytes(out + static_cast<size_t>(r) * n, mine, n, output.device());
}

std::unique_ptr<Communicator> EmulatedCommunicator::do_split(int color, int key) {
  fail("split(color ", color, ", key ", key, ") on group ", name(),
       ": the emulated backend cannot split by color, since one process cannot see the other "
       "ranks' colors; build the group with subgroup(members) instead");
}

std::unique_ptr<Communicator> EmulatedCommunicator::do_subgroup(const std::vector<int>& members) {
  const auto it = std::find(members.begin(), members.end(), rank());
  if (it == members.end()) return nullptr;
  std::vector<int> world;  // [members.size()]: the members' world ranks
  for (int m : members) world.push_back(world_ranks()[static_cast<size_t>(m)]);
  return std::unique_ptr<Communicator>(new EmulatedCommunicator(
      static_cast<int>(it - members.begin()), std::move(world), shared_stats(), options()));
}

}  // namespace sdp::comm
