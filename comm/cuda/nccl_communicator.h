#pragma once
// The NCCL backend: device buffers (Device::cuda); host buffers of the same
// calls go through the host communicator of the same group (MPI's, or the
// local one in a world of one rank), so host-side checks
// (require_same_on_all_ranks, checksums) work on it too.
//
// Bootstrap: when MPI is initialized (SDP_HAVE_MPI and an MpiRuntime), rank
// 0 makes the ncclUniqueId and broadcasts it through MPI; otherwise the
// world is one rank on the current GPU (no MPI needed: a single GPU
// machine), and a process launched by mpirun without MpiRuntime is refused.
// Groups come from ncclCommSplit. One CUDA stream per communicator for the
// collectives, and one each for sends and receives (below); before
// each call it waits (an event) for the work queued so far on the thread's
// compute stream (engine/core/device_stream.h), so the kernels that wrote a
// buffer have run before the collective reads it. Every blocking call waits
// for its stream (cudaStreamQuery polled up to the deadline of
// options().timeout_seconds); all_reduce_async and all_gather_async return
// at once and their handles wait the same way. That host wait is also what
// orders the result before its readers: the kernels that read a gathered
// buffer are queued on the compute stream after wait() has returned, when
// the collective has finished on the device, and a buffer is freed (its
// memory handed out again) only after that wait too. (An event recorded
// here and waited for by the compute stream would let the host run further
// ahead, but would leave a collective that never finishes to the next
// blocking call's deadline, and count no waiting time.) On timeout or an
// asynchronous NCCL error the NCCL communicator is aborted and the job ends.
//
// Several group communicators may have all-reduces in flight at once
// (gradient buckets of different owner sets), each on its own stream, and
// ranks may start them in different orders: each NCCL kernel needs only its
// own group's peers, which run on their own streams, so none waits behind
// another group's kernel. A job that sees a hang there can run with
// --bucket-mb 0 (every reduction after backward, in group order).
//
// Point-to-point (pipeline stages): sends run on a send stream and receives
// on a receive stream, both apart from the compute stream and from the
// collectives' stream, so a stage's pending send never waits behind its own
// receive or the other way round. Each is one NCCL group call. A send
// starts after the compute stream's work so far (an event) and returns at
// once in send_async; its handle waits, under the deadline, for an event
// recorded after that send alone. A receive makes the compute stream wait
// for its data (an event) and then waits on the host, under the deadline,
// so a missing sender ends the job. The deadline messages name the peer
// ("send to rank 1"). Device buffers of a send must stay unchanged until
// its handle's wait(), and handles must not outlive the communicator.
#include <functional>
#include <string>
#include <string_view>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/communicator.h"

namespace sdp::comm {

class NcclCommunicator final : public Communicator {
 public:
  // With MPI initialized (MpiRuntime): every rank of MPI_COMM_WORLD, each
  // on GPU node-local rank % (GPUs on the node), selected for the calling
  // thread before anything is created. Without: a world of one rank on the
  // calling thread's current GPU. Fails with a message when no GPU is
  // visible.
  static std::unique_ptr<NcclCommunicator> world(CommOptions options);
  ~NcclCommunicator() override;
  std::string_view backend() const override { return "nccl"; }
  cudaStream_t stream() const { return stream_; }

 protected:
  void do_all_reduce(Tensor& buffer, ReduceOp op) override;
  // Queued after the compute stream's work and returned at once: the
  // reduction runs on this communicator's stream beside compute.
  std::unique_ptr<PendingCollective> do_all_reduce_async(Tensor& buffer, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) override;
  void do_all_gather(const Tensor& input, Tensor& output) override;
  // Queued like do_all_reduce_async: a sharded model's next parameters
  // arrive on this communicator's stream while compute goes on.
  std::unique_ptr<PendingCollective> do_all_gather_async(const Tensor& input,
                                                         Tensor& output) override;
  void do_broadcast(Tensor& buffer, int root) override;
  void do_send(const Tensor& buffer, int peer) override;
  // Queued on the send stream and returned at once (see above).
  std::unique_ptr<PendingCollective> do_send_async(const Tensor& buffer, int peer) override;
  void do_recv(Tensor& buffer, int peer) override;
  void do_barrier() override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  // cuda and host buffers; host reductions through MPI refuse bf16.
  void check_supported(Op op, const Tensor& buffer, bool reduces) const override;

 private:
  // Rank, size and world ranks are those of `host`, the MPI (or local)
  // communicator of the same group, whose counters are its own: the calls it
  // carries for this communicator are counted once, here.
  NcclCommunicator(ncclComm_t comm, std::unique_ptr<Communicator> host,
                   std::shared_ptr<CommStats> stats, CommOptions options);
  // Waits for this communicator's stream; on timeout or an NCCL error ends the job.
  void wait(Op op, int64_t bytes);
  // Polls `query` (cudaStreamQuery or cudaEventQuery of what was queued)
  // until it is no longer cudaErrorNotReady; on timeout or an NCCL error
  // ends the job naming `op`.
  void wait_for(const std::function<cudaError_t()>& query, std::string_view op, int64_t bytes);
  // Makes `stream` wait for the work queued so far on the thread's compute
  // stream (engine/core/device_stream.h).
  void order_after_compute(cudaStream_t stream);
  // Destroys the NCCL communicator, events and streams that exist.
  void release();

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;       // collectives
  cudaStream_t send_stream_ = nullptr;  // ncclSend
  cudaStream_t recv_stream_ = nullptr;  // ncclRecv
  cudaEvent_t compute_done_ = nullptr;  // recorded on the compute stream before each call
  cudaEvent_t received_ = nullptr;      // recorded on the receive stream after each recv
  std::unique_ptr<Communicator> host_;
};

}  // namespace sdp::comm
