// The emulated NCCL's point-to-point calls and groups, communicator setup
// (split, a world of one rank, abort), and the refusals: every unsupported
// or invalid call fails with a status and a message naming the value.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"
#include "test/cuda_emulator/mpi/nccl_test_support.h"

using namespace nccl_test;
using Catch::Matchers::Contains;

namespace {

std::vector<uint8_t> pattern(int rank, size_t n, int round) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((rank * 31 + round * 7 + static_cast<int>(i)) & 0xff);
  return v;
}

// The call's status and the message ncclGetLastError then holds.
struct Refusal {
  ncclResult_t status;
  std::string message;
};

Refusal refusal(ncclResult_t status) { return {status, ncclGetLastError(nullptr)}; }

}  // namespace

TEST_CASE("sends and receives in a ring inside a group", "[p2p]") {
  Comm world(world_comm());
  const int rank = world_rank(), size = world_size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  // 1000 bytes, and 1 MiB (past MPI's eager limit, where a send completes
  // only once its receiver is there).
  for (const size_t n : {size_t{1000}, size_t{1} << 20}) {
    INFO(n << " bytes");
    SECTION("send and receive on one stream, one group") {
      Stream stream;
      DeviceArray<uint8_t> out(n), in(n);
      out.upload(pattern(rank, n, 0));
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(out.ptr, n, ncclUint8, next, world, stream));
      NCCL_OK(ncclRecv(in.ptr, n, ncclUint8, prev, world, stream));
      NCCL_OK(ncclGroupEnd());
      stream.sync();
      CHECK_SAME(in.download(), pattern(prev, n, 0));
    }
    SECTION("send and receive on streams of their own, nested groups") {
      // A group on several streams is one operation on all of them (NCCL's
      // CUDA stream semantics): the send on the send stream reads what the
      // receive stream wrote before the group, and the receive stream's work
      // after the group sees the whole group finished. Without those joins
      // the runtime's stream-order checker reports a race (the emulator runs
      // the group on the stream of its first call, here the send stream).
      Stream send_stream, recv_stream;
      DeviceArray<uint8_t> source(n), out(n), in(n);
      source.upload(pattern(rank, n, 1));
      out.upload(std::vector<uint8_t>(n, 0));
      CUDA_OK(cudaMemcpyAsync(out.ptr, source.ptr, n, cudaMemcpyDeviceToDevice, recv_stream));
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclSend(out.ptr, n, ncclUint8, next, world, send_stream));
      NCCL_OK(ncclGroupEnd());  // inner: nothing starts yet
      NCCL_OK(ncclRecv(in.ptr, n, ncclUint8, prev, world, recv_stream));
      NCCL_OK(ncclGroupEnd());
      std::vector<uint8_t> got(n, 0);
      CUDA_OK(cudaMemcpyAsync(got.data(), in.ptr, n, cudaMemcpyDeviceToHost, recv_stream));
      recv_stream.sync();
      CHECK_SAME(got, pattern(prev, n, 1));
      send_stream.sync();
    }
    SECTION("an inner ncclGroupEnd starts nothing") {
      Stream stream;
      DeviceArray<uint8_t> out(n), in(n);
      out.upload(pattern(rank, n, 4));
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclGroupStart());
      NCCL_OK(ncclRecv(in.ptr, n, ncclUint8, prev, world, stream));
      NCCL_OK(ncclGroupEnd());
      CHECK(cudaStreamQuery(stream) == cudaSuccess);  // nothing queued on it yet
      NCCL_OK(ncclSend(out.ptr, n, ncclUint8, next, world, stream));
      NCCL_OK(ncclGroupEnd());
      stream.sync();
      CHECK_SAME(in.download(), pattern(prev, n, 4));
    }
    SECTION("two rounds each in its own group match in call order") {
      Stream send_stream, recv_stream;
      DeviceArray<uint8_t> out0(n), out1(n), in0(n), in1(n);
      out0.upload(pattern(rank, n, 2));
      out1.upload(pattern(rank, n, 3));
      for (int round = 0; round < 2; ++round) {
        NCCL_OK(ncclGroupStart());
        NCCL_OK(ncclSend((round ? out1 : out0).ptr, n, ncclUint8, next, world, send_stream));
        NCCL_OK(ncclGroupEnd());
      }
      for (int round = 0; round < 2; ++round) {
        NCCL_OK(ncclGroupStart());
        NCCL_OK(ncclRecv((round ? in1 : in0).ptr, n, ncclUint8, prev, world, recv_stream));
        NCCL_OK(ncclGroupEnd());
      }
      recv_stream.sync();
      send_stream.sync();
      CHECK_SAME(in0.download(), pattern(prev, n, 2));
      CHECK_SAME(in1.download(), pattern(prev, n, 3));
    }
  }
}

TEST_CASE("split communicators run their collectives independently", "[split]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  std::vector<int> even, odd;
  for (int r = 0; r < size; ++r) (r % 2 ? odd : even).push_back(r);

  SECTION("even and odd ranks, ordered by key") {
    ncclComm_t group = nullptr;
    NCCL_OK(ncclCommSplit(world, rank % 2, rank, &group, nullptr));
    Comm owned(group);
    REQUIRE(group != nullptr);
    const std::vector<int>& members = rank % 2 ? odd : even;
    // Different counts per group: a collective that crossed groups would
    // fail or mix them.
    const size_t n = rank % 2 ? 5 : 3;
    DeviceArray<int32_t> sum(n), gathered(members.size());
    sum.upload(std::vector<int32_t>(n, rank + 1));
    DeviceArray<int32_t> me(1);
    me.upload({rank});
    NCCL_OK(ncclAllReduce(sum.ptr, sum.ptr, n, ncclInt32, ncclSum, group, stream));
    NCCL_OK(ncclAllGather(me.ptr, gathered.ptr, 1, ncclInt32, group, stream));
    stream.sync();
    int32_t expected = 0;
    for (int r : members) expected += r + 1;
    CHECK_SAME(sum.download(), std::vector<int32_t>(n, expected));
    CHECK_SAME(gathered.download(), std::vector<int32_t>(members.begin(), members.end()));
  }
  SECTION("keys in reverse order reverse the ranks") {
    ncclComm_t group = nullptr;
    NCCL_OK(ncclCommSplit(world, 0, size - rank, &group, nullptr));
    Comm owned(group);
    DeviceArray<int32_t> me(1), gathered(static_cast<size_t>(size));
    me.upload({rank});
    NCCL_OK(ncclAllGather(me.ptr, gathered.ptr, 1, ncclInt32, group, stream));
    stream.sync();
    std::vector<int32_t> reversed;
    for (int r = size - 1; r >= 0; --r) reversed.push_back(r);
    CHECK_SAME(gathered.download(), reversed);
  }
  SECTION("NCCL_SPLIT_NOCOLOR gives no communicator") {
    ncclComm_t group = reinterpret_cast<ncclComm_t>(0x1);
    NCCL_OK(ncclCommSplit(world, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, rank, &group, nullptr));
    Comm owned(group);
    if (rank == 0) {
      CHECK(group == nullptr);
    } else {
      REQUIRE(group != nullptr);
      DeviceArray<int32_t> one(1);
      one.upload({1});
      NCCL_OK(ncclAllReduce(one.ptr, one.ptr, 1, ncclInt32, ncclSum, group, stream));
      stream.sync();
      CHECK_SAME(one.download(), std::vector<int32_t>{size - 1});
    }
  }
}

TEST_CASE("a communicator of one rank copies locally", "[local]") {
  // Each rank makes its own world of one (as a single-GPU run does, with no
  // MPI): every operation leaves the one rank's data.
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t one = nullptr;
  NCCL_OK(ncclCommInitRank(&one, 1, id, 0));
  Comm owned(one);
  Stream stream;
  const size_t n = 33;
  const std::vector<float> mine = values(world_rank(), n);
  DeviceArray<float> a(n), b(n);
  a.upload(mine);
  for (const ncclRedOp_t op : {ncclSum, ncclAvg}) {
    b.upload(std::vector<float>(n, -7.0f));
    NCCL_OK(ncclAllReduce(a.ptr, b.ptr, n, ncclFloat32, op, one, stream));
    stream.sync();
    CHECK_SAME(b.download(), mine);
  }
  b.upload(std::vector<float>(n, -7.0f));
  NCCL_OK(ncclAllGather(a.ptr, b.ptr, n, ncclFloat32, one, stream));
  stream.sync();
  CHECK_SAME(b.download(), mine);
  b.upload(std::vector<float>(n, -7.0f));
  NCCL_OK(ncclReduceScatter(a.ptr, b.ptr, n, ncclFloat32, ncclAvg, one, stream));
  stream.sync();
  CHECK_SAME(b.download(), mine);
  b.upload(std::vector<float>(n, -7.0f));
  NCCL_OK(ncclBroadcast(a.ptr, b.ptr, n, ncclFloat32, 0, one, stream));
  stream.sync();
  CHECK_SAME(b.download(), mine);

  ncclComm_t group = nullptr;
  NCCL_OK(ncclCommSplit(one, 0, 0, &group, nullptr));
  Comm owned_group(group);
  REQUIRE(group != nullptr);
  ncclComm_t none = reinterpret_cast<ncclComm_t>(0x1);
  NCCL_OK(ncclCommSplit(one, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr));
  CHECK(none == nullptr);

  const Refusal self = refusal(ncclSend(a.ptr, n, ncclFloat32, 0, one, stream));
  CHECK(self.status == ncclInvalidUsage);
  CHECK_THAT(self.message, Contains("communicator of one rank"));
  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(one, &async));
  CHECK(async == ncclSuccess);
}

TEST_CASE("calls outside what the engine uses are refused, naming the value", "[refused]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  DeviceArray<float> buffer(64);
  buffer.upload(std::vector<float>(64, 1.0f));

  Refusal r =
      refusal(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclProd, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(
      r.message,
      Contains("ncclAllReduce: op = ncclProd (1) is not emulated (valid: ncclSum, ncclAvg)"));

  r = refusal(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclUint8, ncclSum, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("datatype = ncclUint8 (1) is not emulated for reductions"));

  r = refusal(ncclAllGather(buffer.ptr, buffer.ptr + 32, 2, ncclFloat16, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(
      r.message,
      Contains("ncclAllGather: datatype = ncclFloat16 (6) is not emulated (valid: ncclUint8"));

  r = refusal(ncclBroadcast(buffer.ptr, buffer.ptr, 4, ncclFloat32, size, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("root = " + std::to_string(size) + " is invalid (valid: 0 to " +
                                 std::to_string(size - 1)));

  r = refusal(ncclSend(buffer.ptr, 4, ncclFloat32, -1, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("ncclSend: peer = -1 is invalid"));

  std::vector<float> host(4, 0.0f);
  r = refusal(ncclAllReduce(host.data(), host.data(), 4, ncclFloat32, ncclSum, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("ncclAllReduce: sendbuff: ") && Contains("is not device memory"));

  r = refusal(ncclAllReduce(buffer.ptr, buffer.ptr + 2, 4, ncclFloat32, ncclSum, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("recvbuff overlaps sendbuff without being it"));

  r = refusal(ncclAllReduce(buffer.ptr, buffer.ptr, 65, ncclFloat32, ncclSum, world, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("past the end of its allocation"));

  r = refusal(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclSum, nullptr, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("ncclAllReduce: comm is NULL"));

  r = refusal(ncclGroupEnd());
  CHECK(r.status == ncclInvalidUsage);
  CHECK_THAT(r.message, Contains("ncclGroupEnd: no ncclGroupStart to end"));

  {
    // A refused call fails its group: nothing of it runs (every rank alike).
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclSum, world, stream));
    CHECK(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclMax, world, stream) ==
          ncclInvalidArgument);
    r = refusal(ncclGroupEnd());
    CHECK(r.status == ncclInvalidArgument);
    CHECK_THAT(r.message, Contains("ncclGroupEnd: nothing in the group was started") &&
                              Contains("ncclMax (2)"));
    stream.sync();
    CHECK_SAME(buffer.download(), std::vector<float>(64, 1.0f));
  }

  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(world, &async));
  CHECK(async == ncclSuccess);

  // Setup: a subset of the job, or more ranks than it has.
  ncclComm_t comm = nullptr;
  r = refusal(ncclCommInitRank(&comm, size + 1, shared_id(), rank));
  CHECK(r.status == ncclInvalidUsage);
  CHECK_THAT(r.message,
             Contains("is more than the " + std::to_string(size) + " ranks of MPI_COMM_WORLD"));
  if (size > 2) {
    r = refusal(ncclCommInitRank(&comm, size - 1, shared_id(), rank % (size - 1)));
    CHECK(r.status == ncclInvalidUsage);
    CHECK_THAT(r.message, Contains("is a subset of the " + std::to_string(size) +
                                   " ranks of MPI_COMM_WORLD") &&
                              Contains("ncclCommSplit"));
  }
  ncclUniqueId id{};
  r = refusal(ncclCommInitRank(&comm, size, id, rank));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("commId was not made by ncclGetUniqueId"));
  // Every rank learns of a disagreement, so none hangs.
  NCCL_OK(ncclGetUniqueId(&id));  // each rank its own
  r = refusal(ncclCommInitRank(&comm, size, id, rank));
  CHECK(r.status == ncclInvalidUsage);
  CHECK_THAT(r.message, Contains("the ranks were given different commIds"));
  r = refusal(ncclCommInitRank(&comm, size, shared_id(), 0));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("two ranks passed the same rank"));
  CHECK(comm == nullptr);

  // A split refused on one rank: that rank joins as no color, the others
  // get their group.
  ncclComm_t group = nullptr;
  const ncclResult_t split = ncclCommSplit(world, rank == 0 ? -5 : 0, rank, &group, nullptr);
  Comm owned(group);
  if (rank == 0) {
    CHECK(split == ncclInvalidArgument);
    CHECK_THAT(
        std::string(ncclGetLastError(nullptr)),
        Contains("ncclCommSplit: color = -5 is invalid (valid: >= 0, or NCCL_SPLIT_NOCOLOR"));
    CHECK(group == nullptr);
  } else {
    NCCL_OK(split);
    REQUIRE(group != nullptr);
    DeviceArray<int32_t> one(1);
    one.upload({1});
    NCCL_OK(ncclAllReduce(one.ptr, one.ptr, 1, ncclInt32, ncclSum, group, stream));
    stream.sync();
    CHECK_SAME(one.download(), std::vector<int32_t>{size - 1});
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = 4;
  group = nullptr;
  r = refusal(ncclCommSplit(world, 0, rank, &group, &config));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("config->maxCTAs = 4 is not emulated"));

  // A destroyed communicator is refused, not read.
  ncclComm_t gone = world_comm();
  NCCL_OK(ncclCommDestroy(gone));
  r = refusal(ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclSum, gone, stream));
  CHECK(r.status == ncclInvalidArgument);
  CHECK_THAT(r.message, Contains("comm is not a live communicator"));
}

TEST_CASE("a receive whose send has another size is a fault", "[p2p][fault]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank();
  DeviceArray<uint8_t> buffer(32);
  buffer.upload(std::vector<uint8_t>(32, 0));
  // The fault comes from whichever call finds the message there: the
  // runtime drives progress in ncclRecv's submit too, and the send may
  // have arrived already.
  auto receive_16 = [&] {
    (void)ncclRecv(buffer.ptr, 16, ncclUint8, 0, world, stream);
    (void)cudaStreamSynchronize(stream);
  };
  // Rank 0 sends 8 bytes, then 32; rank 1 expects 16 each time.
  for (const size_t sent : {size_t{8}, size_t{32}}) {
    INFO(sent << " bytes sent, 16 expected");
    if (rank == 0) {
      NCCL_OK(ncclSend(buffer.ptr, sent, ncclUint8, 1, world, stream));
      stream.sync();
    } else if (rank == 1) {
      REQUIRE_THROWS_AS(receive_16(), sdp::emu::Fault);
      try {
        stream.sync();  // the fault was reported once; the stream has moved on
      } catch (const sdp::emu::Fault& f) {
        FAIL("a second report: " << f.what());
      }
    }
  }
  if (rank == 1) {
    // The fault's text, from a third exchange.
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_THROWS_WITH(receive_16(), Contains("ncclRecv from rank 0") &&
                                        Contains("expected 16 bytes") && Contains("sent 4") &&
                                        Contains("same count and datatype"));
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      NCCL_OK(ncclSend(buffer.ptr, 4, ncclUint8, 1, world, stream));
      stream.sync();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("ncclCommAbort returns at once though a receive is pending", "[abort]") {
  const int rank = world_rank();
  ncclComm_t comm = world_comm();
  Stream stream;
  // Rank 0 waits for a message rank 1 has not sent; the buffer is never
  // freed: the abandoned receive may still be filled later (by the send
  // below), and freed memory must not be written.
  void* pending = nullptr;
  CUDA_OK(cudaMalloc(&pending, 64));
  if (rank == 0) {
    NCCL_OK(ncclRecv(pending, 64, ncclUint8, 1, comm, stream));
    CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);
    const auto begin = std::chrono::steady_clock::now();
    NCCL_OK(ncclCommAbort(comm));
    stream.sync();  // the stream moves on: the receive was abandoned
    CHECK(std::chrono::steady_clock::now() - begin < std::chrono::seconds(5));
    // The handle is gone.
    ncclResult_t async = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &async) == ncclInvalidArgument);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    // The abandoned receive takes this message, so that nothing is left
    // unmatched at MPI_Finalize.
    NCCL_OK(ncclSend(pending, 64, ncclUint8, 0, comm, stream));
    stream.sync();
  }
  if (rank != 0) NCCL_OK(ncclCommDestroy(comm));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) cudaFree(pending);
}

TEST_CASE("ncclCommDestroy lets the calls still queued finish", "[destroy]") {
  // CUDA lets a stream run on after its communicator is destroyed; the
  // emulated one frees its MPI communicators when the last call is done.
  const int size = world_size();
  ncclComm_t comm = world_comm();
  Stream stream;
  const size_t n = 1 << 16;
  DeviceArray<float> buffer(n);
  buffer.upload(values(world_rank(), n));
  NCCL_OK(ncclAllReduce(buffer.ptr, buffer.ptr, n, ncclFloat32, ncclSum, comm, stream));
  const size_t chunk = n / static_cast<size_t>(size);
  NCCL_OK(ncclAllGather(buffer.ptr + static_cast<size_t>(world_rank()) * chunk, buffer.ptr, chunk,
                        ncclFloat32, comm, stream));
  NCCL_OK(ncclCommDestroy(comm));
  stream.sync();
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < n; ++i) sum[i] += value(r, i);
  // The in-place all-gather gave every rank the sum's chunks it already had.
  CHECK_SAME(buffer.download(), sum);
}

TEST_CASE("driving NCCL work from a thread MPI does not allow is a fault naming the cause",
          "[thread]") {
  // MPI was initialized with MPI_THREAD_FUNNELED: only the main thread may
  // call it, and the emulated NCCL calls MPI from whichever thread drives
  // the stream (here the one that queues the work on an idle stream).
  ncclComm_t comm = world_comm();
  Stream stream;
  DeviceArray<float> buffer(4);
  buffer.upload(std::vector<float>(4, 1.0f));
  std::string report;
  std::thread other([&] {
    try {
      (void)ncclAllReduce(buffer.ptr, buffer.ptr, 4, ncclFloat32, ncclSum, comm, stream);
      (void)cudaStreamSynchronize(stream);
    } catch (const sdp::emu::Fault& f) {
      report = f.what();
    }
  });
  other.join();
  CHECK_THAT(report, Contains("ncclAllReduce on communicator") &&
                         Contains("only the thread that initialized it may call MPI"));
  // Nothing of that all-reduce reached MPI, on any rank; the communicator
  // is left unusable (its call never started) and is aborted.
  NCCL_OK(ncclCommAbort(comm));
  stream.sync();
}

TEST_CASE("a split while collectives of the parent are still queued", "[split][stream]") {
  // Even ranks' all-reduce waits (behind a receive the previous rank sends
  // only after the split); odd ranks' is posted at once. The split is a
  // blocking collective made by the host in between: it must not be
  // matched against the all-reduce, which it is not on MPI's side either
  // (setup calls travel on a communicator of their own).
  Comm parent(world_comm()), p2p(world_comm());
  Stream gated, sr, ss;
  Event gate;
  const int rank = world_rank(), size = world_size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  DeviceArray<float> x(8), token(1), inbox(1);
  x.upload(std::vector<float>(8, static_cast<float>(rank + 1)));
  token.upload({1.0f});
  NCCL_OK(ncclRecv(inbox.ptr, 1, ncclFloat32, prev, p2p, sr));
  if (rank % 2 == 0) {
    CUDA_OK(cudaEventRecord(gate, sr));
    CUDA_OK(cudaStreamWaitEvent(gated, gate, 0));
  }
  NCCL_OK(ncclAllReduce(x.ptr, x.ptr, 8, ncclFloat32, ncclSum, parent, gated));
  ncclComm_t child = nullptr;
  NCCL_OK(ncclCommSplit(parent, 0, rank, &child, nullptr));
  Comm owned(child);
  NCCL_OK(ncclSend(token.ptr, 1, ncclFloat32, next, p2p, ss));
  DeviceArray<int32_t> one(1);
  one.upload({1});
  NCCL_OK(ncclAllReduce(one.ptr, one.ptr, 1, ncclInt32, ncclSum, child, ss));
  gated.sync();
  ss.sync();
  sr.sync();
  CHECK_SAME(x.download(), std::vector<float>(8, static_cast<float>(size * (size + 1) / 2)));
  CHECK_SAME(one.download(), std::vector<int32_t>{size});
}
