#pragma once
// Communicator: the only way ranks exchange data (docs/ARCHITECTURE.md, "Communicators").
// It moves flat, contiguous tensors and knows nothing about models.
//
// Every call is counted (CommStats) before the backend runs it, with the ring
// formulas of docs/ARCHITECTURE.md "Measurements": for a group of k ranks and a buffer
// of S bytes (S = the full buffer: the input of reduce_scatter, the output of
// all_gather), a rank sends
//   all_reduce      2 (k - 1) / k * S
//   reduce_scatter  (k - 1) / k * S
//   all_gather      (k - 1) / k * S
//   broadcast       S at the root, 0 elsewhere
//   send            S            (recv: 0 sent, S received)
// (A group of 1 sends nothing: every formula gives 0 there, broadcast too.)
// Beside the bytes, each call counts its latency steps, the messages a ring
// algorithm sends one after another (what a link's latency multiplies):
//   all_reduce 2 (k - 1); reduce_scatter, all_gather, broadcast, barrier
//   k - 1; send and recv 1 (a group of 1: 0).
// The counters of a communicator and of every communicator split from it are
// one shared CommStats, so a rank's totals cover all its groups.
//
// Buffers on the meta device are counted and move nothing (dry runs), on
// every backend. In-place forms: all_gather's input may be this rank's chunk
// of its output, and reduce_scatter's output may be this rank's chunk of its
// input; any other overlap of input and output is refused.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/value_difference.h"
#include "engine/core/tensor.h"

namespace sdp::comm {

enum class ReduceOp : uint8_t { sum, average };  // average = sum / group size
std::string_view reduce_op_name(ReduceOp op);     // "sum", "average"

enum class Op : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, send, recv, barrier };
inline constexpr size_t kOpCount = 7;
std::string_view op_name(Op op);

struct Traffic {
  int64_t calls = 0;
  int64_t payload_bytes = 0;  // sum of S over the calls
  double sent_bytes = 0;      // ring-formula bytes this rank sent
  int64_t latency_steps = 0;  // sequential ring messages (the table above)
  bool operator==(const Traffic&) const = default;
  void add(const Traffic& o) {
    calls += o.calls;
    payload_bytes += o.payload_bytes;
    sent_bytes += o.sent_bytes;
    latency_steps += o.latency_steps;
  }
};

// Bytes a rank of a k-rank group sends for one call on an S-byte buffer
// (the table above; `is_root` matters for broadcast only).
double ring_sent_bytes(Op op, int group_size, int64_t payload_bytes, bool is_root = false);
// Sequential messages of one call on a k-rank group (the table above).
int64_t ring_latency_steps(Op op, int group_size);

class CommStats {
 public:
  void record(Op op, const std::string& group, int group_size, int64_t payload_bytes,
              bool is_root);
  const Traffic& by_op(Op op) const { return by_op_[static_cast<size_t>(op)]; }
  const std::array<Traffic, kOpCount>& by_op() const { return by_op_; }  // [Op]
  const std::map<std::string, Traffic>& by_group() const { return by_group_; }
  // Each group's traffic by op: [group][Op].
  const std::map<std::string, std::array<Traffic, kOpCount>>& by_group_op() const {
    return by_group_op_;
  }
  Traffic total() const;
  void reset();  // e.g. at the start of each step
  // Wall time spent inside collectives (blocking calls, and the wait() of
  // asynchronous ones): how long this rank waited for communication.
  void add_wait_seconds(double s) { wait_seconds_ += s; }
  double wait_seconds() const { return wait_seconds_; }
  // {"sent_bytes", "payload_bytes", "calls", "latency_steps", "wait_seconds",
  //  "by_op": {...}, "by_group": {name: {..., "by_op": {the ops it ran}}}}
  nlohmann::json to_json() const;
  bool operator==(const CommStats&) const = default;

 private:
  std::array<Traffic, kOpCount> by_op_{};
  std::map<std::string, Traffic> by_group_;
  std::map<std::string, std::array<Traffic, kOpCount>> by_group_op_;  // the same, by op
  double wait_seconds_ = 0;
};

struct CommOptions {
  // A collective not finished within this time ends the job on every rank
  // with a message naming the operation, group and rank (a dead or diverged
  // peer never hangs the run). <= 0 waits forever.
  double timeout_seconds = 600;
};

// A collective started without waiting (Communicator::all_reduce_async,
// all_gather_async):
// its buffer must not be touched until wait() has returned. wait() applies
// the same deadline as a blocking call; calling it again does nothing. A
// handle destroyed without wait() waits in its destructor.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

// The handle the backends return: wait() runs `finish` (which waits under
// the deadline and completes the call) exactly once; an unwaited handle
// runs it in its destructor, where an error can only be swallowed.
class DeferredCollective final : public PendingCollective {
 public:
  explicit DeferredCollective(std::function<void()> finish) : finish_(std::move(finish)) {}
  ~DeferredCollective() override;
  void wait() override;

 private:
  std::function<void()> finish_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Group label used in counters and messages: "world", or "ranks:" and
  // the members' world ranks as rank_list() writes them ("ranks:0,2,3",
  // "ranks:0-15,32").
  const std::string& name() const { return name_; }
  // World ranks of the members, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  virtual std::string_view backend() const = 0;  // "local", "mpi", "emulated", "nccl"
  // Whether the ranks exchange data. False for one rank of an emulated job:
  // its collectives are counted and skipped, its receives move nothing, and
  // no other rank runs, so what needs the others' data (the loss over all
  // ranks, a full model assembled from owners) does not exist there.
  virtual bool moves_data() const { return true; }
  // A peer (a rank of this group) as messages name it: by its world rank,
  // the one launchers, logs and hostfiles use, with the group rank beside it
  // in a group other than the world: "world rank 3 (group rank 1)".
  std::string peer_name(int peer) const;
  // The operation a point-to-point deadline names: "send to world rank 1",
  // "recv from world rank 3 (group rank 1)".
  std::string peer_op(Op op, int peer) const;
  // This rank's world rank (the "[rank R]" of deadline messages).
  int world_rank() const { return world_ranks_[static_cast<size_t>(rank_)]; }

  // All buffers are contiguous; every rank passes the same shape and dtype.
  // Reductions take f32, f64, i32 (sum only) and bf16 (device backends);
  // the others move any dtype. Every call waits until it has finished.
  void all_reduce(Tensor& buffer, ReduceOp op);
  // Starts the same all-reduce and returns at once, so that the caller can
  // go on computing (gradient buckets during backward). Counted when
  // started. Backends with no asynchronous form finish it before returning.
  std::unique_ptr<PendingCollective> all_reduce_async(Tensor& buffer, ReduceOp op);
  // input [size * n] -> output [n]: this rank's reduced chunk.
  void reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op);
  // input [n] -> output [size * n], chunks in group-rank order.
  void all_gather(const Tensor& input, Tensor& output);
  // Starts the same all-gather and returns at once (a sharded model's next
  // parameters, gathered while the current ones compute); `output` must
  // not be read, nor `input` written, until wait(). Counted when started.
  std::unique_ptr<PendingCollective> all_gather_async(const Tensor& input, Tensor& output);
  void broadcast(Tensor& buffer, int root);
  void send(const Tensor& buffer, int peer);
  void recv(Tensor& buffer, int peer);
  // Starts the same send and returns at once: a pipeline stage sends an
  // activation or gradient and goes on computing, so that two stages
  // sending to each other cannot block each other. `buffer` must stay alive
  // and unchanged until wait(). Counted when started, like send. Sends to
  // one peer arrive in the order they were started; recv matches them in
  // that order.
  std::unique_ptr<PendingCollective> send_async(const Tensor& buffer, int peer);
  void barrier();

  // MPI_Comm_split semantics, collective over this communicator: ranks with
  // the same color form a group ordered by (key, rank); color < 0 opts out
  // and gets nullptr.
  std::unique_ptr<Communicator> split(int color, int key);
  // The group of the listed members (ranks of *this* communicator, sorted,
  // unique). Collective: every rank calls it with the same list; non-members
  // get nullptr. Named "ranks:a,b,c" (world ranks). A member's rank in the
  // group is its index in `members`.
  std::unique_ptr<Communicator> subgroup(const std::vector<int>& members);

  CommStats& stats() { return *stats_; }
  const CommStats& stats() const { return *stats_; }
  const CommOptions& options() const { return options_; }

 protected:
  Communicator(int rank, int size, std::string name, std::vector<int> world_ranks,
               std::shared_ptr<CommStats> stats, CommOptions options);
  const std::shared_ptr<CommStats>& shared_stats() const { return stats_; }

  virtual void do_all_reduce(Tensor& buffer, ReduceOp op) = 0;
  // Default: do_all_reduce, then an already finished handle.
  virtual std::unique_ptr<PendingCollective> do_all_reduce_async(Tensor& buffer, ReduceOp op);
  virtual void do_reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) = 0;
  virtual void do_all_gather(const Tensor& input, Tensor& output) = 0;
  // Default: do_all_gather, then an already finished handle.
  virtual std::unique_ptr<PendingCollective> do_all_gather_async(const Tensor& input,
                                                                 Tensor& output);
  virtual void do_broadcast(Tensor& buffer, int root) = 0;
  virtual void do_send(const Tensor& buffer, int peer) = 0;
  virtual void do_recv(Tensor& buffer, int peer) = 0;
  // Default: do_send, then an already finished handle.
  virtual std::unique_ptr<PendingCollective> do_send_async(const Tensor& buffer, int peer);
  virtual void do_barrier() = 0;
  // Returns the new group (or nullptr when color < 0), constructed with its
  // world ranks and an empty name: split() and subgroup() name it.
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;
  // Default: split(member ? 0 : -1, rank()). A backend that cannot split by
  // color (emulated) builds the group from the list instead. `members` has
  // been checked (sorted, unique, in range).
  virtual std::unique_ptr<Communicator> do_subgroup(const std::vector<int>& members);
  // Refuses, with sdp::Error, a buffer this backend cannot move (a device it
  // does not serve, a dtype it cannot reduce); runs before the call is
  // counted. `reduces` is true for all_reduce and reduce_scatter.
  virtual void check_supported(Op op, const Tensor& buffer, bool reduces) const;
  // Checks and counts an all-gather; false when nothing is to move (meta).
  bool start_all_gather(const Tensor& input, Tensor& output);
  // The start of every argument error: "all_reduce on group world (rank 1 of
  // 4)"; in a group other than the world, this rank's world rank beside its
  // group rank: "recv on group ranks:1,3 (rank 1 of 2, world rank 3)".
  std::string where(Op op) const;

 private:
  int rank_, size_;
  std::string name_;
  std::vector<int> world_ranks_;
  std::shared_ptr<CommStats> stats_;
  CommOptions options_;
};

// Builds the world communicator for `backend`:
//   "local"    world of 1 (no MPI needed)
//   "mpi"      MPI_COMM_WORLD (MPI must be initialized: MpiRuntime)
//   "emulated" rank `emulate_rank` of an `emulate_world`-rank job in one
//              process: collectives leave buffers as they are but are
//              counted exactly like real ones
//   "nccl"     device buffers (host buffers go through MPI, or the local
//              communicator in a world of one); under mpirun it is
//              bootstrapped through MPI and selects the GPU (node-local rank %
//              GPUs on the node) for the calling thread; without MPI it is a
//              world of one rank on the current GPU (needs a build with CUDA
//              and NCCL).
std::unique_ptr<Communicator> make_world(std::string_view backend, CommOptions options = {},
                                         int emulate_world = 1, int emulate_rank = 0);

// Every rank's `mine` (the same count of 32-bit words on every rank, host
// memory), gathered in group-rank order: [size * mine.size()]. Each chunk
// starts as this rank's words, so that an emulated world (no peers, nothing
// arrives) agrees with itself. Collective; the small exchanges of start-up
// and resume checks use it.
std::vector<int32_t> all_gather_host_words(Communicator& comm, std::span<const int32_t> mine);

// Throws sdp::CollectiveError naming the ranks whose value differs from rank 0's and
// `what` differs (e.g. "the run configuration"), and how the first differing
// rank's value differs from rank 0's (`describe`); every rank throws the same
// message, so the job ends on every rank at once. Equal values cost one
// all_gather of a 64-bit hash of `value` (counted) on host buffers; only when
// the hashes differ are the values themselves gathered (their lengths, then
// the bytes), so every rank can describe the difference.
// Ranks in their order, comma-separated, a run of three or more consecutive
// ranks written first-last: "0,2,3", "0-15,32". Group names stay short on
// large worlds (half of a 65,536-rank world is "0-32767", not 190 kB).
std::string rank_list(const std::vector<int>& ranks);
// The inverse of rank_list; fails naming the text on anything else.
std::vector<int> parse_rank_list(const std::string& text);

void require_same_on_all_ranks(Communicator& comm, const std::string& what,
                               const std::string& value,
                               const DescribeDifference& describe = describe_text_difference);

}  // namespace sdp::comm
