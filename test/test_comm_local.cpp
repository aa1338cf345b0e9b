// Communicators without peers: the local world of one and the emulated rank
// of an N-rank job. Their data semantics, counters equal to the ring
// formulas (docs/ARCHITECTURE.md "Measurements"), group naming, and argument errors.
// Multi-rank behaviour is tested under mpirun (test/mpi).
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "comm/communicator.h"
#include "comm/emulated_communicator.h"
#include "comm/local_communicator.h"

using namespace sdp;
using namespace sdp::comm;

namespace {

// Host tensor over a vector: [values.size()].
template <typename T>
Tensor view_of(std::vector<T>& values) {
  return Tensor(values.data(), {static_cast<int64_t>(values.size())}, dtype_of<T>::value,
                Device::cpu);
}

std::vector<float> iota_f32(size_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("comm: ring formulas give the bytes a rank sends", "[comm]") {
  CHECK(ring_sent_bytes(Op::all_reduce, 4, 4000) == 6000);
  CHECK(ring_sent_bytes(Op::reduce_scatter, 4, 4000) == 3000);
  CHECK(ring_sent_bytes(Op::all_gather, 4, 4000) == 3000);
  CHECK(ring_sent_bytes(Op::all_reduce, 3, 3000) == 4000);
  CHECK(ring_sent_bytes(Op::broadcast, 4, 4000, true) == 4000);
  CHECK(ring_sent_bytes(Op::broadcast, 4, 4000, false) == 0);
  CHECK(ring_sent_bytes(Op::broadcast, 1, 4000, true) == 0);  // nobody to send to
  CHECK(ring_sent_bytes(Op::send, 2, 100) == 100);
  CHECK(ring_sent_bytes(Op::recv, 2, 100) == 0);
  CHECK(ring_sent_bytes(Op::barrier, 8, 0) == 0);
  for (Op op : {Op::all_reduce, Op::reduce_scatter, Op::all_gather})
    CHECK(ring_sent_bytes(op, 1, 4000) == 0);
  REQUIRE_THROWS_WITH(ring_sent_bytes(Op::all_reduce, 0, 10),
                      Catch::Contains("group size 0 is invalid (valid: >= 1)"));
  CHECK(op_name(Op::reduce_scatter) == "reduce_scatter");
  CHECK(reduce_op_name(ReduceOp::average) == "average");
}

TEST_CASE("comm: local communicator: a world of one leaves sums and averages unchanged", "[comm]") {
  auto world = make_world("local");
  REQUIRE(world->backend() == "local");
  REQUIRE(world->rank() == 0);
  REQUIRE(world->size() == 1);
  REQUIRE(world->name() == "world");
  REQUIRE(world->world_ranks() == std::vector<int>{0});

  std::vector<float> values = iota_f32(10, 1);  // [10]
  Tensor buffer = view_of(values);
  world->all_reduce(buffer, ReduceOp::sum);
  world->all_reduce(buffer, ReduceOp::average);
  world->broadcast(buffer, 0);
  world->barrier();
  CHECK(values == iota_f32(10, 1));

  std::vector<double> in = {1.5, 2.5, 3.5};  // [3]
  std::vector<double> out(3, 0.0);           // [3]
  Tensor tin = view_of(in), tout = view_of(out);
  world->reduce_scatter(tin, tout, ReduceOp::average);
  CHECK(out == in);
  std::vector<double> gathered(3, 0.0);  // [3]
  Tensor tg = view_of(gathered);
  world->all_gather(tin, tg);
  CHECK(gathered == in);

  // A group of one sends nothing, but every call and its payload is counted.
  const CommStats& s = world->stats();
  CHECK(s.total().sent_bytes == 0);
  CHECK(s.by_op(Op::all_reduce).calls == 2);
  CHECK(s.by_op(Op::all_reduce).payload_bytes == 80);
  CHECK(s.by_op(Op::reduce_scatter).payload_bytes == 24);
  CHECK(s.by_op(Op::all_gather).payload_bytes == 24);
  CHECK(s.by_op(Op::barrier).calls == 1);
  CHECK(s.total().calls == 6);
  CHECK(s.by_group().at("world").calls == 6);
}

TEST_CASE("comm: local communicator: send and recv to itself are errors naming the op", "[comm]") {
  auto world = make_world("local");
  std::vector<float> values(4, 0.f);
  Tensor buffer = view_of(values);
  REQUIRE_THROWS_WITH(world->send(buffer, 0),
                      Catch::Contains("send on group world") && Catch::Contains("is this rank"));
  REQUIRE_THROWS_WITH(world->recv(buffer, 0),
                      Catch::Contains("recv on group world") && Catch::Contains("is this rank"));
  REQUIRE_THROWS_WITH(world->send(buffer, 1),
                      Catch::Contains("peer 1 is out of range (valid: 0..0)"));
  CHECK(world->stats().total().calls == 0);  // refused calls are not counted
}

TEST_CASE("comm: local communicator: split and subgroup give local groups sharing the counters",
          "[comm]") {
  auto world = make_world("local");
  CHECK(world->split(-1, 0) == nullptr);
  auto group = world->split(3, 7);
  REQUIRE(group != nullptr);
  CHECK(group->backend() == "local");
  CHECK(group->name() == "ranks:0");
  CHECK(group->size() == 1);
  auto sub = world->subgroup({0});
  REQUIRE(sub != nullptr);
  CHECK(sub->name() == "ranks:0");

  std::vector<float> values(8, 1.f);
  Tensor buffer = view_of(values);
  group->all_reduce(buffer, ReduceOp::sum);
  world->all_reduce(buffer, ReduceOp::sum);
  CHECK(&group->stats() == &world->stats());
  CHECK(world->stats().by_group().at("ranks:0").calls == 1);
  CHECK(world->stats().by_group().at("world").calls == 1);
  CHECK(world->stats().total().calls == 2);
}

TEST_CASE("comm: emulated communicator counts like rank r of an N-rank job", "[comm]") {
  auto world = make_world("emulated", {}, 4, 1);
  REQUIRE(world->backend() == "emulated");
  REQUIRE(world->rank() == 1);
  REQUIRE(world->size() == 4);
  REQUIRE(world->world_ranks() == std::vector<int>{0, 1, 2, 3});

  std::vector<float> grads = iota_f32(1000);  // [1000]
  Tensor g = view_of(grads);
  world->all_reduce(g, ReduceOp::average);
  CHECK(grads == iota_f32(1000));  // no peers: values stay
  const Traffic& ar = world->stats().by_op(Op::all_reduce);
  CHECK(ar.calls == 1);
  CHECK(ar.payload_bytes == 4000);
  CHECK(ar.sent_bytes == 2.0 * 3 / 4 * 4000);

  // reduce_scatter: this rank's chunk of the input becomes the output.
  std::vector<float> shard(250, -1.f);  // [250]
  Tensor sh = view_of(shard);
  world->reduce_scatter(g, sh, ReduceOp::sum);
  CHECK(shard == iota_f32(250, 250));
  CHECK(world->stats().by_op(Op::reduce_scatter).payload_bytes == 4000);
  CHECK(world->stats().by_op(Op::reduce_scatter).sent_bytes == 3000);

  // all_gather: the input lands in every chunk (as if every rank held it).
  std::vector<float> full(1000, -1.f);  // [1000]
  Tensor f = view_of(full);
  world->all_gather(sh, f);
  for (size_t i = 0; i < 1000; ++i) CHECK(full[i] == static_cast<float>(250 + i % 250));
  CHECK(world->stats().by_op(Op::all_gather).payload_bytes == 4000);
  CHECK(world->stats().by_op(Op::all_gather).sent_bytes == 3000);

  // broadcast: the root sends the buffer, the others send nothing.
  world->broadcast(g, 1);
  CHECK(world->stats().by_op(Op::broadcast).sent_bytes == 4000);
  world->broadcast(g, 0);
  CHECK(world->stats().by_op(Op::broadcast).sent_bytes == 4000);
  CHECK(world->stats().by_op(Op::broadcast).payload_bytes == 8000);

  world->send(sh, 2);
  world->recv(sh, 0);
  world->barrier();
  CHECK(world->stats().by_op(Op::send).sent_bytes == 1000);
  CHECK(world->stats().by_op(Op::recv).sent_bytes == 0);
  CHECK(world->stats().by_op(Op::recv).payload_bytes == 1000);
  CHECK(world->stats().by_op(Op::barrier).calls == 1);

  const Traffic total = world->stats().total();
  CHECK(total.calls == 8);
  CHECK(total.sent_bytes == 6000 + 3000 + 3000 + 4000 + 1000);
  CHECK(world->stats().by_group().at("world").sent_bytes == total.sent_bytes);
}

TEST_CASE("comm: send_async on emulated and local worlds", "[comm][p2p]") {
  // Emulated: counted as a send of S bytes when started, nothing moves,
  // and the handle is finished (no peer to wait for).
  auto emulated = make_world("emulated", {}, 4, 1);
  std::vector<float> values = iota_f32(250);  // [250]
  Tensor buffer = view_of(values);
  auto pending = emulated->send_async(buffer, 2);
  CHECK(emulated->stats().by_op(Op::send).calls == 1);
  CHECK(emulated->stats().by_op(Op::send).sent_bytes == 1000);
  CHECK(emulated->stats().by_op(Op::send).payload_bytes == 1000);
  pending->wait();
  pending->wait();  // a second wait does nothing
  CHECK(values == iota_f32(250));
  CHECK(emulated->stats().by_op(Op::recv).calls == 0);
  REQUIRE_THROWS_WITH(emulated->send_async(buffer, 1), Catch::Contains("is this rank"));
  REQUIRE_THROWS_WITH(emulated->send_async(buffer, 4),
                      Catch::Contains("send on group world") &&
                          Catch::Contains("peer 4 is out of range (valid: 0..3)"));
  CHECK(emulated->stats().by_op(Op::send).calls == 1);  // refused calls are not counted

  // Local: a world of one has no peer, asynchronous or not.
  auto local = make_world("local");
  REQUIRE_THROWS_WITH(local->send_async(buffer, 0),
                      Catch::Contains("send on group world") && Catch::Contains("is this rank"));
  CHECK(local->stats().total().calls == 0);
}

TEST_CASE("comm: emulated communicator: in-place all_gather and reduce_scatter", "[comm]") {
  auto world = make_world("emulated", {}, 4, 2);
  std::vector<double> full(8);  // [8] = 4 chunks of [2]
  std::iota(full.begin(), full.end(), 0.0);
  Tensor whole = view_of(full);
  Tensor mine = whole.narrow(0, 4, 2);  // chunk 2
  world->all_gather(mine, whole);  // chunk 2 stays, and is copied into the others
  world->reduce_scatter(whole, mine, ReduceOp::sum);
  CHECK(full == std::vector<double>{4, 5, 4, 5, 4, 5, 4, 5});
  Tensor other = whole.narrow(0, 2, 2);  // chunk 1 is not this rank's
  REQUIRE_THROWS_WITH(world->all_gather(other, whole),
                      Catch::Contains("input and output overlap") &&
                          Catch::Contains("input = this rank's chunk of output"));
  REQUIRE_THROWS_WITH(world->reduce_scatter(whole, other, ReduceOp::sum),
                      Catch::Contains("output = this rank's chunk of input"));
}

TEST_CASE("comm: emulated communicator: subgroups are named by world ranks and share counters",
          "[comm]") {
  auto world = make_world("emulated", {}, 4, 2);
  auto owners = world->subgroup({0, 2, 3});
  REQUIRE(owners != nullptr);
  CHECK(owners->backend() == "emulated");
  CHECK(owners->name() == "ranks:0,2,3");
  CHECK(owners->rank() == 1);
  CHECK(owners->size() == 3);
  CHECK(owners->world_ranks() == std::vector<int>{0, 2, 3});
  CHECK(world->subgroup({0, 1}) == nullptr);  // rank 2 is not a member

  // Members of a subgroup are ranks of that group: {1, 2} of {0, 2, 3} = world {2, 3}.
  auto nested = owners->subgroup({1, 2});
  REQUIRE(nested != nullptr);
  CHECK(nested->name() == "ranks:2,3");
  CHECK(nested->rank() == 0);
  CHECK(nested->world_ranks() == std::vector<int>{2, 3});

  std::vector<float> grads(300, 1.f);  // [300]
  Tensor g = view_of(grads);
  owners->all_reduce(g, ReduceOp::average);
  nested->all_reduce(g, ReduceOp::sum);
  world->all_reduce(g, ReduceOp::sum);
  const auto& groups = world->stats().by_group();
  CHECK(groups.at("ranks:0,2,3").sent_bytes == 2.0 * 2 * 1200 / 3);
  CHECK(groups.at("ranks:2,3").sent_bytes == 1200);
  CHECK(groups.at("world").sent_bytes == 1800);
  CHECK(world->stats().by_op(Op::all_reduce).calls == 3);

  REQUIRE_THROWS_WITH(world->split(0, 0),
                      Catch::Contains("emulated backend cannot split by color") &&
                          Catch::Contains("subgroup(members)"));
  REQUIRE_THROWS_WITH(world->subgroup({2, 0}),
                      Catch::Contains("members {2,0} are invalid") &&
                          Catch::Contains("sorted list of distinct ranks in 0..3"));
  REQUIRE_THROWS_WITH(world->subgroup({0, 4}), Catch::Contains("members {0,4} are invalid"));
  REQUIRE_THROWS_WITH(world->subgroup({}), Catch::Contains("non-empty"));
}

TEST_CASE("comm: meta buffers are counted and move nothing", "[comm]") {
  MetaAllocator meta;
  OwnedTensor full(meta, {4, 256}, DType::f32, MemCategory::grad);   // [4, 256]
  OwnedTensor shard(meta, {256}, DType::f32, MemCategory::grad);      // [256]
  auto world = make_world("emulated", {}, 4, 3);
  world->all_reduce(*full, ReduceOp::sum);
  world->reduce_scatter(*full, *shard, ReduceOp::average);
  world->all_gather(*shard, *full);
  world->broadcast(*full, 3);
  const Traffic total = world->stats().total();
  CHECK(total.calls == 4);
  CHECK(total.payload_bytes == 4 * 4096);
  CHECK(total.sent_bytes == 6144 + 3072 + 3072 + 4096);
}

TEST_CASE("comm: CommStats::to_json reports totals, every op and the groups used", "[comm]") {
  auto world = make_world("emulated", {}, 2, 0);
  std::vector<float> values(100, 0.f);  // [100]
  Tensor v = view_of(values);
  world->all_reduce(v, ReduceOp::sum);
  world->broadcast(v, 0);
  const nlohmann::json j = world->stats().to_json();
  CHECK(j.at("calls") == 2);
  CHECK(j.at("payload_bytes") == 800);
  CHECK(j.at("sent_bytes") == 800.0);
  REQUIRE(j.at("by_op").size() == kOpCount);
  CHECK(j.at("by_op").at("all_reduce").at("sent_bytes") == 400.0);
  CHECK(j.at("by_op").at("broadcast").at("calls") == 1);
  CHECK(j.at("by_op").at("recv").at("calls") == 0);
  CHECK(j.at("by_group").at("world").at("payload_bytes") == 800);
  CHECK(j.at("by_group").size() == 1);

  world->stats().reset();
  const nlohmann::json zero = world->stats().to_json();
  CHECK(zero.at("calls") == 0);
  CHECK(zero.at("sent_bytes") == 0.0);
  CHECK(zero.at("by_group").empty());
}

TEST_CASE("comm: communicator arguments are checked with messages naming op, group and rank",
          "[comm]") {
  auto world = make_world("emulated", {}, 4, 1);
  std::vector<float> f(12, 0.f);     // [12]
  std::vector<double> d(12, 0.0);    // [12]
  std::vector<int32_t> ints(12, 0);  // [12]
  std::vector<uint16_t> u(12, 0);    // [12]
  Tensor tf = view_of(f), td = view_of(d), ti = view_of(ints), tu = view_of(u);

  Tensor strided(f.data(), {3, 2}, {4, 1}, DType::f32, Device::cpu);  // [3, 2] of rows of 4
  REQUIRE_THROWS_WITH(world->all_reduce(strided, ReduceOp::sum),
                      Catch::Contains("all_reduce on group world (rank 1 of 4)") &&
                          Catch::Contains("buffer must be contiguous"));
  REQUIRE_THROWS_WITH(world->all_reduce(tu, ReduceOp::sum),
                      Catch::Contains("cannot reduce a u16 buffer (valid: f32, f64, i32, bf16)"));
  REQUIRE_THROWS_WITH(world->all_reduce(ti, ReduceOp::average),
                      Catch::Contains("average of an i32 buffer is refused"));
  world->all_reduce(ti, ReduceOp::sum);  // summing i32 is fine

  Tensor f4 = tf.narrow(0, 0, 4);
  std::vector<float> out3(3), big(16);
  Tensor o3 = view_of(out3), b16 = view_of(big);
  REQUIRE_THROWS_WITH(world->reduce_scatter(tf, b16, ReduceOp::sum),
                      Catch::Contains("reduce_scatter on group world") &&
                          Catch::Contains("input has 12 elements, expected group size 4 * output "
                                          "elements 16 = 64"));
  REQUIRE_THROWS_WITH(world->reduce_scatter(td, o3, ReduceOp::sum),
                      Catch::Contains("input is f64 but output is f32"));
  REQUIRE_THROWS_WITH(world->all_gather(f4, tf),
                      Catch::Contains("all_gather on group world") &&
                          Catch::Contains("output has 12 elements, expected group size 4 * input "
                                          "elements 4 = 16"));
  world->reduce_scatter(tf, o3, ReduceOp::sum);
  world->all_gather(o3, tf);
  world->all_gather(tu.narrow(0, 3, 3), tu);  // any dtype moves (here in place: chunk 1)

  REQUIRE_THROWS_WITH(world->broadcast(tf, 4),
                      Catch::Contains("broadcast on group world") &&
                          Catch::Contains("root 4 is out of range (valid: 0..3)"));
  REQUIRE_THROWS_WITH(world->broadcast(tf, -1), Catch::Contains("root -1 is out of range"));
  REQUIRE_THROWS_WITH(world->send(tf, 7),
                      Catch::Contains("send on group world") &&
                          Catch::Contains("peer 7 is out of range (valid: 0..3)"));
  REQUIRE_THROWS_WITH(world->recv(tf, 1), Catch::Contains("peer 1 is this rank"));
  Tensor missing(nullptr, {4}, DType::f32, Device::cpu);
  REQUIRE_THROWS_WITH(world->broadcast(missing, 0), Catch::Contains("buffer has no storage"));

  // Only the successful calls were counted.
  CHECK(world->stats().total().calls == 4);
}

TEST_CASE("comm: make_world names the valid backends and what each needs", "[comm]") {
  REQUIRE_THROWS_WITH(make_world("gloo"),
                      Catch::Contains("unknown communicator backend 'gloo' (valid: local, "
                                      "emulated, mpi, nccl)"));
  REQUIRE_THROWS_WITH(make_world("emulated", {}, 4, 4),
                      Catch::Contains("emulated rank 4 is out of range for a world of 4 (valid: "
                                      "0..3)"));
  REQUIRE_THROWS_WITH(make_world("emulated", {}, 0, 0),
                      Catch::Contains("emulated world size 0 is invalid"));
  // This process never initialized MPI.
#if SDP_HAVE_MPI
  REQUIRE_THROWS_WITH(make_world("mpi"), Catch::Contains("create an sdp::comm::MpiRuntime"));
#else
  REQUIRE_THROWS_WITH(make_world("mpi"), Catch::Contains("this build has no MPI"));
#endif
#if SDP_HAVE_NCCL
  // Not started by mpirun and MPI not initialized: a world of one rank,
  // which needs a GPU; without one it says so.
  try {
    auto nccl = make_world("nccl");
    CHECK(nccl->backend() == "nccl");
    CHECK(nccl->size() == 1);
  } catch (const sdp::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("needs a GPU; none is visible"));
  }
#else
  REQUIRE_THROWS_WITH(make_world("nccl"), Catch::Contains("backend 'nccl' is unavailable"));
#endif
}

TEST_CASE("comm: require_same_on_all_ranks passes where every rank agrees", "[comm]") {
  auto local = make_world("local");
  require_same_on_all_ranks(*local, "the run configuration", "{\"lr\": 0.1}");
  CHECK(local->stats().by_op(Op::all_gather).calls == 1);
  // One emulated rank sees only itself, so it agrees too; the gather is
  // counted as in the real job (2 i32 words per rank).
  auto emulated = make_world("emulated", {}, 4, 3);
  require_same_on_all_ranks(*emulated, "the subnet plan", "plan");
  CHECK(emulated->stats().by_op(Op::all_gather).payload_bytes == 4 * 8);
  CHECK(emulated->stats().by_op(Op::all_gather).sent_bytes == 24);
}
