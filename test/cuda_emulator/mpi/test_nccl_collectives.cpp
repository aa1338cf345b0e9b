// The emulated NCCL's collectives across the ranks of the job, each checked
// against a reference computed on the host from every rank's input (each
// rank can compute every other rank's input: value() depends on the rank).
#include <algorithm>
#include <vector>

#include "test/cuda_emulator/mpi/nccl_test_support.h"

using namespace nccl_test;

namespace {

std::vector<float> reference_sum(size_t n, size_t offset = 0) {
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < world_size(); ++r)
    for (size_t i = 0; i < n; ++i) sum[i] += value(r, offset + i);
  return sum;
}

std::vector<float> divided(std::vector<float> v) {
  for (float& x : v) x /= static_cast<float>(world_size());
  return v;
}

}  // namespace

TEST_CASE("all-reduce sums and averages f32 over the ranks, in place and not", "[collective]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank();
  // One element, an odd count, and 1 MiB (past MPI's eager limit).
  for (const size_t n : {size_t{1}, size_t{1003}, size_t{1} << 18}) {
    const std::vector<float> mine = values(rank, n);
    for (const ncclRedOp_t op : {ncclSum, ncclAvg}) {
      const std::vector<float> expected =
          op == ncclSum ? reference_sum(n) : divided(reference_sum(n));
      INFO("count " << n << ", op " << (op == ncclSum ? "sum" : "avg"));
      {
        DeviceArray<float> buffer(n);
        buffer.upload(mine);
        NCCL_OK(ncclAllReduce(buffer.ptr, buffer.ptr, n, ncclFloat32, op, world, stream));
        stream.sync();
        CHECK_SAME(buffer.download(), expected);
      }
      {
        DeviceArray<float> send(n), recv(n);
        send.upload(mine);
        recv.upload(std::vector<float>(n, -7.0f));
        NCCL_OK(ncclAllReduce(send.ptr, recv.ptr, n, ncclFloat32, op, world, stream));
        stream.sync();
        CHECK_SAME(recv.download(), expected);
        CHECK_SAME(send.download(), mine);  // the input is only read
      }
    }
  }
}

TEST_CASE("all-reduce sums i32 and f64 and truncates the i32 average", "[collective]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  const size_t n = 77;
  std::vector<int32_t> ints(n), int_sum(n, 0);
  std::vector<double> doubles(n), double_sum(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    ints[i] = static_cast<int32_t>((rank + 1) * 1000 - static_cast<int>(i) * 3);
    doubles[i] = value(rank, i) * 1e-3;  // exact sums are not needed: compared with a tolerance
    for (int r = 0; r < size; ++r) {
      int_sum[i] += static_cast<int32_t>((r + 1) * 1000 - static_cast<int>(i) * 3);
      double_sum[i] += value(r, i) * 1e-3;
    }
  }
  DeviceArray<int32_t> di(n);
  di.upload(ints);
  NCCL_OK(ncclAllReduce(di.ptr, di.ptr, n, ncclInt32, ncclSum, world, stream));
  DeviceArray<double> dd(n);
  dd.upload(doubles);
  NCCL_OK(ncclAllReduce(dd.ptr, dd.ptr, n, ncclFloat64, ncclSum, world, stream));
  stream.sync();
  CHECK_SAME(di.download(), int_sum);
  const std::vector<double> got = dd.download();
  for (size_t i = 0; i < n; ++i) CHECK(got[i] == Approx(double_sum[i]).margin(1e-12));

  di.upload(ints);
  NCCL_OK(ncclAllReduce(di.ptr, di.ptr, n, ncclInt32, ncclAvg, world, stream));
  stream.sync();
  std::vector<int32_t> int_avg = int_sum;
  for (int32_t& x : int_avg) x /= size;
  CHECK_SAME(di.download(), int_avg);
}

TEST_CASE("all-reduce of bf16 rounds each sum to nearest even and divides the sum for avg",
          "[collective][bf16]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  // Elements 0-3 have at most two nonzero inputs (ranks 0 and 1), so MPI's
  // order of adding cannot change the result; the rest are small integers
  // whose sums are exact in bf16 in any order.
  //   0: 256 + 1 = 257, halfway between bf16 256 and 258: to even, 256
  //   1: 258 + 1 = 259, halfway between 258 and 260: to even, 260
  //   2: 1 + 1.0078125 = 2.0078125, halfway between 2 and 2.015625: 2
  //   3: -3 + 0.5 = -2.5 (exact)
  const size_t n = 4 + 300;
  std::vector<uint16_t> mine(n, to_bf16(0.0f));
  const float rank0[4] = {256.0f, 258.0f, 1.0f, -3.0f};
  const float rank1[4] = {1.0f, 1.0f, 1.0078125f, 0.5f};
  for (size_t i = 0; i < 4; ++i)
    mine[i] = to_bf16(rank == 0 ? rank0[i] : rank == 1 ? rank1[i] : 0.0f);
  auto small = [](int r, size_t i) {
    return static_cast<float>((r + 1) * static_cast<int>(i % 9));
  };
  for (size_t i = 4; i < n; ++i) mine[i] = to_bf16(small(rank, i));

  std::vector<uint16_t> sum(n);
  const float sums4[4] = {256.0f, 260.0f, 2.0f, -2.5f};
  for (size_t i = 0; i < 4; ++i) sum[i] = to_bf16(sums4[i]);
  for (size_t i = 4; i < n; ++i) {
    float s = 0;
    for (int r = 0; r < size; ++r) s += small(r, i);
    sum[i] = to_bf16(s);
  }
  // The sum rounded to bf16, widened, divided, rounded once more.
  std::vector<uint16_t> avg(n);
  for (size_t i = 0; i < n; ++i) avg[i] = to_bf16(from_bf16(sum[i]) / static_cast<float>(size));

  DeviceArray<uint16_t> buffer(n), out(n);
  buffer.upload(mine);
  NCCL_OK(ncclAllReduce(buffer.ptr, buffer.ptr, n, ncclBfloat16, ncclSum, world, stream));
  stream.sync();
  CHECK_SAME(buffer.download(), sum);

  buffer.upload(mine);
  NCCL_OK(ncclAllReduce(buffer.ptr, out.ptr, n, ncclBfloat16, ncclAvg, world, stream));
  stream.sync();
  CHECK_SAME(out.download(), avg);
}

TEST_CASE("reduce-scatter leaves each rank its chunk of the sum or average, in place and not",
          "[collective]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  const size_t chunk = 257, total = chunk * static_cast<size_t>(size);
  const std::vector<float> mine = values(rank, total);
  const size_t own = static_cast<size_t>(rank) * chunk;
  for (const ncclRedOp_t op : {ncclSum, ncclAvg}) {
    INFO("op " << (op == ncclSum ? "sum" : "avg"));
    const std::vector<float> expected =
        op == ncclSum ? reference_sum(chunk, own) : divided(reference_sum(chunk, own));
    {
      DeviceArray<float> send(total), recv(chunk);
      send.upload(mine);
      recv.upload(std::vector<float>(chunk, -7.0f));
      NCCL_OK(ncclReduceScatter(send.ptr, recv.ptr, chunk, ncclFloat32, op, world, stream));
      stream.sync();
      CHECK_SAME(recv.download(), expected);
      CHECK_SAME(send.download(), mine);
    }
    {
      // In place: recvbuff is this rank's chunk of sendbuff; the other
      // chunks keep this rank's input.
      DeviceArray<float> buffer(total);
      buffer.upload(mine);
      NCCL_OK(
          ncclReduceScatter(buffer.ptr, buffer.ptr + own, chunk, ncclFloat32, op, world, stream));
      stream.sync();
      std::vector<float> want = mine;
      std::copy(expected.begin(), expected.end(), want.begin() + static_cast<ptrdiff_t>(own));
      CHECK_SAME(buffer.download(), want);
    }
  }
  {
    // bf16, small integers: exact sums in any order.
    std::vector<uint16_t> in(total), want(chunk);
    for (size_t i = 0; i < total; ++i)
      in[i] = to_bf16(static_cast<float>((rank + 1) * static_cast<int>(i % 11)));
    for (size_t i = 0; i < chunk; ++i) {
      float s = 0;
      for (int r = 0; r < size; ++r)
        s += static_cast<float>((r + 1) * static_cast<int>((own + i) % 11));
      want[i] = to_bf16(s);
    }
    DeviceArray<uint16_t> send(total), recv(chunk);
    send.upload(in);
    NCCL_OK(ncclReduceScatter(send.ptr, recv.ptr, chunk, ncclBfloat16, ncclSum, world, stream));
    stream.sync();
    CHECK_SAME(recv.download(), want);
  }
}

TEST_CASE("all-gather puts the chunk of each rank at its offset, in place and not",
          "[collective]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  auto byte = [](int r, size_t i) {
    return static_cast<uint8_t>((r * 37 + static_cast<int>(i) * 5 + 1) & 0xff);
  };
  // 1001 bytes, and 300 KiB (past MPI's eager limit).
  for (const size_t chunk : {size_t{1001}, size_t{300} << 10}) {
    INFO("chunk " << chunk << " bytes");
    const size_t total = chunk * static_cast<size_t>(size);
    std::vector<uint8_t> mine(chunk), expected(total);
    for (size_t i = 0; i < chunk; ++i) mine[i] = byte(rank, i);
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < chunk; ++i) expected[static_cast<size_t>(r) * chunk + i] = byte(r, i);
    {
      DeviceArray<uint8_t> send(chunk), recv(total);
      send.upload(mine);
      recv.upload(std::vector<uint8_t>(total, 0xee));
      NCCL_OK(ncclAllGather(send.ptr, recv.ptr, chunk, ncclUint8, world, stream));
      stream.sync();
      CHECK_SAME(recv.download(), expected);
    }
    {
      // In place: sendbuff is this rank's chunk of recvbuff.
      DeviceArray<uint8_t> buffer(total);
      std::vector<uint8_t> start(total, 0xee);
      std::copy(mine.begin(), mine.end(),
                start.begin() + static_cast<ptrdiff_t>(rank) * static_cast<ptrdiff_t>(chunk));
      buffer.upload(start);
      NCCL_OK(ncclAllGather(buffer.ptr + static_cast<size_t>(rank) * chunk, buffer.ptr, chunk,
                            ncclUint8, world, stream));
      stream.sync();
      CHECK_SAME(buffer.download(), expected);
    }
  }
  {
    // Counts are elements of the datatype: 100 floats per rank.
    const size_t n = 100;
    DeviceArray<float> send(n), recv(n * static_cast<size_t>(size));
    send.upload(values(rank, n));
    NCCL_OK(ncclAllGather(send.ptr, recv.ptr, n, ncclFloat32, world, stream));
    stream.sync();
    std::vector<float> expected;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> v = values(r, n);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    CHECK_SAME(recv.download(), expected);
  }
}

TEST_CASE("broadcast from each root reaches every rank, in place and not", "[collective]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  const size_t n = 4097;
  for (int root = 0; root < size; ++root) {
    INFO("root " << root);
    const std::vector<float> roots = values(root + 10, n);
    {
      DeviceArray<float> buffer(n);
      buffer.upload(values(rank + 10, n));
      NCCL_OK(ncclBroadcast(buffer.ptr, buffer.ptr, n, ncclFloat32, root, world, stream));
      stream.sync();
      CHECK_SAME(buffer.download(), roots);
    }
    {
      // sendbuff matters on the root only; the others pass none.
      DeviceArray<float> send(n), recv(n);
      send.upload(values(rank + 10, n));
      recv.upload(std::vector<float>(n, -7.0f));
      NCCL_OK(ncclBroadcast(rank == root ? send.ptr : nullptr, recv.ptr, n, ncclFloat32, root,
                            world, stream));
      stream.sync();
      CHECK_SAME(recv.download(), roots);
    }
  }
}

TEST_CASE("several collectives queued on one stream run in order under one synchronize",
          "[collective][stream]") {
  Comm world(world_comm());
  Stream stream;
  const int rank = world_rank(), size = world_size();
  const size_t n = 64;
  const auto usize = static_cast<size_t>(size);
  // a = sum of every rank's values; g = all-gather of a's first 8 elements
  // (each rank the same, so g is a[0..8) repeated); b = broadcast of g from
  // the last rank into b; c = reduce-scatter (sum) of b: each rank's chunk
  // of size * b. Every step reads what the one before wrote, so a step that
  // ran early would read the buffers' initial -7s.
  DeviceArray<float> a(n), g(8 * usize), b(8 * usize), c(8);
  a.upload(values(rank, n));
  g.upload(std::vector<float>(8 * usize, -7.0f));
  b.upload(std::vector<float>(8 * usize, -7.0f));
  c.upload(std::vector<float>(8, -7.0f));
  NCCL_OK(ncclAllReduce(a.ptr, a.ptr, n, ncclFloat32, ncclSum, world, stream));
  NCCL_OK(ncclAllGather(a.ptr, g.ptr, 8, ncclFloat32, world, stream));
  NCCL_OK(ncclBroadcast(g.ptr, b.ptr, 8 * usize, ncclFloat32, size - 1, world, stream));
  const size_t chunk = 8 / usize;  // the tests run 2 and 4 ranks
  NCCL_OK(ncclReduceScatter(b.ptr, c.ptr, chunk, ncclFloat32, ncclSum, world, stream));
  stream.sync();

  const std::vector<float> sum = reference_sum(n);
  std::vector<float> gathered;
  for (int r = 0; r < size; ++r) gathered.insert(gathered.end(), sum.begin(), sum.begin() + 8);
  CHECK_SAME(a.download(), sum);
  CHECK_SAME(g.download(), gathered);
  CHECK_SAME(b.download(), gathered);
  std::vector<float> got = c.download();
  for (size_t i = 0; i < chunk; ++i)
    CHECK(got[i] == gathered[static_cast<size_t>(rank) * chunk + i] * static_cast<float>(size));
}

TEST_CASE("a collective behind cudaStreamWaitEvent waits for a receive on another stream",
          "[collective][stream]") {
  // The all-reduce on stream B reads x, which a receive on stream A fills;
  // B waits for A through an event. The sender's ncclSend is made only
  // after the all-reduce was queued, so an all-reduce that did not wait
  // would sum x's initial -1s. The receive and send go through a second
  // communicator: operations of one communicator are posted in the order
  // they were called (as NCCL's are launched), and the send must not queue
  // behind the waiting all-reduce.
  Comm world(world_comm()), p2p(world_comm());
  Stream a, b, c;
  Event received;
  const int rank = world_rank(), size = world_size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const size_t n = 1000;
  DeviceArray<float> x(n), y(n), mine(n);
  x.upload(std::vector<float>(n, -1.0f));
  y.upload(std::vector<float>(n, -7.0f));
  mine.upload(values(rank, n));
  NCCL_OK(ncclRecv(x.ptr, n, ncclFloat32, prev, p2p, a));
  CUDA_OK(cudaEventRecord(received, a));
  CUDA_OK(cudaStreamWaitEvent(b, received, 0));
  NCCL_OK(ncclAllReduce(x.ptr, y.ptr, n, ncclFloat32, ncclSum, world, b));
  CHECK(cudaStreamQuery(b) == cudaErrorNotReady);  // nothing was sent yet
  NCCL_OK(ncclSend(mine.ptr, n, ncclFloat32, next, p2p, c));
  b.sync();
  c.sync();
  a.sync();
  // Every rank's values were received by its next rank: the sum is of all.
  CHECK_SAME(y.download(), reference_sum(n));
}

TEST_CASE(
    "collectives of one communicator meet in call order though their streams reach them "
    "in another order",
    "[collective][stream]") {
  // Each rank calls X then Y on the same communicator. On even ranks X's
  // stream is held (an event after a receive that completes only when the
  // previous rank sends), so Y's stream reaches Y first; on odd ranks X's
  // stream is free. Posted in stream order, even ranks would pair their Y
  // with the odd ranks' X and both sums would mix; posted in call order
  // (as NCCL launches a communicator's operations), each sum is right.
  Comm world(world_comm()), p2p(world_comm());
  Stream sx, sy, sr, ss;
  Event gate;
  const int rank = world_rank(), size = world_size();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const size_t n = 16;
  DeviceArray<float> x(n), y(n), token(1), inbox(1);
  x.upload(std::vector<float>(n, static_cast<float>(rank + 1)));
  y.upload(std::vector<float>(n, static_cast<float>(100 * (rank + 1))));
  token.upload({1.0f});
  NCCL_OK(ncclRecv(inbox.ptr, 1, ncclFloat32, prev, p2p, sr));
  if (rank % 2 == 0) {
    CUDA_OK(cudaEventRecord(gate, sr));
    CUDA_OK(cudaStreamWaitEvent(sx, gate, 0));
  }
  NCCL_OK(ncclAllReduce(x.ptr, x.ptr, n, ncclFloat32, ncclSum, world, sx));
  NCCL_OK(ncclAllReduce(y.ptr, y.ptr, n, ncclFloat32, ncclSum, world, sy));
  NCCL_OK(ncclSend(token.ptr, 1, ncclFloat32, next, p2p, ss));
  sy.sync();
  sx.sync();
  ss.sync();
  sr.sync();
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  CHECK_SAME(x.download(), std::vector<float>(n, ranks_sum));
  CHECK_SAME(y.download(), std::vector<float>(n, 100.0f * ranks_sum));
}
