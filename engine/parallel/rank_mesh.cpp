#include "engine/parallel/rank_mesh.h"

#include "engine/core/error.h"

namespace sdp {

const char* mesh_axis_name(MeshAxis axis) {
  return axis == MeshAxis::pipeline ? "pipeline" : "data";
}

RankMesh::RankMesh(int world, int stages) : world_(world) {
  SDP_CHECK(world >= 1 && stages >= 1, "a mesh of ", world, " ranks and ", stages, " stages");
  if (world % stages != 0)
    throw CollectiveError(format("pipeline_stages = ", stages, " needs a world of P x D ranks (D ",
                                 "data-parallel replicas of each stage); ", world,
                                 " ranks is not a multiple of ", stages));
  sizes_ = {stages, world / stages};
}

int RankMesh::coordinate(int rank, MeshAxis axis) const {
  SDP_CHECK(rank >= 0 && rank < world_, "rank ", rank, " of a ", world_, "-rank mesh");
  return axis == MeshAxis::pipeline ? rank / replicas() : rank % replicas();
}

int RankMesh::rank_at(int stage, int replica) const {
  SDP_CHECK(stage >= 0 && stage < stages() && replica >= 0 && replica < replicas(), "stage ",
            stage, ", replica ", replica, " of a ", stages(), " x ", replicas(), " mesh");
  return stage * replicas() + replica;
}

std::vector<int> RankMesh::line(int rank, MeshAxis axis) const {
  std::vector<int> out;
  const int stage = stage_of(rank), replica = replica_of(rank);
  if (axis == MeshAxis::pipeline)
    for (int s = 0; s < stages(); ++s) out.push_back(rank_at(s, replica));
  else
    for (int d = 0; d < replicas(); ++d) out.push_back(rank_at(stage, d));
  return out;
}

std::vector<std::vector<int>> RankMesh::lines(MeshAxis axis) const {
  std::vector<std::vector<int>> out;
  // One line per coordinate of the other axis.
  if (axis == MeshAxis::pipeline)
    for (int d = 0; d < replicas(); ++d) out.push_back(line(rank_at(0, d), axis));
  else
    for (int s = 0; s < stages(); ++s) out.push_back(line(rank_at(s, 0), axis));
  return out;
}

MeshCommunicators::MeshCommunicators(comm::Communicator& world, const RankMesh& mesh) {
  SDP_CHECK(world.size() == mesh.world(), "a ", mesh.world(), "-rank mesh on a ", world.size(),
            "-rank world");
  for (const MeshAxis axis : {MeshAxis::pipeline, MeshAxis::data}) {
    comm::Communicator*& mine = along_[static_cast<size_t>(axis)];
    if (mesh.size(axis) == 1) continue;
    if (mesh.size(axis) == mesh.world()) {
      mine = &world;
      continue;
    }
    for (const std::vector<int>& members : mesh.lines(axis)) {
      std::unique_ptr<comm::Communicator> group = world.subgroup(members);
      if (group) {
        owned_.push_back(std::move(group));
        mine = owned_.back().get();
      }
    }
  }
}

}  // namespace sdp
