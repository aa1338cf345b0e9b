#pragma once
// The world of one process: every collective's result is its input (a sum or
// average over one rank), so single-process runs and unit tests go through
// the same calls, and counters, as multi-rank runs (which count 0 bytes sent
// in a group of 1).
#include "comm/communicator.h"

namespace sdp::comm {

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(CommOptions options = {});
  std::string_view backend() const override { return "local"; }

 protected:
  void do_all_reduce(Tensor&, ReduceOp) override {}
  void do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, Tensor& output) override;
  void do_broadcast(Tensor&, int) override {}
  // Unreachable: the only peer of a world of one is itself, which the
  // public send/recv refuse.
  void do_send(const Tensor&, int) override;
  void do_recv(Tensor&, int) override;
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  LocalCommunicator(std::vector<int> world_ranks, std::shared_ptr<CommStats> stats,
                    CommOptions options);
};

}  // namespace sdp::comm
