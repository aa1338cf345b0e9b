#pragma once
// Every parameter's whole value on every rank, by name, however the job
// holds it (sharded, split over owners or over pipeline stages), so that
// runs of different layouts can be compared value by value.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/train/trainer.h"
#include "kernels/ops.h"
#include "test/mpi/mpi_test_support.h"

namespace sdp::testing::mpi {

// A sharded group's owners contribute their shards, an unsharded group its
// root the whole; one plain-MPI sum assembles them (outside the counters).
// with_buffers adds the buffers (BatchNorm running statistics), by name.
// `contributes` false: this rank adds nothing (a job run by several groups
// of ranks alike, each its own copy, is counted once by passing true on one
// group only).
inline std::map<std::string, std::vector<double>> whole_values(Trainer& t,
                                                               bool with_buffers = false,
                                                               bool contributes = true) {
  const TrainingState& state = t.training_state();
  const ParameterSet& p = state.params();
  const SubnetLayout& L = t.layout();
  std::map<std::string, std::vector<double>> out;
  for (int g = 0; g < p.group_count(); ++g) {
    const StorageGroup& sg = L.groups[static_cast<size_t>(g)];
    // The group's own numel on every rank: a sum over ranks needs the same
    // count everywhere, and only owners know a sharded group's padding (a
    // group of 3 owners pads to a multiple of 3), which holds no value.
    const int64_t P = p.group_decl(g).numel;
    std::vector<double> whole(static_cast<size_t>(P), 0.0), sum(whole.size(), 0.0);
    if (!contributes) {
      // nothing from this rank
    } else if (state.group_shard(g).sharded()) {
      const Tensor s = state.shard_values(g);
      for (int64_t e = 0; e < s.numel() && state.shard_begin(g) + e < P; ++e)
        whole[static_cast<size_t>(state.shard_begin(g) + e)] = ops::item(s, e);
    } else if (sg.root == rank()) {
      const Tensor v = state.group_values(g);
      for (int64_t e = 0; e < v.numel(); ++e) whole[static_cast<size_t>(e)] = ops::item(v, e);
    }
    MPI_Allreduce(whole.data(), sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    for (int id = 0; id < p.count(); ++id) {
      const ParamDecl& d = p.decl(id);
      if (d.group != g || d.buffer) continue;
      out[d.name].assign(sum.begin() + d.offset, sum.begin() + d.offset + d.shape.numel());
    }
    // Buffers (BatchNorm running statistics) are never sharded: the root's.
    const int64_t B = p.group_decl(g).buffer_numel;
    if (!with_buffers || B == 0) continue;
    std::vector<double> mine(static_cast<size_t>(B), 0.0), all(mine.size(), 0.0);
    if (contributes && sg.root == rank()) {
      const Tensor v = p.group_buffers(g);
      for (int64_t e = 0; e < v.numel(); ++e) mine[static_cast<size_t>(e)] = ops::item(v, e);
    }
    MPI_Allreduce(mine.data(), all.data(), static_cast<int>(all.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    for (int id = 0; id < p.count(); ++id) {
      const ParamDecl& d = p.decl(id);
      if (d.group != g || !d.buffer) continue;
      out[d.name].assign(all.begin() + d.offset, all.begin() + d.offset + d.shape.numel());
    }
  }
  return out;
}

inline double max_difference(const std::map<std::string, std::vector<double>>& a,
                             const std::map<std::string, std::vector<double>>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (const auto& [name, va] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size()) return INFINITY;
    for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - it->second[i]));
  }
  return m;
}

}  // namespace sdp::testing::mpi
