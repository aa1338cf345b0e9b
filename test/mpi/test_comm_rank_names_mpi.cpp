// Messages about a peer inside a group name its world rank, with the group
// rank beside it: a group whose ranks run opposite to the world's (split
// with key = -rank, so group rank g is world rank size - 1 - g) makes every
// number in the message tell the two apart.
#include <catch2/catch.hpp>

#include "mpi_test_support.h"

using namespace sdp;
using namespace sdp::comm;
using namespace sdp::testing::mpi;

TEST_CASE("mpi: a recv error inside a group names the peer's world rank and group rank",
          "[mpi][comm]") {
  SDP_MPI_NEEDS_RANKS(2);
  Communicator& w = world();
  const int n = w.size(), r = w.rank();
  auto reversed = w.split(0, -r);
  REQUIRE(reversed != nullptr);
  CHECK(reversed->rank() == n - 1 - r);
  // World rank 0 (the last group rank) sends 4 values where world rank 1
  // (group rank n - 2) expects 8.
  std::vector<float> four(4, 1.f), eight(8, 0.f);  // [4], [8]
  Tensor t4 = host_view(four), t8 = host_view(eight);
  std::string message;
  if (r == 0) reversed->send(t4, n - 2);
  if (r == 1) message = error_message([&] { reversed->recv(t8, n - 1); });
  if (r == 1) {
    CHECK_THAT(message, Catch::Contains(format("recv on group ", reversed->name(), " (rank ",
                                               n - 2, " of ", n, ", world rank 1)")));
    CHECK_THAT(message, Catch::Contains(format("expected 8 f32 elements from world rank 0 "
                                               "(group rank ", n - 1, "), received 4")));
  }
  w.barrier();
}
