#include "comm/local_communicator.h"

#include "comm/buffer_copy.h"

namespace sdp::comm {

LocalCommunicator::LocalCommunicator(CommOptions options)
    : Communicator(0, 1, "world", {0}, std::make_shared<CommStats>(), options) {}

LocalCommunicator::LocalCommunicator(std::vector<int> world_ranks,
                                     std::shared_ptr<CommStats> stats, CommOptions options)
    : Communicator(0, 1, "", std::move(world_ranks), std::move(stats), options) {}

void LocalCommunicator::do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp) {
  copy_bytes(output.raw(), input.raw(), output.bytes(), output.device());
}

void LocalCommunicator::do_all_gather(const Tensor& input, Tensor& output) {
  copy_bytes(output.raw(), input.raw(), input.bytes(), output.device());
}

void LocalCommunicator::do_send(const Tensor&, int) {
  fail(where(Op::send), ": a world of one rank has no peer to send to");
}

void LocalCommunicator::do_recv(Tensor&, int) {
  fail(where(Op::recv), ": a world of one rank has no peer to receive from");
}

std::unique_ptr<Communicator> LocalCommunicator::do_split(int color, int) {
  if (color < 0) return nullptr;
  return std::unique_ptr<Communicator>(
      new LocalCommunicator(world_ranks(), shared_stats(), options()));
}

}  // namespace sdp::comm
