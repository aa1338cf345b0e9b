#pragma once
// One rank of an N-rank job, alone in this process: every call is checked
// and counted exactly as a real N-rank backend counts it, but no data
// arrives from the (absent) peers. Dry runs and the memory/communication
// planner use it to report what rank r of a job would hold and send.
//
// Data: all_reduce and broadcast leave buffers as they are; reduce_scatter
// copies this rank's chunk of the input to the output; all_gather writes the
// input into every chunk of the output; send and recv move nothing. (As if
// every rank held the same values.)
//
// Groups: split(color, key) is refused (one process cannot see the other
// ranks' colors); subgroup(members) builds the group from the list.
#include "comm/communicator.h"

namespace sdp::comm {

class EmulatedCommunicator final : public Communicator {
 public:
  // Rank `rank` of a `world_size`-rank job.
  EmulatedCommunicator(int world_size, int rank, CommOptions options = {});
  std::string_view backend() const override { return "emulated"; }
  bool moves_data() const override { return false; }

 protected:
  void do_all_reduce(Tensor&, ReduceOp) override {}
  void do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, Tensor& output) override;
  void do_broadcast(Tensor&, int) override {}
  void do_send(const Tensor&, int) override {}
  void do_recv(Tensor&, int) override {}
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  std::unique_ptr<Communicator> do_subgroup(const std::vector<int>& members) override;

 private:
  EmulatedCommunicator(int rank, std::vector<int> world_ranks, std::shared_ptr<CommStats> stats,
                       CommOptions options);
};

}  // namespace sdp::comm
