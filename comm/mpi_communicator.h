#pragma once
// The MPI backend: host buffers (the CPU engine's, and CI's multi-rank runs).
// Every collective starts in its non-blocking form and is waited for with
// the deadline of options().timeout_seconds; a call that misses it prints
// which op, group and rank and ends the whole job (deadline.h). Included
// only where SDP_HAVE_MPI is set.
#include <mpi.h>

#include "comm/communicator.h"

namespace sdp::comm {

class MpiCommunicator final : public Communicator {
 public:
  // The world: a duplicate of MPI_COMM_WORLD, so the engine's messages never
  // match anyone else's and errors are returned, not fatal. MPI must be
  // initialized (MpiRuntime). `stats` = nullptr makes fresh counters.
  static std::unique_ptr<MpiCommunicator> world(CommOptions options,
                                                std::shared_ptr<CommStats> stats = nullptr);
  ~MpiCommunicator() override;
  std::string_view backend() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }

 protected:
  void do_all_reduce(Tensor& buffer, ReduceOp op) override;
  // MPI_Iallreduce; the handle waits under the deadline and averages.
  std::unique_ptr<PendingCollective> do_all_reduce_async(Tensor& buffer, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, Tensor& output) override;
  // MPI_Iallgather; the handle waits under the deadline.
  std::unique_ptr<PendingCollective> do_all_gather_async(const Tensor& input,
                                                         Tensor& output) override;
  void do_broadcast(Tensor& buffer, int root) override;
  void do_send(const Tensor& buffer, int peer) override;
  // MPI_Isend; the handle waits (MPI_Test) under the deadline.
  std::unique_ptr<PendingCollective> do_send_async(const Tensor& buffer, int peer) override;
  void do_recv(Tensor& buffer, int peer) override;
  void do_barrier() override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  // Host buffers only (meta ones never get here); no bf16 reductions (MPI
  // has no bf16 type: reduce in f32).
  void check_supported(Op op, const Tensor& buffer, bool reduces) const override;

 private:
  MpiCommunicator(MPI_Comm comm, int rank, int size, std::string name,
                  std::vector<int> world_ranks, std::shared_ptr<CommStats> stats,
                  CommOptions options);
  // Starts MPI_Iallgather (in place when input is this rank's chunk).
  MPI_Request start_all_gather_request(const Tensor& input, Tensor& output);
  MPI_Request start_send(const Tensor& buffer, int peer);
  // Element count as MPI's int, refusing buffers beyond it.
  int count_of(Op op, const Tensor& t) const;
  // Waits for `request` until the deadline; on timeout ends the job.
  void wait(MPI_Request& request, std::string_view op, int64_t bytes,
            MPI_Status* status = MPI_STATUS_IGNORE) const;

  MPI_Comm comm_;
};

}  // namespace sdp::comm
