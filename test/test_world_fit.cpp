// A job's world against what it was configured for (engine/parallel/world_fit.h):
// a config written for another world is refused; an SDP plan that the world
// turns into single-owner components or into DDP is said, with what to do.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/parallel/parallel_settings.h"
#include "engine/parallel/world_fit.h"
#include "engine/plan/subnet_plan.h"

using namespace sdp;
using Catch::Contains;

namespace {

ParallelSettings sdp_settings(const std::string& strategy, double C) {
  ParallelSettings s;
  s.strategy = strategy;
  s.active_fraction = C;
  return s;
}

SubnetPlan cyclic(int world, double C, int components = 8) {
  PlanRequest q;
  q.world = world;
  q.components = components;
  q.active_fraction = C;
  return SubnetPlan::build(q);
}

}  // namespace

TEST_CASE("world fit: a config for another world is refused with what to do", "[world_fit]") {
  CHECK_FALSE(world_mismatch(0, 4));  // a config for any world
  CHECK_FALSE(world_mismatch(4, 4));
  const auto m = world_mismatch(8, 4);
  REQUIRE(m);
  CHECK_THAT(*m, Contains("world = 8 (the ranks this config is for) but this job has 4 ranks"));
  CHECK_THAT(*m, Contains("start it on 8 (mpirun -np 8, or --emulate-world 8"));
  CHECK_THAT(*m, Contains("or set --world 4 (or 0 for any)"));
  CHECK_THAT(*world_mismatch(2, 1), Contains("this job has 1 rank:"));
}

TEST_CASE("world fit: one owner per component is said, with the ranks and C that fix it",
          "[world_fit]") {
  // C = 0.5 on 2 ranks and 8 components: 4 each, the two halves never meet.
  const auto two = ownership_shortfall(sdp_settings("b-sdp", 0.5), cyclic(2, 0.5));
  REQUIRE(two);
  CHECK_THAT(*two, Contains("b-sdp with C = 0.5 on 2 ranks gives every component 1 owner of 2"));
  CHECK_THAT(*two, Contains("spectral gap 0.0000"));
  CHECK_THAT(*two, Contains("run on at least 4 ranks (mpirun -np 4) for C = 0.5"));
  CHECK_THAT(*two, Contains("each rank holds round(C K) = 4 of the 8 components"));
  // On 2 ranks no C gives 2 <= owners < 2: no --active-fraction advice.
  CHECK_THAT(*two, !Contains("--active-fraction"));
  // C = 0.25 on 4 ranks: 2 of 8 each; 8 ranks give 2 owners; or C >= 0.5 on 4.
  const auto four = ownership_shortfall(sdp_settings("n-sdp", 0.25), cyclic(4, 0.25));
  REQUIRE(four);
  CHECK_THAT(*four, Contains("n-sdp with C = 0.25 on 4 ranks gives every component 1 owner of 4"));
  CHECK_THAT(*four, Contains("run on at least 8 ranks (mpirun -np 8) for C = 0.25"));
  CHECK_THAT(*four, Contains("set --active-fraction to at least 0.50 on 4 ranks"));
  CHECK(cyclic(8, 0.25).owners(0).size() == 2);  // the advice holds
  CHECK(cyclic(4, 0.5).owners(0).size() == 2);
  // A written plan where only some components have one owner.
  const SubnetPlan mixed = SubnetPlan::from_matrix(
      {{true, true, false}, {false, true, true}, {false, false, true}});
  const auto some = ownership_shortfall(sdp_settings("bb-sdp", 0.5), mixed);
  REQUIRE(some);
  CHECK_THAT(*some, Contains("bb-sdp with C = 0.5 on 3 ranks gives some components 1 owner of 3"));
}

TEST_CASE("world fit: a plan that is the whole model on every rank is said to be DDP",
          "[world_fit]") {
  const auto one = ownership_shortfall(sdp_settings("b-sdp", 0.5), cyclic(1, 0.5));
  REQUIRE(one);
  CHECK_THAT(*one, Contains("b-sdp with C = 0.5 on 1 rank: its one rank owns every component: "
                            "every rank trains the whole model, which is DDP"));
  CHECK_THAT(*one, Contains("run on at least 4 ranks (mpirun -np 4) for C = 0.5"));
  // C = 0.95 of 8 components rounds to all 8 on any world.
  const auto high = ownership_shortfall(sdp_settings("b-sdp", 0.95), cyclic(2, 0.95));
  REQUIRE(high);
  CHECK_THAT(*high, Contains("b-sdp with C = 0.95 on 2 ranks: C K = 7.60 rounds to all 8 "
                             "components per rank, which is DDP"));
  CHECK_THAT(*high, Contains("set --active-fraction to at most 0.87 (7 of 8 components per rank)"));
  CHECK(cyclic(2, 0.87).owned(0).size() == 7);
}

TEST_CASE("world fit: real subnetworks, C = 1 and DDP say nothing", "[world_fit]") {
  CHECK_FALSE(ownership_shortfall(sdp_settings("b-sdp", 0.5), cyclic(4, 0.5)));
  CHECK_FALSE(ownership_shortfall(sdp_settings("b-sdp", 0.75), cyclic(3, 0.75)));
  CHECK_FALSE(ownership_shortfall(sdp_settings("b-sdp", 1.0), cyclic(2, 1.0)));
  CHECK_FALSE(ownership_shortfall(sdp_settings("ddp", 1.0), cyclic(1, 1.0)));
}
