#include "comm/cuda/nccl_communicator.h"

#include <array>
#include <cstdio>
#include <cstring>

#include "comm/cuda/nccl_check.h"
#include "engine/core/device_stream.h"
#include "comm/deadline.h"
#include "comm/local_communicator.h"
#include "comm/local_rank.h"
#include "comm/mpi_runtime.h"
#if SDP_HAVE_MPI
#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"
#endif

namespace sdp::comm {

namespace {

ncclDataType_t nccl_reduce_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;
    case DType::u16: break;  // refused by Communicator before it gets here
  }
  fail("nccl: no reduction type for ", dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclAvg; }

bool on_host(const Tensor& t) { return t.device() == Device::cpu; }

// GPUs this process sees; fails, saying so, when it sees none (no driver
// counts as none: the message names CUDA's reason).
int visible_gpus(const std::string& rank_prefix) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices >= 1) return devices;
  (void)cudaGetLastError();  // leaves no error behind for later launch checks
  fail(rank_prefix, "the nccl backend needs a GPU; none is visible",
       status != cudaSuccess ? format(" (cudaGetDeviceCount: ", cudaGetErrorName(status), ", ",
                                      cudaGetErrorString(status), ")")
                             : std::string(),
       ". Without a GPU use the local, emulated or mpi backend; a job of several ranks is "
       "bootstrapped through MPI (mpirun, and an sdp::comm::MpiRuntime in main)");
}

// What a world is made of: the NCCL communicator and the host communicator
// of the same ranks, which carries the host buffers.
struct Bootstrap {
  ncclComm_t comm = nullptr;
  std::unique_ptr<Communicator> host;
};

#if SDP_HAVE_MPI
// The rank's GPU among those of its node: node-local rank % GPUs there
// (comm/local_rank.h; the node's ranks found through MPI).
void select_device(MPI_Comm world) {
  int world_rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &world_rank));
  const NodeLocalRank local = node_local_rank();
  const int devices = visible_gpus(format("[rank ", world_rank, "] "));
  CUDA_CHECK(cudaSetDevice(gpu_for_local_rank(local.rank, devices)));
}

// N ranks: rank 0 makes the id, MPI carries it to the others.
Bootstrap bootstrap_through_mpi(CommOptions options) {
  std::unique_ptr<MpiCommunicator> host = MpiCommunicator::world(options);
  // A barrier under the deadline first: once past it every rank is here, so
  // the blocking calls below (node split, ncclCommInitRank) cannot wait for
  // a missing peer. The GPU is chosen before NCCL touches CUDA.
  host->barrier();
  select_device(host->handle());

  // The id travels through the host communicator's broadcast (deadline too).
  ncclUniqueId id;
  std::array<int32_t, (sizeof id + 3) / 4> id_words{};  // [32]: the id's bytes
  if (host->rank() == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    std::memcpy(id_words.data(), &id, sizeof id);
  }
  Tensor id_view(id_words.data(), {static_cast<int64_t>(id_words.size())}, DType::i32,
                 Device::cpu);
  host->broadcast(id_view, 0);
  std::memcpy(&id, id_words.data(), sizeof id);

  Bootstrap b;
  NCCL_CHECK(ncclCommInitRank(&b.comm, host->size(), id, host->rank()));
  b.host = std::move(host);
  return b;
}
#endif

// One rank, no MPI: the id needs no travelling, host buffers go through the
// local communicator. The GPU is the calling thread's current one (0 unless
// the caller chose another).
Bootstrap bootstrap_one_rank(CommOptions options) {
  visible_gpus("");
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  Bootstrap b;
  NCCL_CHECK(ncclCommInitRank(&b.comm, 1, id, 0));
  b.host = std::make_unique<LocalCommunicator>(options);
  return b;
}

}  // namespace

std::unique_ptr<NcclCommunicator> NcclCommunicator::world(CommOptions options) {
  Bootstrap b;
#if SDP_HAVE_MPI
  if (MpiRuntime::initialized()) b = bootstrap_through_mpi(options);
#endif
  if (!b.comm) {
    // N processes each making a world of one would train N unrelated models.
    if (MpiRuntime::launched_by_mpi())
      fail("the nccl communicator of a job launched by mpirun is bootstrapped through MPI: "
           "create an sdp::comm::MpiRuntime in main before make_world(\"nccl\")",
           MpiRuntime::available() ? "" : " (this build has no MPI: rebuild where it is found)");
    b = bootstrap_one_rank(options);
  }
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
      b.comm, std::move(b.host), std::make_shared<CommStats>(), options));
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, std::unique_ptr<Communicator> host,
                                   std::shared_ptr<CommStats> stats, CommOptions options)
    : Communicator(host->rank(), host->size(), host->name(), host->world_ranks(),
                   std::move(stats), options),
      comm_(comm), host_(std::move(host)) {
  cudaError_t created = cudaStreamCreate(&stream_);
  if (created == cudaSuccess) created = cudaStreamCreate(&send_stream_);
  if (created == cudaSuccess) created = cudaStreamCreate(&recv_stream_);
  if (created == cudaSuccess)
    created = cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming);
  if (created == cudaSuccess)
    created = cudaEventCreateWithFlags(&received_, cudaEventDisableTiming);
  if (created != cudaSuccess) {
    release();
    CUDA_CHECK(created);
  }
}

// Every call waited for its stream, and every send's handle for its event
// (handles must not outlive the communicator), so nothing is in flight here.
NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  if (comm_) ncclCommDestroy(comm_);
  comm_ = nullptr;
  for (cudaEvent_t* event : {&compute_done_, &received_}) {
    if (*event) cudaEventDestroy(*event);
    *event = nullptr;
  }
  for (cudaStream_t* stream : {&stream_, &send_stream_, &recv_stream_}) {
    if (*stream) cudaStreamDestroy(*stream);
    *stream = nullptr;
  }
}

void NcclCommunicator::check_supported(Op op, const Tensor& buffer, bool reduces) const {
  if (host_->backend() == "mpi" && buffer.device() == Device::cpu && reduces &&
      buffer.dtype() == DType::bf16)
    fail(where(op), ": host buffers go through MPI, which cannot reduce bf16 (valid: f32, f64, "
         "i32); reduce in f32 or on the device");
}

void NcclCommunicator::wait(Op op, int64_t bytes) {
  wait_for([this] { return cudaStreamQuery(stream_); }, op_name(op), bytes);
}

void NcclCommunicator::wait_for(const std::function<cudaError_t()>& query, std::string_view op,
                                int64_t bytes) {
  cudaError_t state = cudaSuccess;
  ncclResult_t async = ncclSuccess;
  const WaitOutcome outcome = poll_until(
      [&] {
        state = query();
        if (state != cudaErrorNotReady) return true;
        NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
        return async != ncclSuccess;
      },
      options().timeout_seconds);
  if (!outcome) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
    end_job_after_timeout(world_rank(), op, name(), bytes, options().timeout_seconds, outcome);
  }
  if (async != ncclSuccess) {
    // The communicator is unusable after an asynchronous error, and its
    // peers would wait for this rank: end the job, as on a timeout.
    const std::string line = format("[rank ", world_rank(), "] ", op, " on group ", name(),
                                    " (", bytes, " bytes) failed in NCCL: ",
                                    ncclGetErrorString(async), "; ending the job\n");
    std::fputs(line.c_str(), stderr);
    ncclCommAbort(comm_);
    comm_ = nullptr;
    MpiRuntime::abort_job(1);
  }
  CUDA_CHECK(state);
}

void NcclCommunicator::do_all_reduce(Tensor& buffer, ReduceOp op) {
  if (on_host(buffer)) return host_->all_reduce(buffer, op);
  order_after_compute(stream_);
  NCCL_CHECK(ncclAllReduce(buffer.raw(), buffer.raw(), static_cast<size_t>(buffer.numel()),
                           nccl_reduce_type(buffer.dtype()), nccl_op(op), comm_, stream_));
  wait(Op::all_reduce, static_cast<int64_t>(buffer.bytes()));
}

void NcclCommunicator::do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  if (on_host(input)) return host_->reduce_scatter(input, output, op);
  order_after_compute(stream_);
  // In place when output is this rank's chunk of input, as NCCL defines it too.
  NCCL_CHECK(ncclReduceScatter(input.raw(), output.raw(), static_cast<size_t>(output.numel()),
                               nccl_reduce_type(input.dtype()), nccl_op(op), comm_, stream_));
  wait(Op::reduce_scatter, static_cast<int64_t>(input.bytes()));
}

// Moves that reduce nothing go as bytes, so every dtype travels.
void NcclCommunicator::do_all_gather(const Tensor& input, Tensor& output) {
  if (on_host(input)) return host_->all_gather(input, output);
  order_after_compute(stream_);
  NCCL_CHECK(ncclAllGather(input.raw(), output.raw(), input.bytes(), ncclUint8, comm_, stream_));
  wait(Op::all_gather, static_cast<int64_t>(output.bytes()));
}

void NcclCommunicator::do_broadcast(Tensor& buffer, int root) {
  if (on_host(buffer)) return host_->broadcast(buffer, root);
  order_after_compute(stream_);
  NCCL_CHECK(ncclBroadcast(buffer.raw(), buffer.raw(), buffer.bytes(), ncclUint8, root, comm_,
                           stream_));
  wait(Op::broadcast, static_cast<int64_t>(buffer.bytes()));
}

// Point-to-point calls run on streams of their own, one for sends and one
// for receives, so that a stage's pending send (which finishes only when
// its peer receives) never holds up its own receive, nor the other way
// round, and neither queues behind this group's collectives. Each call is
// its own NCCL group (ncclGroupStart/End), so NCCL matches it with the
// peer's call of the same kind in the order both were started.
void NcclCommunicator::do_send(const Tensor& buffer, int peer) {
  if (on_host(buffer)) return host_->send(buffer, peer);
  do_send_async(buffer, peer)->wait();
}

std::unique_ptr<PendingCollective> NcclCommunicator::do_send_async(const Tensor& buffer,
                                                                   int peer) {
  if (on_host(buffer)) return host_->send_async(buffer, peer);
  // The kernels that wrote the buffer have run before the send reads it.
  order_after_compute(send_stream_);
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(buffer.raw(), buffer.bytes(), ncclUint8, peer, comm_, send_stream_));
  NCCL_CHECK(ncclGroupEnd());
  // An event of its own per send: waiting for the whole send stream would
  // also wait for sends started later, whose receivers may not be there yet.
  cudaEvent_t sent = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&sent, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(sent, send_stream_);
  if (recorded != cudaSuccess) {
    cudaEventDestroy(sent);
    CUDA_CHECK(recorded);
  }
  const int64_t bytes = static_cast<int64_t>(buffer.bytes());
  return std::make_unique<DeferredCollective>([this, sent, peer, bytes] {
    // Destroying a recorded event is safe at once (CUDA frees it when it
    // completes); the wait ends the job rather than return unfinished.
    struct Release {
      cudaEvent_t event;
      ~Release() { cudaEventDestroy(event); }
    } release{sent};
    wait_for([sent] { return cudaEventQuery(sent); }, peer_op(Op::send, peer), bytes);
  });
}

void NcclCommunicator::do_recv(Tensor& buffer, int peer) {
  if (on_host(buffer)) return host_->recv(buffer, peer);
  // Kernels queued before this call may still read the buffer's old values.
  order_after_compute(recv_stream_);
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclRecv(buffer.raw(), buffer.bytes(), ncclUint8, peer, comm_, recv_stream_));
  NCCL_CHECK(ncclGroupEnd());
  // The compute stream reads the buffer only after the data has arrived,
  // which the event orders on the device; the host wait below puts the
  // receive under the deadline (a sender that never comes ends the job
  // instead of hanging the stream) and counts the time this stage waited.
  CUDA_CHECK(cudaEventRecord(received_, recv_stream_));
  CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(current_compute_stream()), received_, 0));
  wait_for([this] { return cudaEventQuery(received_); }, peer_op(Op::recv, peer),
           static_cast<int64_t>(buffer.bytes()));
}

// NCCL has no barrier: what this rank queued here (asynchronous all-reduces
// included) finishes first, then the host communicator's barrier.
void NcclCommunicator::do_barrier() {
  wait(Op::barrier, 0);
  host_->barrier();
}

void NcclCommunicator::order_after_compute(cudaStream_t stream) {
  // Kernels queued on the compute stream before this call wrote the buffers
  // the collective reads; the legacy default stream would order itself,
  // a stream of the trainer's own (non-blocking) must be waited for.
  CUDA_CHECK(cudaEventRecord(compute_done_, static_cast<cudaStream_t>(current_compute_stream())));
  CUDA_CHECK(cudaStreamWaitEvent(stream, compute_done_, 0));
}

// The handle's wait polls this communicator's stream under the deadline
// (ending the job on a timeout or an NCCL error, as a blocking call does);
// the stream runs its work in order, so that covers every earlier call too.
std::unique_ptr<PendingCollective> NcclCommunicator::do_all_reduce_async(Tensor& buffer,
                                                                         ReduceOp op) {
  if (on_host(buffer)) return host_->all_reduce_async(buffer, op);
  order_after_compute(stream_);
  NCCL_CHECK(ncclAllReduce(buffer.raw(), buffer.raw(), static_cast<size_t>(buffer.numel()),
                           nccl_reduce_type(buffer.dtype()), nccl_op(op), comm_, stream_));
  const int64_t bytes = static_cast<int64_t>(buffer.bytes());
  return std::make_unique<DeferredCollective>([this, bytes] { wait(Op::all_reduce, bytes); });
}

std::unique_ptr<PendingCollective> NcclCommunicator::do_all_gather_async(const Tensor& input,
                                                                         Tensor& output) {
  if (on_host(input)) return host_->all_gather_async(input, output);
  order_after_compute(stream_);
  NCCL_CHECK(ncclAllGather(input.raw(), output.raw(), input.bytes(), ncclUint8, comm_, stream_));
  const int64_t bytes = static_cast<int64_t>(output.bytes());
  return std::make_unique<DeferredCollective>([this, bytes] { wait(Op::all_gather, bytes); });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  // The host split first: it gathers every rank's color under the deadline,
  // so the blocking ncclCommSplit below finds every peer there.
  std::unique_ptr<Communicator> host_group = host_->split(color, key);
  ncclComm_t group = nullptr;
  NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &group, nullptr));
  if (color < 0) return nullptr;
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(group, std::move(host_group), shared_stats(), options()));
}

}  // namespace sdp::comm
