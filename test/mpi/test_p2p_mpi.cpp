// Point-to-point for pipelines on the mpi backend (ctest runs it with 2 and
// 4 ranks): sends started with send_async before the matching receives,
// in both directions at once, with messages large enough for MPI's
// rendezvous protocol (a blocking send of one would wait for its receive,
// so two ranks sending to each other first would deadlock); several
// messages in flight per pair, matched in the order they were started;
// handles destroyed without wait(); counters. The deadline of a send whose
// receiver never comes is held by comm_fault_probe (test/mpi/CMakeLists.txt),
// since it ends the job.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "test/mpi/mpi_test_support.h"

using namespace sdp;
using namespace sdp::comm;
using namespace sdp::testing::mpi;

namespace {

constexpr size_t kLarge = 2 * 1024 * 1024;  // f32 elements: 8 MiB, well past rendezvous
constexpr size_t kChain = 256 * 1024;       // 1 MiB, also past it

// Element i of message `tag` sent by rank `sender`: exact in f32 (below
// 2^24), and different for every (sender, tag) and nearby i, so a message
// matched to the wrong receive or cut short shows.
float message_value(int sender, int tag, size_t i) {
  return static_cast<float>((i % 1024) + 1024 * static_cast<size_t>(sender + 8 * tag));
}

std::vector<float> message(int sender, int tag, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = message_value(sender, tag, i);
  return v;
}

// How many elements of `got` differ from message(sender, tag): 0 when right.
size_t wrong_elements(const std::vector<float>& got, int sender, int tag) {
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != message_value(sender, tag, i);
  return wrong;
}

}  // namespace

TEST_CASE("mpi send_async: partners send to each other before receiving, in mixed orders",
          "[mpi][p2p]") {
  Communicator& w = world();
  const int r = w.rank();
  const int partner = r ^ 1;  // pairs (0, 1), (2, 3)
  if (partner >= w.size()) return;  // an odd job size leaves the last rank out
  w.stats().reset();
  const int rounds = 6;
  int64_t messages = 0;
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round);
    // Two messages each way per round; tags 2 * round and 2 * round + 1.
    std::vector<float> out0 = message(r, 2 * round, kLarge), out1 = message(r, 2 * round + 1, kLarge);
    std::vector<float> in0(kLarge, -1.f), in1(kLarge, -1.f);
    Tensor o0 = host_view(out0), o1 = host_view(out1), i0 = host_view(in0), i1 = host_view(in1);
    const int order = round % 3;
    if (order == 0) {
      // Both sends in flight, then both receives.
      auto s0 = w.send_async(o0, partner);
      auto s1 = w.send_async(o1, partner);
      w.recv(i0, partner);
      w.recv(i1, partner);
      s1->wait();  // waits in either order
      s0->wait();
    } else if (order == 1) {
      // Send, receive, send, receive.
      auto s0 = w.send_async(o0, partner);
      w.recv(i0, partner);
      auto s1 = w.send_async(o1, partner);
      w.recv(i1, partner);
      s0->wait();
      s1->wait();
    } else {
      // The partners disagree on the interleaving: the lower rank sends
      // both first, the higher one receives one in between.
      auto s0 = w.send_async(o0, partner);
      std::unique_ptr<PendingCollective> s1;
      if (r < partner) s1 = w.send_async(o1, partner);
      w.recv(i0, partner);
      if (r > partner) s1 = w.send_async(o1, partner);
      w.recv(i1, partner);
      s0->wait();
      s1->wait();
    }
    messages += 2;
    CHECK(wrong_elements(in0, partner, 2 * round) == 0);
    CHECK(wrong_elements(in1, partner, 2 * round + 1) == 0);
    CHECK(wrong_elements(out0, r, 2 * round) == 0);  // a send leaves its buffer as it was
  }
  const double bytes = static_cast<double>(kLarge * sizeof(float));
  CHECK(w.stats().by_op(Op::send).calls == messages);
  CHECK(w.stats().by_op(Op::send).sent_bytes == messages * bytes);
  CHECK(w.stats().by_op(Op::recv).calls == messages);
  CHECK(w.stats().by_op(Op::recv).sent_bytes == 0);
  CHECK(w.stats().by_op(Op::recv).payload_bytes == messages * static_cast<int64_t>(bytes));
  CHECK(w.stats().total().sent_bytes == messages * bytes);
}

// A pipeline's traffic over every rank as a stage: activations forward
// (r -> r + 1), then gradients backward (r -> r - 1), each stage passing a
// message on as soon as it has one and waiting for its sends only at the
// end, so several are in flight on each link and must arrive in order.
TEST_CASE("mpi send_async: a chain forward and back with messages in flight, in order",
          "[mpi][p2p]") {
  Communicator& w = world();
  const int r = w.rank(), P = w.size();
  const int M = 4;  // micro-batches
  w.stats().reset();
  std::vector<std::vector<float>> sent;  // [sends][kChain], alive until waited
  sent.reserve(2 * M);
  std::vector<std::unique_ptr<PendingCollective>> pending;
  std::vector<float> in(kChain);
  Tensor in_view = host_view(in);
  size_t wrong = 0;
  // Forward: tag mb; backward: tag M + mb.
  for (int mb = 0; mb < M; ++mb) {
    if (r > 0) {
      w.recv(in_view, r - 1);
      wrong += wrong_elements(in, r - 1, mb);
    }
    if (r < P - 1) {
      sent.push_back(message(r, mb, kChain));
      pending.push_back(w.send_async(host_view(sent.back()), r + 1));
    }
  }
  for (int mb = 0; mb < M; ++mb) {
    if (r < P - 1) {
      w.recv(in_view, r + 1);
      wrong += wrong_elements(in, r + 1, M + mb);
    }
    if (r > 0) {
      sent.push_back(message(r, M + mb, kChain));
      pending.push_back(w.send_async(host_view(sent.back()), r - 1));
    }
  }
  for (auto& p : pending) p->wait();
  CHECK(wrong == 0);
  const int links = (r > 0) + (r < P - 1);  // neighbours: each gets M and sends M
  CHECK(w.stats().by_op(Op::send).calls == links * M);
  CHECK(w.stats().by_op(Op::recv).calls == links * M);
  CHECK(w.stats().by_op(Op::send).sent_bytes ==
        static_cast<double>(links * M) * kChain * sizeof(float));
  CHECK(w.stats().by_op(Op::recv).sent_bytes == 0);
}

TEST_CASE("mpi send_async: a handle destroyed without wait still delivers", "[mpi][p2p]") {
  Communicator& w = world();
  const int r = w.rank();
  const int partner = r ^ 1;
  if (partner >= w.size()) return;
  // The lower rank of each pair drops its handle at once: the destructor
  // waits until the receiver, which starts late, has taken the message.
  std::vector<float> out = message(r, 0, kLarge), in(kLarge, -1.f);
  Tensor in_view = host_view(in);
  if (r < partner) {
    auto pending = w.send_async(host_view(out), partner);
    pending.reset();
    // The message has left: the buffer may change now.
    std::fill(out.begin(), out.end(), 0.f);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    w.recv(in_view, partner);
    CHECK(wrong_elements(in, partner, 0) == 0);
  }
  // And the other way, the handle dropped without ever being waited for
  // while the receive is already posted.
  std::vector<float> back = message(r, 1, kLarge);
  if (r > partner) {
    w.send_async(host_view(back), partner);  // the temporary handle dies here
  } else {
    w.recv(in_view, partner);
    CHECK(wrong_elements(in, partner, 1) == 0);
  }
}
