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

#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "engine/core/allocator.h"
#include "engine/core/counter_rng.h"
#include "engine/core/tensor.h"

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
