// The planner's step-time model (engine/plan/step_time.h) against hand
// computations of the alpha-beta formulas, its overlap rule, the pipeline
// path against the simulator's own makespan, calibration recovering the
// rates that generated a synthetic metrics file, and the rank lists that
// name groups.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "comm/communicator.h"
#include "engine/plan/step_time.h"
#include "test/test_temp_dir.h"

using namespace sdp;

namespace {

// One rank's collectives: an all-reduce on `group` ("ranks:" and a rank
// list) and, as its root, a broadcast on the 8-rank world, recorded as the
// communicator counts them; the ring formulas must give the figures the
// hand computations below use.
comm::CommStats comm_record(const std::string& group, double reduce_bytes, int64_t reduce_steps,
                            double broadcast_bytes, int64_t broadcast_steps) {
  const auto k = static_cast<double>(comm::parse_rank_list(group.substr(6)).size());
  comm::CommStats s;
  // An all-reduce sends 2 (k - 1) / k of its payload.
  s.record(comm::Op::all_reduce, group, static_cast<int>(k),
           static_cast<int64_t>(reduce_bytes * k / (2 * (k - 1))), false);
  s.record(comm::Op::broadcast, "world", 8, static_cast<int64_t>(broadcast_bytes), true);
  REQUIRE(s.by_op(comm::Op::all_reduce).sent_bytes == reduce_bytes);
  REQUIRE(s.by_op(comm::Op::all_reduce).latency_steps == reduce_steps);
  REQUIRE(s.by_op(comm::Op::broadcast).sent_bytes == broadcast_bytes);
  REQUIRE(s.by_op(comm::Op::broadcast).latency_steps == broadcast_steps);
  return s;
}

}  // namespace

TEST_CASE("rank lists write runs of three or more as first-last and read back", "[plan]") {
  CHECK(comm::rank_list({0, 2, 3}) == "0,2,3");
  CHECK(comm::rank_list({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(comm::rank_list({5}) == "5");
  for (const std::vector<int>& ranks :
       {std::vector<int>{0, 2, 3}, {0, 1, 2, 3, 8}, {7}, {1, 2, 3, 10, 11, 12, 13}})
    CHECK(comm::parse_rank_list(comm::rank_list(ranks)) == ranks);
  for (const char* bad : {"", "1,", "3-1", "a", "-2", "1,,2", "1-"})
    CHECK_THROWS_WITH(comm::parse_rank_list(bad), Catch::Contains("is invalid"));
}

TEST_CASE("a collective costs latency steps x alpha + bytes / bandwidth of its link", "[plan]") {
  StepTimeModel m;
  m.flops_per_second = 1e12;
  m.link.latency_seconds = 1e-5;
  m.link.intra_node_bytes_per_second = 1e11;
  m.link.inter_node_bytes_per_second = 1e10;
  m.link.ranks_per_node = 4;
  m.link.overlap = false;
  // 8 ranks: group 0-3 is one node, the world spans two.
  const comm::CommStats comm = comm_record("ranks:0-3", 3e9, 6, 1e9, 7);
  const StepTimeEstimate e = estimate_step(m, 2e12, comm, 8);
  CHECK(e.compute_seconds == Approx(2.0));
  const double reduce = 6 * 1e-5 + 3e9 / 1e11, broadcast = 7 * 1e-5 + 1e9 / 1e10;
  CHECK(e.comm_seconds == Approx(reduce + broadcast));
  CHECK(e.exposed_comm_seconds == Approx(reduce + broadcast));
  CHECK(e.seconds == Approx(2.0 + reduce + broadcast));

  // A group spanning nodes takes the inter-node bandwidth.
  const StepTimeEstimate across = estimate_step(m, 2e12, comm_record("ranks:2-5", 3e9, 6, 1e9, 7), 8);
  CHECK(across.comm_seconds == Approx(6 * 1e-5 + 3e9 / 1e10 + broadcast));

  // With overlap the all-reduce hides behind the compute, the broadcast never.
  m.link.overlap = true;
  const StepTimeEstimate hidden = estimate_step(m, 2e12, comm, 8);
  CHECK(hidden.comm_seconds == Approx(reduce + broadcast));
  CHECK(hidden.exposed_comm_seconds == Approx(broadcast));
  // ... up to the compute's length.
  const StepTimeEstimate partly = estimate_step(m, 1e9, comm, 8);
  CHECK(partly.exposed_comm_seconds == Approx(reduce - 1e-3 + broadcast));
}

TEST_CASE("a pipelined step is the simulator's makespan plus the replica averaging", "[plan]") {
  StepTimeModel m;
  m.flops_per_second = 1.0;  // a stage of 3 M FLOPs: F = 1, B = 2 per micro-batch
  m.link.latency_seconds = 0;
  m.link.overlap = false;
  const int P = 2, M = 4;
  const StepTimeEstimate e =
      estimate_pipeline_step(m, {3.0 * M, 3.0 * M}, {0}, "1f1b", M, comm::CommStats(), 2);
  // Uniform 1F1B without link time: 3 (M + P - 1).
  CHECK(e.compute_seconds == Approx(3.0 * (M + P - 1)));
  CHECK(e.exposed_comm_seconds == 0);
  // zb-h1 shortens it to 3 M + (P - 1) (I = W = F).
  const StepTimeEstimate zb =
      estimate_pipeline_step(m, {3.0 * M, 3.0 * M}, {0}, "zb-h1", M, comm::CommStats(), 2);
  CHECK(zb.compute_seconds == Approx(3.0 * M + (P - 1)));
}

TEST_CASE("calibration recovers the rates that made a metrics file", "[plan]") {
  testing::TempDir dir;
  const std::string path = (dir.path() / "metrics.jsonl").string();
  const double rate = 2e10, alpha = 3e-4, bandwidth = 5e8;
  {
    std::ofstream out(path);
    for (int step = 1; step <= 6; ++step) {
      const double flops = 1e9 * step, bytes = 1e6 * (7 - step);
      const int64_t steps = 10 * step % 7 + 2;
      const double wait = steps * alpha + bytes / bandwidth;
      nlohmann::json record = {
          {"step", step},
          {"seconds", flops / rate + wait},
          {"flops", flops},
          {"comm", {{"wait_seconds", wait}, {"sent_bytes", bytes}, {"latency_steps", steps}}},
          {"ranks", {{"flops", {{"by_rank", {flops, flops}}}}}}};
      out << record.dump() << "\n";
    }
    out << nlohmann::json{{"final_train_loss", 1.0}}.dump() << "\n";
  }
  const MeasuredRun run = read_metrics(path);
  CHECK(run.world == 2);
  CHECK(run.seconds.size() == 5);  // the first step is left out
  const StepTimeModel m = calibrate({run}, StepTimeModel{});
  CHECK(m.flops_per_second == Approx(rate));
  CHECK(m.link.latency_seconds == Approx(alpha));
  CHECK(m.link.intra_node_bytes_per_second == Approx(bandwidth));
  CHECK_FALSE(m.link.overlap);

  std::ofstream(path) << "{\"final_train_loss\": 1}\n";
  CHECK_THROWS_WITH(read_metrics(path), Catch::Contains("has no step records"));
  CHECK_THROWS_WITH(read_metrics((dir.path() / "absent.jsonl").string()),
                    Catch::Contains("cannot read"));
}
