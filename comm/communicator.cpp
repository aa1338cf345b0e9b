// The backend-independent half of every call: argument checks with messages
// that name the op, group and rank, counting, group naming, and the
// all-ranks-agree check built on all_gather.
#include "comm/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

namespace sdp::comm {

namespace {

void check_buffer(const std::string& at, const Tensor& t, const char* arg) {
  if (!t.defined()) fail(at, ": ", arg, " has no storage (", t.describe(), ")");
  if (!t.is_contiguous()) fail(at, ": ", arg, " must be contiguous, got ", t.describe());
}

void check_reducible(const std::string& at, const Tensor& t, ReduceOp op) {
  const DType d = t.dtype();
  if (d != DType::f32 && d != DType::f64 && d != DType::i32 && d != DType::bf16)
    fail(at, ": cannot reduce a ", dtype_name(d), " buffer (valid: f32, f64, i32, bf16)");
  // Integer division would truncate silently; token counts and flags are summed.
  if (op == ReduceOp::average && d == DType::i32)
    fail(at, ": average of an i32 buffer is refused (it would truncate); average needs "
         "f32, f64 or bf16, and i32 buffers can only be summed");
}

void check_pair(const std::string& at, const Tensor& input, const Tensor& output) {
  if (input.dtype() != output.dtype())
    fail(at, ": input is ", dtype_name(input.dtype()), " but output is ",
         dtype_name(output.dtype()), " (both must have the same dtype)");
  if (input.device() != output.device())
    fail(at, ": input is on ", device_name(input.device()), " but output is on ",
         device_name(output.device()), " (both must be on the same device)");
}

// Input and output may coincide only in the in-place form: `part` (one
// rank's chunk) is exactly chunk `rank` of `whole`.
void check_overlap(const std::string& at, const Tensor& whole, const Tensor& part, int rank,
                   const char* in_place_form) {
  const auto* w = static_cast<const char*>(whole.raw());
  const auto* p = static_cast<const char*>(part.raw());
  if (whole.bytes() == 0 || part.bytes() == 0) return;
  const bool overlap = p < w + whole.bytes() && w < p + part.bytes();
  if (overlap && p != w + static_cast<size_t>(rank) * part.bytes())
    fail(at, ": input and output overlap; the only overlap allowed is the in-place form (",
         in_place_form, ")");
}

// FNV-1a: stable across runs, compilers and machines (std::hash is not).
uint64_t stable_hash64(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}


// Runs `call` and adds its wall time to the waiting time of `stats`.
template <typename Call>
auto timed(CommStats& stats, Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  struct Stop {
    CommStats& stats;
    std::chrono::steady_clock::time_point start;
    ~Stop() {
      stats.add_wait_seconds(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  } stop{stats, start};
  return call();
}

// An asynchronous collective whose wait() is counted as waiting time.
class TimedCollective final : public PendingCollective {
 public:
  TimedCollective(std::unique_ptr<PendingCollective> inner, CommStats& stats)
      : inner_(std::move(inner)), stats_(stats) {}
  void wait() override { timed(stats_, [&] { inner_->wait(); }); }

 private:
  std::unique_ptr<PendingCollective> inner_;
  CommStats& stats_;
};

}  // namespace

Communicator::Communicator(int rank, int size, std::string name, std::vector<int> world_ranks,
                           std::shared_ptr<CommStats> stats, CommOptions options)
    : rank_(rank), size_(size), name_(std::move(name)), world_ranks_(std::move(world_ranks)),
      stats_(std::move(stats)), options_(options) {
  SDP_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "communicator rank ", rank_,
            " of size ", size_, " is invalid (valid: size >= 1, 0 <= rank < size)");
  SDP_CHECK(static_cast<int>(world_ranks_.size()) == size_, "communicator of size ", size_,
            " given ", world_ranks_.size(), " world ranks");
  SDP_CHECK(stats_ != nullptr, "communicator needs a CommStats");
}

// Group ranks are what the API takes (peer, root), world ranks what a person
// reading the message can find (mpirun's ranks, the "[rank R]" prefixes), so
// a message inside a group names both; in the world they are one number.
std::string Communicator::where(Op op) const {
  const bool in_world = world_ranks_.size() == 1 || name_ == "world";
  return format(op_name(op), " on group ", name_, " (rank ", rank_, " of ", size_,
                in_world ? std::string() : format(", world rank ", world_rank()), ")");
}

std::string Communicator::peer_name(int peer) const {
  if (peer < 0 || peer >= size_) return format("group rank ", peer, " (out of range)");
  const int world = world_ranks_[static_cast<size_t>(peer)];
  if (name_ == "world" && world == peer) return format("world rank ", world);
  return format("world rank ", world, " (group rank ", peer, ")");
}

std::string Communicator::peer_op(Op op, int peer) const {
  return format(op_name(op), op == Op::send ? " to " : " from ", peer_name(peer));
}

void Communicator::check_supported(Op, const Tensor&, bool) const {}

void Communicator::all_reduce(Tensor& buffer, ReduceOp op) {
  const std::string at = where(Op::all_reduce);
  check_buffer(at, buffer, "buffer");
  check_reducible(at, buffer, op);
  check_supported(Op::all_reduce, buffer, true);
  stats_->record(Op::all_reduce, name_, size_, static_cast<int64_t>(buffer.bytes()), false);
  if (buffer.device() == Device::meta) return;
  timed(*stats_, [&] { do_all_reduce(buffer, op); });
}

DeferredCollective::~DeferredCollective() {
  try {
    wait();
  } catch (...) {
    // A failed collective has ended the job or thrown from wait() already.
  }
}

void DeferredCollective::wait() {
  if (!finish_) return;
  auto finish = std::move(finish_);
  finish_ = nullptr;
  finish();
}

namespace {
struct FinishedCollective final : PendingCollective {
  void wait() override {}
};
}  // namespace

std::unique_ptr<PendingCollective> Communicator::all_reduce_async(Tensor& buffer, ReduceOp op) {
  const std::string at = where(Op::all_reduce);
  check_buffer(at, buffer, "buffer");
  check_reducible(at, buffer, op);
  check_supported(Op::all_reduce, buffer, true);
  stats_->record(Op::all_reduce, name_, size_, static_cast<int64_t>(buffer.bytes()), false);
  if (buffer.device() == Device::meta) return std::make_unique<FinishedCollective>();
  return std::make_unique<TimedCollective>(timed(*stats_, [&] { return do_all_reduce_async(buffer, op); }), *stats_);
}

std::unique_ptr<PendingCollective> Communicator::do_all_reduce_async(Tensor& buffer,
                                                                     ReduceOp op) {
  do_all_reduce(buffer, op);
  return std::make_unique<FinishedCollective>();
}

void Communicator::reduce_scatter(const Tensor& input, Tensor& output, ReduceOp op) {
  const std::string at = where(Op::reduce_scatter);
  check_buffer(at, input, "input");
  check_buffer(at, output, "output");
  check_pair(at, input, output);
  check_reducible(at, input, op);
  if (input.numel() != size_ * output.numel())
    fail(at, ": input has ", input.numel(), " elements, expected group size ", size_,
         " * output elements ", output.numel(), " = ", size_ * output.numel());
  check_overlap(at, input, output, rank_, "output = this rank's chunk of input");
  check_supported(Op::reduce_scatter, input, true);
  stats_->record(Op::reduce_scatter, name_, size_, static_cast<int64_t>(input.bytes()), false);
  if (input.device() == Device::meta) return;
  timed(*stats_, [&] { do_reduce_scatter(input, output, op); });
}

void Communicator::all_gather(const Tensor& input, Tensor& output) {
  if (!start_all_gather(input, output)) return;
  timed(*stats_, [&] { do_all_gather(input, output); });
}

std::unique_ptr<PendingCollective> Communicator::all_gather_async(const Tensor& input,
                                                                  Tensor& output) {
  if (!start_all_gather(input, output)) return std::make_unique<FinishedCollective>();
  return std::make_unique<TimedCollective>(timed(*stats_, [&] { return do_all_gather_async(input, output); }), *stats_);
}

std::unique_ptr<PendingCollective> Communicator::do_all_gather_async(const Tensor& input,
                                                                     Tensor& output) {
  do_all_gather(input, output);
  return std::make_unique<FinishedCollective>();
}

bool Communicator::start_all_gather(const Tensor& input, Tensor& output) {
  const std::string at = where(Op::all_gather);
  check_buffer(at, input, "input");
  check_buffer(at, output, "output");
  check_pair(at, input, output);
  if (output.numel() != size_ * input.numel())
    fail(at, ": output has ", output.numel(), " elements, expected group size ", size_,
         " * input elements ", input.numel(), " = ", size_ * input.numel());
  check_overlap(at, output, input, rank_, "input = this rank's chunk of output");
  check_supported(Op::all_gather, input, false);
  stats_->record(Op::all_gather, name_, size_, static_cast<int64_t>(output.bytes()), false);
  return input.device() != Device::meta;
}

void Communicator::broadcast(Tensor& buffer, int root) {
  const std::string at = where(Op::broadcast);
  check_buffer(at, buffer, "buffer");
  if (root < 0 || root >= size_)
    fail(at, ": root ", root, " is out of range (valid: 0..", size_ - 1, ")");
  check_supported(Op::broadcast, buffer, false);
  stats_->record(Op::broadcast, name_, size_, static_cast<int64_t>(buffer.bytes()),
                 rank_ == root);
  if (buffer.device() == Device::meta) return;
  timed(*stats_, [&] { do_broadcast(buffer, root); });
}

namespace {
void check_peer(const std::string& at, int peer, int rank, int size) {
  if (peer < 0 || peer >= size)
    fail(at, ": peer ", peer, " is out of range (valid: 0..", size - 1, ")");
  // A blocking exchange with oneself would wait forever for its other half.
  if (peer == rank)
    fail(at, ": peer ", peer, " is this rank; a rank cannot send to or receive from itself");
}
}  // namespace

void Communicator::send(const Tensor& buffer, int peer) {
  const std::string at = where(Op::send);
  check_buffer(at, buffer, "buffer");
  check_peer(at, peer, rank_, size_);
  check_supported(Op::send, buffer, false);
  stats_->record(Op::send, name_, size_, static_cast<int64_t>(buffer.bytes()), false);
  if (buffer.device() == Device::meta) return;
  timed(*stats_, [&] { do_send(buffer, peer); });
}

std::unique_ptr<PendingCollective> Communicator::send_async(const Tensor& buffer, int peer) {
  const std::string at = where(Op::send);
  check_buffer(at, buffer, "buffer");
  check_peer(at, peer, rank_, size_);
  check_supported(Op::send, buffer, false);
  stats_->record(Op::send, name_, size_, static_cast<int64_t>(buffer.bytes()), false);
  if (buffer.device() == Device::meta) return std::make_unique<FinishedCollective>();
  return std::make_unique<TimedCollective>(timed(*stats_, [&] { return do_send_async(buffer, peer); }), *stats_);
}

std::unique_ptr<PendingCollective> Communicator::do_send_async(const Tensor& buffer, int peer) {
  do_send(buffer, peer);
  return std::make_unique<FinishedCollective>();
}

void Communicator::recv(Tensor& buffer, int peer) {
  const std::string at = where(Op::recv);
  check_buffer(at, buffer, "buffer");
  check_peer(at, peer, rank_, size_);
  check_supported(Op::recv, buffer, false);
  stats_->record(Op::recv, name_, size_, static_cast<int64_t>(buffer.bytes()), false);
  if (buffer.device() == Device::meta) return;
  timed(*stats_, [&] { do_recv(buffer, peer); });
}

void Communicator::barrier() {
  stats_->record(Op::barrier, name_, size_, 0, false);
  timed(*stats_, [&] { do_barrier(); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  std::unique_ptr<Communicator> group = do_split(color, key);
  if (color < 0) {
    SDP_CHECK(group == nullptr, backend(), " split gave a group to a rank with color ", color);
    return nullptr;
  }
  SDP_CHECK(group != nullptr, backend(), " split gave no group for color ", color);
  group->name_ = "ranks:" + rank_list(group->world_ranks_);
  return group;
}

std::unique_ptr<Communicator> Communicator::subgroup(const std::vector<int>& members) {
  bool valid = !members.empty();
  for (size_t i = 0; i < members.size() && valid; ++i)
    valid = members[i] >= 0 && members[i] < size_ && (i == 0 || members[i - 1] < members[i]);
  if (!valid)
    fail("subgroup of group ", name_, ": members {", rank_list(members),
         "} are invalid (valid: a non-empty, sorted list of distinct ranks in 0..", size_ - 1,
         ")");
  std::unique_ptr<Communicator> group = do_subgroup(members);
  const bool member = std::binary_search(members.begin(), members.end(), rank_);
  SDP_CHECK((group != nullptr) == member, backend(), " subgroup: rank ", rank_,
            member ? " is a member but got no group" : " is not a member but got a group");
  if (!group) return nullptr;
  SDP_CHECK(group->size() == static_cast<int>(members.size()), backend(), " subgroup of ",
            members.size(), " members has size ", group->size());
  group->name_ = "ranks:" + rank_list(group->world_ranks_);
  return group;
}

std::unique_ptr<Communicator> Communicator::do_subgroup(const std::vector<int>& members) {
  const bool member = std::binary_search(members.begin(), members.end(), rank_);
  // key = rank keeps the members in rank order, so group rank = index in `members`.
  return split(member ? 0 : -1, rank_);
}

std::vector<int32_t> all_gather_host_words(Communicator& comm, std::span<const int32_t> mine) {
  const size_t n = mine.size();
  std::vector<int32_t> all(n * static_cast<size_t>(comm.size()));  // [size * n]
  for (size_t r = 0; r < static_cast<size_t>(comm.size()); ++r)
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(r * n));
  std::vector<int32_t> send(mine.begin(), mine.end());  // a buffer of its own: no overlap
  Tensor input(send.data(), {static_cast<int64_t>(n)}, DType::i32, Device::cpu);
  Tensor output(all.data(), {static_cast<int64_t>(all.size())}, DType::i32, Device::cpu);
  comm.all_gather(input, output);
  return all;
}

namespace {

// Every rank's `value`, by group rank: lengths first (values differ in
// length), then the bytes padded to the longest, in 32-bit words. Collective.
std::vector<std::string> gather_values(Communicator& comm, const std::string& value) {
  const size_t ranks = static_cast<size_t>(comm.size());
  if (value.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("require_same_on_all_ranks: a value of ", value.size(), " bytes is too long to "
         "compare (valid: below 2 GiB)");
  const int32_t my_length = static_cast<int32_t>(value.size());
  const std::vector<int32_t> lengths = all_gather_host_words(comm, {&my_length, 1});  // [ranks]
  const size_t longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::vector<int32_t> mine(std::max<size_t>((longest + 3) / 4, 1), 0);  // [words]
  std::memcpy(mine.data(), value.data(), value.size());
  const std::vector<int32_t> all = all_gather_host_words(comm, mine);  // [ranks * words]
  std::vector<std::string> values(ranks);
  for (size_t r = 0; r < ranks; ++r)
    values[r].assign(reinterpret_cast<const char*>(&all[r * mine.size()]),
                     static_cast<size_t>(lengths[r]));
  return values;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i + 1;  // one past the run of consecutive ranks starting at i
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (end - i >= 3) {
      out += '-' + std::to_string(ranks[end - 1]);
      i = end;
    } else {
      ++i;
    }
  }
  return out;
}

std::vector<int> parse_rank_list(const std::string& text) {
  std::vector<int> out;
  const auto bad = [&] {
    fail("rank list '", text, "' is invalid (valid: ranks and first-last runs, comma-separated, "
         "e.g. 0,2,5-9)");
  };
  size_t at = 0;
  const auto read_rank = [&] {
    size_t used = 0;
    int value = 0;
    try {
      value = std::stoi(text.substr(at), &used);
    } catch (const std::exception&) {
      bad();
    }
    if (used == 0 || value < 0 || text[at] == '+' || text[at] == '-') bad();
    at += used;
    return value;
  };
  while (at < text.size()) {
    const int first = read_rank();
    int last = first;
    if (at < text.size() && text[at] == '-') {
      ++at;
      last = read_rank();
      if (last < first) bad();
    }
    for (int r = first; r <= last; ++r) out.push_back(r);
    if (at < text.size()) {
      if (text[at] != ',' || at + 1 == text.size()) bad();
      ++at;
    }
  }
  if (out.empty()) bad();
  return out;
}

void require_same_on_all_ranks(Communicator& comm, const std::string& what,
                               const std::string& value, const DescribeDifference& describe) {
  const uint64_t hash = stable_hash64(value);
  std::array<int32_t, 2> mine{};  // [2]: the hash as two 32-bit words
  std::memcpy(mine.data(), &hash, sizeof hash);
  const std::vector<int32_t> all = all_gather_host_words(comm, mine);  // [size * 2]

  std::vector<int> differing;  // group ranks
  for (int r = 1; r < comm.size(); ++r) {
    const size_t at = static_cast<size_t>(r) * 2;
    if (all[at] != all[0] || all[at + 1] != all[1]) differing.push_back(r);
  }
  if (differing.empty()) return;
  // Every rank saw the same hashes, so every rank gathers the values here.
  const std::vector<std::string> values = gather_values(comm, value);
  const int first_differing = differing.front();
  const ValueDifference d = describe(values[0], values[static_cast<size_t>(first_differing)]);
  // Built from gathered data only, so every rank throws the same text.
  const std::vector<int>& world_ranks = comm.world_ranks();
  std::string list;
  for (size_t i = 0; i < differing.size(); ++i) {
    if (i) list += ", ";
    list += std::to_string(world_ranks[static_cast<size_t>(differing[i])]);
  }
  throw CollectiveError(format(
      what, " differs between ranks: rank", differing.size() > 1 ? "s " : " ", list,
      differing.size() > 1 ? " differ" : " differs", " from rank ", world_ranks[0], " (group ",
      comm.name(), "): ", d.where.empty() ? "" : d.where + ": ", "rank ", world_ranks[0],
      " has ", d.first, ", rank ", world_ranks[static_cast<size_t>(first_differing)], " has ",
      d.second));
}

}  // namespace sdp::comm
