// Who a deadline blames, and by which rank: the wait's decision between "a
// peer did not come" and "this rank was itself stopped when its deadline
// passed" (with clocks the test drives), and the names messages give peers
// (world rank, group rank beside it). The job-ending lines themselves run
// under mpirun in test/mpi (mpi.fault.*).
#include <catch2/catch.hpp>

#include <vector>

#include "comm/communicator.h"
#include "comm/deadline.h"

using namespace sdp;
using namespace sdp::comm;

namespace {

// Clocks that advance only when the test says: each look at the wall clock
// moves it by `wall_step`, and the CPU clock by `cpu_step`; `jump_at` the
// n-th look moves the wall clock by `jump` more while the CPU clock stands
// still (the process was stopped between two looks).
struct ScriptedClocks {
  mutable double wall = 100, cpu = 5;
  mutable int looks = 0;
  double wall_step = 1e-4, cpu_step = 1e-4;
  int jump_at = -1;
  double jump = 0;
  double wall_seconds() const {
    if (looks++ == jump_at) wall += jump;
    wall += wall_step;
    return wall;
  }
  double cpu_seconds() const { return cpu += cpu_step; }
};

const auto never_done = [] { return false; };

}  // namespace

TEST_CASE("comm: a deadline that passes while this process was stopped is reported as such",
          "[comm][deadline]") {
  ScriptedClocks clocks;
  clocks.jump_at = 5;  // stopped for 30 s a few polls into a wait of 1 s
  clocks.jump = 30;
  const WaitOutcome outcome = poll_until(never_done, 1.0, clocks);
  CHECK_FALSE(outcome.finished);
  CHECK(outcome.stopped_seconds == Approx(30).margin(0.01));
  const std::string line =
      timeout_message(3, "recv from world rank 1", "world", 8, 1.0, outcome);
  CHECK_THAT(line, Catch::StartsWith("[rank 3] recv from world rank 1 on group world (8 bytes) "
                                     "did not finish within 1 s because this rank itself was "
                                     "not running for the last 30.0 s of the wait"));
  CHECK_THAT(line, Catch::Contains("not because of a peer"));
  CHECK_THAT(line, !Catch::Contains("a peer died"));
}

TEST_CASE("comm: a deadline that passes while this process runs blames the peer",
          "[comm][deadline]") {
  SECTION("polls that keep coming") {
    ScriptedClocks clocks;
    clocks.wall_step = 2e-3;  // 2 ms per look: 26 looks to a deadline of 50 ms
    const WaitOutcome outcome = poll_until(never_done, 0.05, clocks);
    CHECK_FALSE(outcome.finished);
    CHECK(outcome.stopped_seconds == 0);
    CHECK_THAT(timeout_message(0, "all_reduce", "world", 4000, 0.05, outcome),
               Catch::EndsWith("did not finish within 0.05 s: a peer died, hung or called a "
                               "different collective; ending the job"));
  }
  SECTION("a stop that ended long before the deadline passed") {
    ScriptedClocks clocks;
    clocks.jump_at = 2;  // stopped 0.6 s early in a 1 s wait, then 0.4 s of polls
    clocks.jump = 0.6;
    clocks.wall_step = 0.05;
    const WaitOutcome outcome = poll_until(never_done, 1.0, clocks);
    CHECK_FALSE(outcome.finished);
    CHECK(outcome.stopped_seconds == 0);
  }
  SECTION("a completion test that worked (used CPU) for the whole gap") {
    ScriptedClocks clocks;
    clocks.jump_at = 3;
    clocks.jump = 5;
    clocks.cpu_step = 2.5;  // half the gap on a CPU: the process ran
    const WaitOutcome outcome = poll_until(never_done, 1.0, clocks);
    CHECK_FALSE(outcome.finished);
    CHECK(outcome.stopped_seconds == 0);
  }
}

TEST_CASE("comm: a wait that finishes reports no timeout, however long it was stopped",
          "[comm][deadline]") {
  ScriptedClocks clocks;
  clocks.jump_at = 1;
  clocks.jump = 50;
  int polls = 0;
  const WaitOutcome outcome = poll_until([&] { return ++polls == 2; }, 1.0, clocks);
  CHECK(outcome.finished);
  CHECK(static_cast<bool>(outcome));
  CHECK(outcome.stopped_seconds == 0);
}

TEST_CASE("comm: process_was_not_running: gaps far longer than a poll, with no CPU time",
          "[comm][deadline]") {
  CHECK(process_was_not_running(2.0, 0.0, 600));
  CHECK(process_was_not_running(1.01, 0.05, 600));
  CHECK_FALSE(process_was_not_running(0.9, 0.0, 600));  // a busy machine, not a stop
  CHECK_FALSE(process_was_not_running(2.0, 0.5, 600));  // it ran (a long completion test)
  CHECK(process_was_not_running(0.3, 0.0, 0.5));        // short deadlines: half of it
  CHECK_FALSE(process_was_not_running(0.2, 0.0, 0.5));
}

TEST_CASE("comm: messages name peers by world rank, with the group rank beside it",
          "[comm][deadline]") {
  auto world = make_world("emulated", {}, 4, 3);
  CHECK(world->peer_name(1) == "world rank 1");
  CHECK(world->peer_op(Op::send, 1) == "send to world rank 1");
  CHECK(world->world_rank() == 3);

  // The group of world ranks 1 and 3, seen from world rank 3 (group rank 1).
  auto pair = world->subgroup({1, 3});
  REQUIRE(pair != nullptr);
  CHECK(pair->name() == "ranks:1,3");
  CHECK(pair->world_rank() == 3);
  CHECK(pair->peer_name(0) == "world rank 1 (group rank 0)");
  CHECK(pair->peer_op(Op::recv, 0) == "recv from world rank 1 (group rank 0)");
  std::vector<float> values(4, 0.f);  // [4]
  Tensor t(values.data(), {4}, DType::f32, Device::cpu);
  REQUIRE_THROWS_WITH(pair->recv(t, 1),
                      Catch::Contains("recv on group ranks:1,3 (rank 1 of 2, world rank 3)") &&
                          Catch::Contains("peer 1 is this rank"));

  // In the world, group and world ranks are one number, named once.
  auto local = make_world("local");
  REQUIRE_THROWS_WITH(local->send(t, 0), Catch::Contains("send on group world (rank 0 of 1)"));
}
