#if SDP_HAVE_MPI
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "comm/deadline.h"
#include "comm/mpi_check.h"
#include "comm/mpi_runtime.h"

namespace sdp::comm {

namespace {

constexpr int kPointToPointTag = 0;  // send/recv pairs match in call order, per peer

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16:  // moved, never reduced (check_supported)
    case DType::u16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

// MPI has no average: sum, then divide by the group size here.
void divide_in_place(const Tensor& t, int divisor) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::f32) {
    float* p = t.data<float>();
    const auto d = static_cast<float>(divisor);
    for (int64_t i = 0; i < n; ++i) p[i] /= d;
  } else {
    SDP_CHECK(t.dtype() == DType::f64, "average of ", dtype_name(t.dtype()), " on the mpi backend");
    double* p = t.data<double>();
    const auto d = static_cast<double>(divisor);
    for (int64_t i = 0; i < n; ++i) p[i] /= d;
  }
}

}  // namespace

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(CommOptions options,
                                                        std::shared_ptr<CommStats> stats) {
  if (!MpiRuntime::initialized())
    fail("the mpi communicator needs MPI initialized: create an sdp::comm::MpiRuntime in main "
         "before make_world(\"mpi\"), and launch with mpirun");
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> world_ranks(static_cast<size_t>(size));
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  if (!stats) stats = std::make_shared<CommStats>();
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(
      comm, rank, size, "world", std::move(world_ranks), std::move(stats), options));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int rank, int size, std::string name,
                                 std::vector<int> world_ranks, std::shared_ptr<CommStats> stats,
                                 CommOptions options)
    : Communicator(rank, size, std::move(name), std::move(world_ranks), std::move(stats),
                   options),
      comm_(comm) {}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize every handle is gone already (a communicator that
  // outlived the MpiRuntime); freeing it then would be an error.
  if (comm_ != MPI_COMM_NULL && MpiRuntime::initialized()) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_supported(Op op, const Tensor& buffer, bool reduces) const {
  if (buffer.device() != Device::cpu && buffer.device() != Device::meta)
    fail(where(op), ": the mpi backend moves host buffers, got a ",
         device_name(buffer.device()), " buffer (use the nccl backend for device buffers)");
  if (reduces && buffer.dtype() == DType::bf16)
    fail(where(op), ": the mpi backend cannot reduce bf16 (valid: f32, f64, i32); reduce in f32");
}

int MpiCommunicator::count_of(Op op, const Tensor& t) const {
  if (t.numel() > INT_MAX)
    fail(where(op), ": ", t.numel(), " elements exceed the mpi backend's limit of ", INT_MAX,
         " per call; split the buffer");
  return static_cast<int>(t.numel());
}

void MpiCommunicator::wait(MPI_Request& request, std::string_view op, int64_t bytes,
                           MPI_Status* status) const {
  int done = 0;
  const WaitOutcome outcome = poll_until(
      [&] {
        MPI_CHECK(MPI_Test(&request, &done, status));
        return done != 0;
      },
      options().timeout_seconds);
  if (!outcome)
    end_job_after_timeout(MpiRuntime::rank(), op, name(), bytes, options().timeout_seconds,
                          outcome);
}

void MpiCommunicator::do_all_reduce(Tensor& buffer, ReduceOp op) {
  MPI_Request request;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw(), count_of(Op::all_reduce, buffer),
                           mpi_type(buffer.dtype()), MPI_SUM, comm_, &request));
  wait(request, op_name(Op::all_reduce), static_cast<int64_t>(buffer.bytes()));
  if (op == ReduceOp::average) divide_in_place(buffer, size());
}

std::unique_ptr<PendingCollective> MpiCommunicator::do_all_reduce_async(Tensor& buffer,
                                                                        ReduceOp op) {
  MPI_Request request;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.raw(), count_of(Op::all_reduce, buffer),
                           mpi_type(buffer.dtype()), MPI_SUM, comm_, &request));
  // Open MPI progresses it mostly inside MPI calls, so on the host it
  // advances at wait(); the code path is the device backend's real overlap.
  const int64_t bytes = static_cast<int64_t>(buffer.bytes());
  return std::make_unique<DeferredCollective>([this, request, buffer, op, bytes]() mutable {
    wait(request, op_name(Op::all_reduce), bytes);
    if (op == ReduceOp::average) divide_in_place(buffer, size());
  });
}

void MpiCommunicator::do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  const int n = count_of(Op::reduce_scatter, output);
  count_of(Op::reduce_scatter, input);
  char* chunk = static_cast<char*>(input.raw()) + static_cast<size_t>(rank()) * output.bytes();
  const bool in_place = output.raw() == chunk && output.bytes() > 0;
  MPI_Request request;
  if (in_place) {
    // MPI's in-place form leaves the result at the start of the input:
    // move it to this rank's chunk afterwards.
    MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, input.raw(), n, mpi_type(input.dtype()),
                                        MPI_SUM, comm_, &request));
  } else {
    MPI_CHECK(MPI_Ireduce_scatter_block(input.raw(), output.raw(), n, mpi_type(input.dtype()),
                                        MPI_SUM, comm_, &request));
  }
  wait(request, op_name(Op::reduce_scatter), static_cast<int64_t>(input.bytes()));
  if (in_place) std::memmove(chunk, input.raw(), output.bytes());
  if (op == ReduceOp::average) divide_in_place(output, size());
}

MPI_Request MpiCommunicator::start_all_gather_request(const Tensor& input, Tensor& output) {
  const int n = count_of(Op::all_gather, input);
  count_of(Op::all_gather, output);
  const char* chunk =
      static_cast<const char*>(output.raw()) + static_cast<size_t>(rank()) * input.bytes();
  const bool in_place = input.raw() == chunk && input.bytes() > 0;
  MPI_Request request;
  MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.raw(), n, mpi_type(input.dtype()),
                           output.raw(), n, mpi_type(output.dtype()), comm_, &request));
  return request;
}

void MpiCommunicator::do_all_gather(const Tensor& input, Tensor& output) {
  MPI_Request request = start_all_gather_request(input, output);
  wait(request, op_name(Op::all_gather), static_cast<int64_t>(output.bytes()));
}

std::unique_ptr<PendingCollective> MpiCommunicator::do_all_gather_async(const Tensor& input,
                                                                        Tensor& output) {
  MPI_Request request = start_all_gather_request(input, output);
  const int64_t bytes = static_cast<int64_t>(output.bytes());
  return std::make_unique<DeferredCollective>([this, request, bytes]() mutable {
    wait(request, op_name(Op::all_gather), bytes);
  });
}

void MpiCommunicator::do_broadcast(Tensor& buffer, int root) {
  MPI_Request request;
  MPI_CHECK(MPI_Ibcast(buffer.raw(), count_of(Op::broadcast, buffer), mpi_type(buffer.dtype()),
                       root, comm_, &request));
  wait(request, op_name(Op::broadcast), static_cast<int64_t>(buffer.bytes()));
}

// The deadline messages name the peer (Communicator::peer_op, by world
// rank): a pipeline stage waits on one neighbour, and which one is what a
// hang report must say.
MPI_Request MpiCommunicator::start_send(const Tensor& buffer, int peer) {
  MPI_Request request;
  MPI_CHECK(MPI_Isend(buffer.raw(), count_of(Op::send, buffer), mpi_type(buffer.dtype()), peer,
                      kPointToPointTag, comm_, &request));
  return request;
}

void MpiCommunicator::do_send(const Tensor& buffer, int peer) {
  MPI_Request request = start_send(buffer, peer);
  wait(request, peer_op(Op::send, peer), static_cast<int64_t>(buffer.bytes()));
}

// One tag for every send: MPI matches messages of one (source, tag,
// communicator) in the order they were started, which is the order
// Communicator::send_async promises. A large message goes by rendezvous,
// so it moves only while both ranks make MPI calls; the receiver's recv
// and the handle's wait (MPI_Test) are such calls.
std::unique_ptr<PendingCollective> MpiCommunicator::do_send_async(const Tensor& buffer,
                                                                  int peer) {
  MPI_Request request = start_send(buffer, peer);
  const int64_t bytes = static_cast<int64_t>(buffer.bytes());
  return std::make_unique<DeferredCollective>([this, request, peer, bytes]() mutable {
    wait(request, peer_op(Op::send, peer), bytes);
  });
}

void MpiCommunicator::do_recv(Tensor& buffer, int peer) {
  const int expected = count_of(Op::recv, buffer);
  MPI_Request request;
  MPI_CHECK(MPI_Irecv(buffer.raw(), expected, mpi_type(buffer.dtype()), peer, kPointToPointTag,
                      comm_, &request));
  MPI_Status status;
  wait(request, peer_op(Op::recv, peer), static_cast<int64_t>(buffer.bytes()), &status);
  // A longer message fails inside MPI (truncation); a shorter one is caught here.
  int received = 0;
  MPI_CHECK(MPI_Get_count(&status, mpi_type(buffer.dtype()), &received));
  if (received != expected)
    fail(where(Op::recv), ": expected ", expected, " ", dtype_name(buffer.dtype()),
         " elements from ", peer_name(peer), ", received ", received,
         " (send and recv must use the same shape)");
}

void MpiCommunicator::do_barrier() {
  MPI_Request request;
  MPI_CHECK(MPI_Ibarrier(comm_, &request));
  wait(request, op_name(Op::barrier), 0);
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  // Every rank's (color, key) first, through a collective that honours the
  // deadline (MPI_Comm_split blocks without one; once everyone got here it
  // cannot hang), and which also gives the members' world ranks.
  const int my_color = color < 0 ? -1 : color;
  const int mine[2] = {my_color, key};  // [2]: color, key
  std::vector<int> all(static_cast<size_t>(size()) * 2);  // [size * 2]
  MPI_Request request;
  MPI_CHECK(MPI_Iallgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm_, &request));
  wait(request, "split", static_cast<int64_t>(all.size() * sizeof(int)));

  MPI_Comm child = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child));
  if (color < 0) return nullptr;
  MPI_CHECK(MPI_Comm_set_errhandler(child, MPI_ERRORS_RETURN));

  // Members in MPI_Comm_split's order: by key, then by rank here.
  std::vector<int> members;  // ranks of this communicator
  for (int r = 0; r < size(); ++r)
    if (all[static_cast<size_t>(r) * 2] == my_color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a) * 2 + 1] < all[static_cast<size_t>(b) * 2 + 1];
  });
  std::vector<int> world;  // [members.size()]
  for (int m : members) world.push_back(world_ranks()[static_cast<size_t>(m)]);
  int child_rank = 0, child_size = 0;
  MPI_CHECK(MPI_Comm_rank(child, &child_rank));
  MPI_CHECK(MPI_Comm_size(child, &child_size));
  SDP_CHECK(child_size == static_cast<int>(members.size()) &&
                members[static_cast<size_t>(child_rank)] == rank(),
            "MPI_Comm_split gave rank ", child_rank, " of ", child_size,
            ", which disagrees with the gathered colors and keys");
  return std::unique_ptr<Communicator>(new MpiCommunicator(
      child, child_rank, child_size, "", std::move(world), shared_stats(), options()));
}

}  // namespace sdp::comm
#endif  // SDP_HAVE_MPI
