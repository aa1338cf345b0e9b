// The rank mesh: stage-major coordinates, the lines of each axis (the
// groups of ranks one axis communicator joins) and the refusal of a world
// that is not stages x replicas; the communicators it builds on an
// emulated world.
#include <catch2/catch.hpp>

#include "comm/communicator.h"
#include "engine/core/error.h"
#include "engine/parallel/rank_mesh.h"

using namespace sdp;

TEST_CASE("a rank mesh numbers ranks stage-major and lists each axis's lines", "[mesh]") {
  const RankMesh mesh(12, 3);  // 3 stages x 4 replicas
  CHECK(mesh.world() == 12);
  CHECK(mesh.stages() == 3);
  CHECK(mesh.replicas() == 4);
  for (int rank = 0; rank < 12; ++rank) {
    CAPTURE(rank);
    CHECK(mesh.stage_of(rank) == rank / 4);
    CHECK(mesh.replica_of(rank) == rank % 4);
    CHECK(mesh.rank_at(mesh.stage_of(rank), mesh.replica_of(rank)) == rank);
    // A rank's index in its line is its coordinate on that axis.
    const std::vector<int> stage_line = mesh.line(rank, MeshAxis::pipeline);
    const std::vector<int> data_line = mesh.line(rank, MeshAxis::data);
    CHECK(stage_line.size() == 3);
    CHECK(data_line.size() == 4);
    CHECK(stage_line[static_cast<size_t>(mesh.stage_of(rank))] == rank);
    CHECK(data_line[static_cast<size_t>(mesh.replica_of(rank))] == rank);
  }
  CHECK(mesh.line(6, MeshAxis::pipeline) == std::vector<int>{2, 6, 10});
  CHECK(mesh.line(6, MeshAxis::data) == std::vector<int>{4, 5, 6, 7});
  // Every rank lies on exactly one line of each axis.
  for (const MeshAxis axis : {MeshAxis::pipeline, MeshAxis::data}) {
    std::vector<int> seen(12, 0);
    for (const std::vector<int>& line : mesh.lines(axis))
      for (int r : line) ++seen[static_cast<size_t>(r)];
    CHECK(seen == std::vector<int>(12, 1));
  }
  CHECK(mesh.lines(MeshAxis::pipeline).size() == 4);
  CHECK(mesh.lines(MeshAxis::data).size() == 3);
  const RankMesh one;
  CHECK(one.world() == 1);
  CHECK(one.line(0, MeshAxis::data) == std::vector<int>{0});
}

TEST_CASE("a rank mesh refuses a world that is not stages x replicas", "[mesh]") {
  CHECK_THROWS_AS(RankMesh(6, 4), CollectiveError);
  CHECK_THROWS_WITH(RankMesh(6, 4),
                    Catch::Contains("pipeline_stages = 4 needs a world of P x D ranks") &&
                        Catch::Contains("6 ranks is not a multiple of 4"));
  CHECK_THROWS_WITH(RankMesh(4, 2).rank_at(2, 0), Catch::Contains("stage 2, replica 0"));
}

TEST_CASE("mesh communicators join each rank's lines", "[mesh]") {
  comm::CommOptions options;
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    const std::unique_ptr<comm::Communicator> world = comm::make_world("emulated", options, 8, rank);
    {
      const RankMesh mesh(8, 2);  // 2 stages x 4 replicas
      const MeshCommunicators comms(*world, mesh);
      comm::Communicator* stages = comms.along(MeshAxis::pipeline);
      comm::Communicator* replicas = comms.along(MeshAxis::data);
      REQUIRE(stages);
      REQUIRE(replicas);
      CHECK(stages->world_ranks() == mesh.line(rank, MeshAxis::pipeline));
      CHECK(stages->rank() == mesh.stage_of(rank));
      CHECK(replicas->world_ranks() == mesh.line(rank, MeshAxis::data));
      CHECK(replicas->rank() == mesh.replica_of(rank));
    }
    // An axis spanning the world is the world; an axis of size 1 has none.
    const MeshCommunicators flat(*world, RankMesh(8, 1));
    CHECK(flat.along(MeshAxis::data) == world.get());
    CHECK(flat.along(MeshAxis::pipeline) == nullptr);
  }
}
