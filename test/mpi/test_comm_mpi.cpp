// The mpi backend on a real job (ctest runs it with 2 and 4 ranks): exact
// results of every collective on rank-dependent values, in f32, f64 and
// i32, counters equal to the ring formulas per op and per group on every
// rank, groups from split and subgroup, point-to-point, and the agreement
// check.
#include <catch2/catch.hpp>

#include <cstring>

#include "comm/mpi_runtime.h"
#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::comm;
using namespace sdp::testing::mpi;

namespace {

// Bytes a rank sends for one call in a group of k (docs/ARCHITECTURE.md "Measurements").
double all_reduce_bytes(int k, double s) { return 2.0 * (k - 1) * s / k; }
double scatter_gather_bytes(int k, double s) { return (k - 1) * s / k; }

// Values small enough to be exact in every dtype: element i of rank r is
// (r + 1) * (i + 1), so the sum over N ranks is (i + 1) * N (N + 1) / 2 and
// the average (i + 1) * (N + 1) / 2 (a multiple of 0.5).
template <typename T>
std::vector<T> rank_values(int r, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((r + 1) * static_cast<int>(i + 1));
  return v;
}

std::string join(const std::vector<int>& ranks, const char* separator) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += separator;
    out += std::to_string(ranks[i]);
  }
  return out;
}

template <typename T>
void check_all_reduce(ReduceOp op) {
  Communicator& w = world();
  const int n = w.size();
  w.stats().reset();
  std::vector<T> values = rank_values<T>(w.rank(), 1000);  // [1000]
  Tensor buffer = host_view(values);
  w.all_reduce(buffer, op);
  int wrong = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const double sum = static_cast<double>(i + 1) * n * (n + 1) / 2;
    const double expected = op == ReduceOp::sum ? sum : sum / n;
    wrong += static_cast<double>(values[i]) != expected;
  }
  CHECK(wrong == 0);
  const Traffic& t = w.stats().by_op(Op::all_reduce);
  CHECK(t.calls == 1);
  CHECK(t.payload_bytes == static_cast<int64_t>(1000 * sizeof(T)));
  CHECK(t.sent_bytes == all_reduce_bytes(n, 1000.0 * sizeof(T)));
  CHECK(w.stats().by_group().at("world").sent_bytes == t.sent_bytes);
}

template <typename T>
void check_reduce_scatter(ReduceOp op, bool in_place) {
  Communicator& w = world();
  const int n = w.size();
  const size_t chunk = 37;
  w.stats().reset();
  std::vector<T> input = rank_values<T>(w.rank(), chunk * static_cast<size_t>(n));  // [n * 37]
  std::vector<T> separate(chunk, T(-1));                                            // [37]
  Tensor in = host_view(input);
  Tensor out = in_place ? in.narrow(0, static_cast<int64_t>(chunk) * w.rank(), chunk)
                        : host_view(separate);
  w.reduce_scatter(in, out, op);
  const T* result = static_cast<const T*>(out.raw());
  int wrong = 0;
  for (size_t j = 0; j < chunk; ++j) {
    const size_t i = static_cast<size_t>(w.rank()) * chunk + j;  // index into the full buffer
    const double sum = static_cast<double>(i + 1) * n * (n + 1) / 2;
    const double expected = op == ReduceOp::sum ? sum : sum / n;
    wrong += static_cast<double>(result[j]) != expected;
  }
  CHECK(wrong == 0);
  const Traffic& t = w.stats().by_op(Op::reduce_scatter);
  CHECK(t.calls == 1);
  CHECK(t.payload_bytes == static_cast<int64_t>(input.size() * sizeof(T)));
  CHECK(t.sent_bytes == scatter_gather_bytes(n, static_cast<double>(input.size() * sizeof(T))));
}

template <typename T>
void check_all_gather(bool in_place) {
  Communicator& w = world();
  const int n = w.size();
  const size_t chunk = 29;
  w.stats().reset();
  std::vector<T> full(chunk * static_cast<size_t>(n), T(0));  // [n * 29]
  std::vector<T> mine(chunk);                                 // [29]
  for (size_t j = 0; j < chunk; ++j) mine[j] = static_cast<T>(w.rank() * 100 + static_cast<int>(j));
  Tensor out = host_view(full);
  Tensor in = host_view(mine);
  if (in_place) {
    in = out.narrow(0, static_cast<int64_t>(chunk) * w.rank(), chunk);
    std::memcpy(in.raw(), mine.data(), chunk * sizeof(T));
  }
  w.all_gather(in, out);
  int wrong = 0;
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < chunk; ++j)
      wrong += full[static_cast<size_t>(r) * chunk + j] !=
               static_cast<T>(r * 100 + static_cast<int>(j));
  CHECK(wrong == 0);
  const Traffic& t = w.stats().by_op(Op::all_gather);
  CHECK(t.calls == 1);
  CHECK(t.payload_bytes == static_cast<int64_t>(full.size() * sizeof(T)));
  CHECK(t.sent_bytes == scatter_gather_bytes(n, static_cast<double>(full.size() * sizeof(T))));
}

}  // namespace

TEST_CASE("mpi all_reduce: exact sums and averages of rank-dependent values", "[mpi]") {
  check_all_reduce<float>(ReduceOp::sum);
  check_all_reduce<float>(ReduceOp::average);
  check_all_reduce<double>(ReduceOp::sum);
  check_all_reduce<double>(ReduceOp::average);
  check_all_reduce<int32_t>(ReduceOp::sum);
}

TEST_CASE("mpi reduce_scatter: each rank gets its reduced chunk, also in place", "[mpi]") {
  for (bool in_place : {false, true}) {
    check_reduce_scatter<float>(ReduceOp::sum, in_place);
    check_reduce_scatter<float>(ReduceOp::average, in_place);
    check_reduce_scatter<double>(ReduceOp::average, in_place);
    check_reduce_scatter<int32_t>(ReduceOp::sum, in_place);
  }
}

TEST_CASE("mpi all_gather: chunks in rank order for every dtype, also in place", "[mpi]") {
  for (bool in_place : {false, true}) {
    check_all_gather<float>(in_place);
    check_all_gather<double>(in_place);
    check_all_gather<int32_t>(in_place);
    check_all_gather<uint16_t>(in_place);
  }
}

TEST_CASE("mpi broadcast: every root's values reach every rank; only the root sends",
          "[mpi]") {
  Communicator& w = world();
  for (int root = 0; root < w.size(); ++root) {
    w.stats().reset();
    std::vector<double> values(100, w.rank() == root ? 0.25 * (root + 1) : -7.0);  // [100]
    Tensor buffer = host_view(values);
    w.broadcast(buffer, root);
    CHECK(values == std::vector<double>(100, 0.25 * (root + 1)));
    const Traffic& t = w.stats().by_op(Op::broadcast);
    CHECK(t.payload_bytes == 800);
    CHECK(t.sent_bytes == (w.rank() == root ? 800.0 : 0.0));
  }
}

TEST_CASE("mpi send/recv around a ring, and a size mismatch is named", "[mpi]") {
  SDP_MPI_NEEDS_RANKS(2);
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  w.stats().reset();
  // Large enough for MPI's rendezvous protocol: a send finishes only once
  // its receive is posted, so even ranks send first and odd ranks receive
  // first (send and recv return when done).
  std::vector<float> outgoing(100000, static_cast<float>(r));  // [100000]
  std::vector<float> incoming(100000, -1.f);                   // [100000]
  Tensor out = host_view(outgoing), in = host_view(incoming);
  if (r % 2 == 0) {
    w.send(out, next);
    w.recv(in, prev);
  } else {
    w.recv(in, prev);
    w.send(out, next);
  }
  CHECK(incoming == std::vector<float>(100000, static_cast<float>(prev)));
  CHECK(w.stats().by_op(Op::send).sent_bytes == 400000);
  CHECK(w.stats().by_op(Op::recv).sent_bytes == 0);
  CHECK(w.stats().by_op(Op::recv).payload_bytes == 400000);
  CHECK(w.stats().total().sent_bytes == 400000);

  // Rank 0 sends 4 values where rank 1 expects 8.
  std::vector<float> four(4, 1.f), eight(8, 0.f);
  Tensor t4 = host_view(four), t8 = host_view(eight);
  std::string message;
  if (r == 0) w.send(t4, 1);
  if (r == 1) message = error_message([&] { w.recv(t8, 0); });
  if (r == 1)
    CHECK_THAT(message, Catch::Contains("recv on group world (rank 1 of") &&
                            Catch::Contains("expected 8 f32 elements from world rank 0, received 4"));
  w.barrier();
}

TEST_CASE("mpi barrier is counted as a call without bytes", "[mpi]") {
  Communicator& w = world();
  w.stats().reset();
  w.barrier();
  w.barrier();
  CHECK(w.stats().by_op(Op::barrier).calls == 2);
  CHECK(w.stats().total().sent_bytes == 0);
}

TEST_CASE("mpi split: groups by color ordered by key, named by world ranks", "[mpi]") {
  SDP_MPI_NEEDS_RANKS(2);
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  w.stats().reset();
  // Two colors (even, odd world ranks), keys reversing the order.
  auto parity = w.split(r % 2, -r);
  REQUIRE(parity != nullptr);
  std::vector<int> members;  // world ranks, by descending rank
  for (int m = n - 1; m >= 0; --m)
    if (m % 2 == r % 2) members.push_back(m);
  const std::string name = "ranks:" + join(members, ",");
  CHECK(parity->backend() == "mpi");
  CHECK(parity->world_ranks() == members);
  CHECK(parity->name() == name);
  CHECK(parity->size() == static_cast<int>(members.size()));
  CHECK(members[static_cast<size_t>(parity->rank())] == r);

  std::vector<double> values(64, static_cast<double>(r + 1));  // [64]
  Tensor buffer = host_view(values);
  parity->all_reduce(buffer, ReduceOp::sum);
  double expected = 0;
  for (int m : members) expected += m + 1;
  CHECK(values == std::vector<double>(64, expected));
  const int k = parity->size();
  CHECK(w.stats().by_group().at(name).sent_bytes == all_reduce_bytes(k, 512));
  CHECK(w.stats().by_group().count("world") == 0);  // the parent's counters are shared,
  CHECK(&parity->stats() == &w.stats());             // but this call was the group's

  // Opting out: rank 0 gets no group; the others form one of n - 1.
  auto rest = w.split(r == 0 ? -1 : 5, r);
  CHECK((rest == nullptr) == (r == 0));
  if (rest) {
    CHECK(rest->size() == n - 1);
    CHECK(rest->rank() == r - 1);
    CHECK(rest->world_ranks().front() == 1);
  }
}

TEST_CASE("mpi subgroup: members only, rank = index in the list, counters per group", "[mpi]") {
  SDP_MPI_NEEDS_RANKS(2);
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  w.stats().reset();
  // {0, 2} of 4, {0, 1} of 2: the owner group of a component.
  const std::vector<int> owners = {0, n / 2};
  const std::string name = "ranks:0," + std::to_string(n / 2);
  auto group = w.subgroup(owners);
  const bool member = r == 0 || r == n / 2;
  REQUIRE((group != nullptr) == member);

  std::vector<float> grads(250, static_cast<float>(r + 1));  // [250]
  Tensor g = host_view(grads);
  if (group) {
    CHECK(group->name() == name);
    CHECK(group->size() == 2);
    CHECK(group->rank() == (r == 0 ? 0 : 1));
    group->all_reduce(g, ReduceOp::average);  // over exactly the owners
    CHECK(grads == std::vector<float>(250, (1.f + static_cast<float>(n / 2 + 1)) / 2));
    std::vector<float> shard(125);  // [125]
    Tensor s = host_view(shard);
    group->reduce_scatter(g, s, ReduceOp::sum);
    group->all_gather(s, g);
  } else {
    CHECK(grads == std::vector<float>(250, static_cast<float>(r + 1)));
  }
  w.all_reduce(g, ReduceOp::sum);  // the shared components: over everyone

  const auto& groups = w.stats().by_group();
  CHECK(groups.at("world").sent_bytes == all_reduce_bytes(n, 1000));
  if (member) {
    CHECK(groups.at(name).calls == 3);
    CHECK(groups.at(name).sent_bytes ==
          all_reduce_bytes(2, 1000) + 2 * scatter_gather_bytes(2, 1000));
    CHECK(w.stats().by_op(Op::all_reduce).sent_bytes ==
          all_reduce_bytes(2, 1000) + all_reduce_bytes(n, 1000));
  } else {
    CHECK(groups.count(name) == 0);
    CHECK(w.stats().total().calls == 1);
  }
  // A subgroup of a split group: members are ranks of that group.
  auto everyone = w.split(0, r);
  auto last_two = everyone->subgroup({n - 2, n - 1});
  CHECK((last_two != nullptr) == (r >= n - 2));
  if (last_two)
    CHECK(last_two->name() ==
          "ranks:" + std::to_string(n - 2) + "," + std::to_string(n - 1));
}

TEST_CASE("mpi backend refuses what it cannot move, before counting", "[mpi]") {
  Communicator& w = world();
  w.stats().reset();
  std::vector<uint16_t> raw(8);  // [8]: bf16 bits
  Tensor bf(raw.data(), {8}, DType::bf16, Device::cpu);
  CHECK_THAT(error_message([&] { w.all_reduce(bf, ReduceOp::sum); }),
             Catch::Contains("the mpi backend cannot reduce bf16 (valid: f32, f64, i32)"));
  // Never dereferenced: the check runs first.
  Tensor device(reinterpret_cast<void*>(0x1000), {8}, DType::f32, Device::cuda);
  CHECK_THAT(error_message([&] { w.broadcast(device, 0); }),
             Catch::Contains("broadcast on group world") &&
                 Catch::Contains("the mpi backend moves host buffers, got a cuda buffer"));
  CHECK(w.stats().total().calls == 0);
  // bf16 still travels where nothing is reduced.
  std::vector<uint16_t> gathered(8 * static_cast<size_t>(w.size()));
  Tensor out(gathered.data(), {static_cast<int64_t>(gathered.size())}, DType::bf16, Device::cpu);
  for (auto& x : raw) x = static_cast<uint16_t>(w.rank() + 1);
  w.all_gather(bf, out);
  CHECK(gathered[8 * static_cast<size_t>(w.size() - 1)] == w.size());
}

TEST_CASE("require_same_on_all_ranks: passes when equal, same error on every rank otherwise",
          "[mpi]") {
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  w.stats().reset();
  require_same_on_all_ranks(w, "the run configuration", "{\"model\": \"tiny\", \"lr\": 0.1}");
  CHECK(w.stats().by_op(Op::all_gather).calls == 1);
  CHECK(w.stats().by_op(Op::all_gather).payload_bytes == 8 * n);
  SDP_MPI_NEEDS_RANKS(2);

  // The last rank disagrees.
  const std::string plan = r == n - 1 ? "cyclic C=0.5" : "cyclic C=0.25";
  const std::string message =
      error_message([&] { require_same_on_all_ranks(w, "the subnet plan", plan); });
  CHECK(message == "the subnet plan differs between ranks: rank " + std::to_string(n - 1) +
                       " differs from rank 0 (group world): rank 0 has 'cyclic C=0.25', rank " +
                       std::to_string(n - 1) + " has 'cyclic C=0.5'");

  // Every rank but 0 disagrees (with rank 0, not with each other).
  const std::string seed = "seed " + std::to_string(r == 0 ? 0 : 1);
  std::vector<int> disagreeing;  // 1..n-1
  for (int m = 1; m < n; ++m) disagreeing.push_back(m);
  const std::string others = join(disagreeing, ", ");
  const std::string many = error_message([&] { require_same_on_all_ranks(w, "the seed", seed); });
  CHECK(many == "the seed differs between ranks: rank" + std::string(n > 2 ? "s " : " ") +
                    others + (n > 2 ? " differ" : " differs") +
                    " from rank 0 (group world): rank 0 has 'seed 0', rank 1 has 'seed 1'");
  CHECK(on_all_ranks(!message.empty() && !many.empty()));

  // A configuration: the first differing field (in key order) and both
  // values, on every rank; values of different lengths travel whole.
  const std::string config = r == n - 1
                                 ? R"({"model":"tiny","lr":0.02,"resume":"a-much-longer-path"})"
                                 : R"({"model":"tiny","lr":0.1,"resume":""})";
  w.stats().reset();
  const std::string field = error_message([&] {
    require_same_on_all_ranks(w, "the run configuration", config, describe_json_difference);
  });
  CHECK(field == "the run configuration differs between ranks: rank " + std::to_string(n - 1) +
                     " differs from rank 0 (group world): lr: rank 0 has 0.1, rank " +
                     std::to_string(n - 1) + " has 0.02");
  // The hash, then the lengths and the values.
  CHECK(w.stats().by_op(Op::all_gather).calls == 3);
  CHECK(on_all_ranks(!field.empty()));
}
