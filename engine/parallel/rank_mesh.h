#pragma once
// The ranks of a job as a grid of named axes, and the one place that turns a
// rank into coordinates and back. Two axes today:
//   pipeline  P stages; a replica's stages exchange activations and input
//             gradients (engine/pipeline)
//   data      D replicas of each stage; they split the step's samples and
//             run the ownership plan (SDP, sharding) among themselves
// Ranks are stage-major: rank = stage * D + replica, so the replicas of a
// stage are neighbouring ranks (on one node when D divides the ranks per
// node: their collectives are the heavy ones) and the stages of a replica
// are D apart. A new axis (tensor or context parallelism) is one more entry
// of MeshAxis with its size and place in this order; everything that asks
// for "the ranks I share a stage with" or "my replica index" goes through
// here, and the communicators of each axis come from MeshCommunicators.
#include <array>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace sdp {

enum class MeshAxis : int { pipeline = 0, data = 1 };
inline constexpr int kMeshAxes = 2;
const char* mesh_axis_name(MeshAxis axis);  // "pipeline", "data"

class RankMesh {
 public:
  // One rank, one stage.
  RankMesh() = default;
  // `world` ranks as `stages` x world / stages. Throws CollectiveError
  // (every rank computes the same) when stages does not divide the world.
  RankMesh(int world, int stages);

  int world() const { return world_; }
  int size(MeshAxis axis) const { return sizes_[static_cast<size_t>(axis)]; }
  int stages() const { return size(MeshAxis::pipeline); }
  int replicas() const { return size(MeshAxis::data); }

  // A rank's coordinate on `axis`, and the rank at given coordinates.
  int coordinate(int rank, MeshAxis axis) const;
  int stage_of(int rank) const { return coordinate(rank, MeshAxis::pipeline); }
  int replica_of(int rank) const { return coordinate(rank, MeshAxis::data); }
  int rank_at(int stage, int replica) const;

  // The ranks that differ from `rank` only along `axis`, ordered by their
  // coordinate on it (so a rank's index in the list is that coordinate).
  std::vector<int> line(int rank, MeshAxis axis) const;
  // Every line of `axis`, each once, in a fixed order: the order in which
  // every rank builds the axis's communicators.
  std::vector<std::vector<int>> lines(MeshAxis axis) const;

 private:
  int world_ = 1;
  std::array<int, kMeshAxes> sizes_{1, 1};
};

// One rank's communicator along each axis of a mesh. Collective over the
// world to build: every rank asks for every line of every axis in the same
// order. An axis of size 1 has none (nullptr); an axis that spans the whole
// world is the world itself.
class MeshCommunicators {
 public:
  MeshCommunicators(comm::Communicator& world, const RankMesh& mesh);
  // The ranks of this rank's line along `axis` (group rank = coordinate).
  comm::Communicator* along(MeshAxis axis) const { return along_[static_cast<size_t>(axis)]; }

 private:
  std::vector<std::unique_ptr<comm::Communicator>> owned_;
  std::array<comm::Communicator*, kMeshAxes> along_{};
};

}  // namespace sdp
