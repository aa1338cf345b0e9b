#pragma once
// Shared by the MPI test files (test/mpi/*.cpp, run under mpiexec by ctest):
// the job's world communicator, built once in mpi_main.cpp, and small
// helpers that keep every rank's assertions and collectives in step.
//
// Rules for tests here: every rank runs every TEST_CASE in the same order
// and must call the same collectives in the same order, so check values with
// CHECK (which does not leave the test case) rather than REQUIRE, unless the
// condition is the same on every rank. A rank that leaves a test early makes
// the others' next collective time out, which ends the job with a message.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "engine/core/allocator.h"
#include "engine/core/counter_rng.h"
#include "engine/core/tensor.h"
#include "engine/parallel/strategy.h"
#include "engine/train/train_config.h"
#include "models/common/parameter_set.h"

namespace sdp::testing::mpi {

// The world communicator (mpi backend) of the test job. Its counters are
// shared by every group split from it; tests that check counters reset them
// first (world().stats().reset()).
comm::Communicator& world();

inline int rank() { return world().rank(); }
inline int size() { return world().size(); }

// Host tensor viewing `values`: [values.size()].
template <typename T>
Tensor host_view(std::vector<T>& values) {
  return Tensor(values.data(), {static_cast<int64_t>(values.size())}, dtype_of<T>::value,
                Device::cpu);
}

// True on every rank when `ok` holds on every rank. Goes around the
// communicators (plain MPI on MPI_COMM_WORLD), so no counter changes.
inline bool on_all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// A hash of a host tensor's bytes (owners compare their copies).
inline uint64_t bytes_hash(const Tensor& t) {
  return stable_hash(std::string_view(static_cast<const char*>(t.raw()),
                                      static_cast<size_t>(t.numel()) * dtype_size(t.dtype())));
}

// Bytes of `numel` elements of `dtype` as allocator `a` rounds them.
inline size_t held_bytes(const Allocator& a, int64_t numel, DType dtype) {
  return a.rounded(static_cast<size_t>(numel) * dtype_size(dtype));
}

// What a rank's f32 state should take by the plan: parameters (and buffers)
// of every held group, gradients and two AdamW moments of every owned one;
// and whether the groups' held / trained flags follow the plan (held = owned
// under forward masking, everything under backward masking; trained = owned).
struct StateBytes {
  size_t params = 0, grads = 0, moments = 0;
  int64_t held_numel = 0;
  bool flags_follow_plan = true;
};
inline StateBytes expected_state(const SubnetLayout& L, const ParameterSet& p, const Allocator& a,
                                 int rank) {
  StateBytes b;
  for (int g = 0; g < p.group_count(); ++g) {
    const StorageGroup& sg = L.groups[static_cast<size_t>(g)];
    const ParamGroupDecl& d = p.group_decl(g);
    const bool owner = std::find(sg.owners.begin(), sg.owners.end(), rank) != sg.owners.end();
    b.flags_follow_plan &= d.trained == owner;
    b.flags_follow_plan &= d.materialized == (owner || L.spec.masking == Masking::backward);
    if (d.materialized) {
      b.params += held_bytes(a, d.numel, DType::f32);
      if (d.buffer_numel > 0) b.params += held_bytes(a, d.buffer_numel, DType::f32);
      b.held_numel += d.numel;
    }
    if (owner) {
      b.grads += held_bytes(a, d.numel, DType::f32);
      b.moments += 2 * held_bytes(a, d.numel, DType::f32);
    }
  }
  return b;
}

// What one f32 training step of rank `rank` sends by the ring formulas: one
// all-reduce per owned group with more than one owner, plus the control
// all-reduce over the world of two doubles and one per top-k accuracy the
// model counts (`accuracies`: 0 for LLaMA); backward masking adds one
// broadcast per group not owned by every rank, sent by its root. (Buffers,
// such as BatchNorm statistics, do not travel in a step.)
struct StepTraffic {
  double reduce_bytes = 0, broadcast_bytes = 0;
  int64_t reduce_calls = 0, broadcast_calls = 0;
};
inline StepTraffic analytic_step_traffic(const SubnetLayout& L, const ParameterSet& p, int rank,
                                         int accuracies = 0) {
  const int N = L.world;
  StepTraffic t;
  t.reduce_bytes = 2.0 * (N - 1) / N * 8 * (2 + accuracies);
  t.reduce_calls = 1;
  for (int g = 0; g < p.group_count(); ++g) {
    const StorageGroup& sg = L.groups[static_cast<size_t>(g)];
    const double S = static_cast<double>(p.group_decl(g).numel) * 4;
    const int k = static_cast<int>(sg.owners.size());
    if (p.group_decl(g).trained && k > 1) {
      t.reduce_bytes += 2.0 * (k - 1) / k * S;
      ++t.reduce_calls;
    }
    if (L.spec.masking == Masking::backward && !L.all_ranks(sg)) {
      ++t.broadcast_calls;
      if (sg.root == rank) t.broadcast_bytes += S;
    }
  }
  return t;
}

// The small LLaMA job the training tests start from: "mini" has 4 blocks
// of 4 heads, so plans have real overlap at 4 ranks.
inline TrainConfig mini_job_config(const std::string& strategy, double active_fraction = 1.0) {
  TrainConfig c;
  c.model = "mini";
  c.batch = 2;
  c.seq = 16;
  c.steps = 4;
  c.warmup = 1;
  c.lr = 1e-2;
  c.eval_every = 0;
  c.eval_batches = 2;
  c.progress = false;
  c.parallel.strategy = strategy;
  c.parallel.active_fraction = active_fraction;
  c.comm_timeout = 60;
  return c;
}

// One temporary path for every rank, named by rank 0's pid (a plain-MPI
// broadcast, outside the counted communicators).
inline std::string same_path_everywhere(const std::string& stem) {
  long long id = static_cast<long long>(::getpid());
  MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / (stem + "." + std::to_string(id))).string();
}

// Whether every rank holds the same bytes in every held group (plain MPI).
inline bool same_parameters_everywhere(const ParameterSet& p) {
  bool same = true;
  for (int g = 0; g < p.group_count(); ++g) {
    uint64_t mine = bytes_hash(p.group_params(g));
    std::vector<uint64_t> all(static_cast<size_t>(size()));
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (uint64_t h : all) same &= h == all[0];
  }
  return same;
}

// The message of the sdp::Error that fn() throws; "" when it throws none.
template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

}  // namespace sdp::testing::mpi

// Leaves a test case (on every rank alike) when the job has fewer ranks
// than it needs, saying so.
#define SDP_MPI_NEEDS_RANKS(n)                                                   \
  do {                                                                           \
    if (::sdp::testing::mpi::size() < (n)) {                                     \
      WARN("skipped: needs " << (n) << " ranks, the job has "                    \
                             << ::sdp::testing::mpi::size());                    \
      return;                                                                    \
    }                                                                            \
  } while (0)
