// The device header comes first: it defines the CUDA qualifiers before the
// toolkit's headers would.
#include "cuda_emulator/device/device.h"
#include "cuda_emulator/runtime/thread_block.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_emulator/device/fiber.h"
#include "cuda_emulator/runtime/stream_work.h"

namespace sdp::emu {

thread_local const ThreadCoordinates* current_coordinates = nullptr;

namespace {

enum class ThreadState { not_started, runnable, at_barrier, in_warp_op, finished };

struct DeviceThread {
  ThreadCoordinates coordinates{};
  unsigned linear = 0, warp = 0, lane = 0;
  ThreadState state = ThreadState::not_started;
  std::source_location site;  // where it waits
  uint64_t result = 0;        // of its last warp collective
  std::array<float, 4> mma_result{};
  FiberContext context;
  std::unique_ptr<FiberStack> stack;
};

// Operands of the m16n8k16 product: a0..a3, b0, b1, c0..c3 (as bits).
using MmaOperands = std::array<uint32_t, 10>;

enum class Collective { warp_op, mma };

// A warp collective some lanes have reached and others not yet.
struct PendingCollective {
  Collective kind = Collective::warp_op;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0, arrived = 0;
  int width = 32;
  std::source_location site;
  std::array<uint64_t, 32> value{};
  std::array<int, 32> arg{};
  std::array<MmaOperands, 32> mma{};
};

size_t fiber_stack_bytes() {
  static const size_t bytes = [] {
    const char* text = std::getenv("SDP_CUDA_EMULATOR_STACK_KIB");
    const long kib = text ? std::atol(text) : 0;
    return static_cast<size_t>(kib > 0 ? kib : 256) * 1024;
  }();
  return bytes;
}

enum class Schedule { lowest, highest };

Schedule schedule() {
  static const Schedule s = [] {
    const char* text = std::getenv("SDP_CUDA_EMULATOR_SCHEDULE");
    if (!text || std::string(text) == "lowest") return Schedule::lowest;
    if (std::string(text) == "highest") return Schedule::highest;
    std::fprintf(stderr,
                 "sdp emulated CUDA device: SDP_CUDA_EMULATOR_SCHEDULE='%s' is invalid (valid: "
                 "lowest, highest)\n", text);
    std::exit(2);
  }();
  return s;
}

// Stacks of finished threads, reused by the next thread that starts: a
// kernel without barriers runs every thread on the same stack.
thread_local std::vector<std::unique_ptr<FiberStack>> spare_stacks;

std::string where(const std::source_location& site) {
  std::ostringstream out;
  const char* file = site.file_name();
  const char* slash = std::strrchr(file, '/');
  out << (slash ? slash + 1 : file) << ":" << site.line();
  return out.str();
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         std::strcmp(a.file_name(), b.file_name()) == 0;
}

std::string triple(unsigned x, unsigned y, unsigned z) {
  std::ostringstream out;
  out << "(" << x << "," << y << "," << z << ")";
  return out.str();
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::shfl_index: return "__shfl_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
  }
  return "?";
}

std::string collective_name(const PendingCollective& c) {
  return c.kind == Collective::mma ? "mma.sync.m16n8k16" : op_name(c.op);
}

std::string hex(unsigned mask) {
  std::ostringstream out;
  out << "0x" << std::hex << mask;
  return out.str();
}

// Lists items as ranges: "0-31, 64, 96-127".
std::string ranges(const std::vector<unsigned>& items) {
  std::ostringstream out;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    while (j + 1 < items.size() && items[j + 1] == items[j] + 1) ++j;
    if (i) out << ", ";
    out << items[i];
    if (j > i) out << "-" << items[j];
    i = j + 1;
  }
  return out.str();
}

class BlockRun {
 public:
  BlockRun(const KernelLaunch& launch, uint3 block_index) : launch_(launch) {
    const dim3 b = launch.block;
    count_ = b.x * b.y * b.z;
    threads_ = std::vector<DeviceThread>(count_);
    for (unsigned z = 0, i = 0; z < b.z; ++z)
      for (unsigned y = 0; y < b.y; ++y)
        for (unsigned x = 0; x < b.x; ++x, ++i) {
          DeviceThread& t = threads_[i];
          t.coordinates = {uint3{x, y, z}, block_index, b, launch.grid};
          t.linear = i;
          t.warp = i / 32;
          t.lane = i % 32;
        }
    pending_.resize((count_ + 31) / 32);
    ready_.assign((count_ + 63) / 64, 0);
    for (unsigned i = 0; i < count_; ++i) ready_[i / 64] |= uint64_t{1} << (i % 64);
    if (launch.shared_bytes) {
      // Poisoned with all-ones bytes (NaN as floats): a kernel that reads
      // dynamic shared memory it never wrote sees garbage, as on a GPU.
      shared_.reset(new (std::align_val_t{128}) std::byte[launch.shared_bytes]);
      std::memset(shared_.get(), 0xff, launch.shared_bytes);
    }
  }

  void run() {
    BlockRun* outer = active_;
    active_ = this;
    struct Restore {
      BlockRun* outer;
      ~Restore() {
        active_ = outer;
        current_coordinates = nullptr;
      }
    } restore{outer};
    unsigned finished = 0;
    while (finished < count_) {
      const int next = next_ready();
      if (next < 0) fault(deadlock_report());
      DeviceThread& t = threads_[static_cast<size_t>(next)];
      resume(t);
      if (error_) std::rethrow_exception(error_);
      if (t.state == ThreadState::finished) ++finished;
    }
  }

  static BlockRun& active() {
    if (!active_) {
      std::fprintf(stderr,
                   "sdp emulated CUDA device: a device intrinsic was called outside a kernel\n");
      std::abort();
    }
    return *active_;
  }

  void barrier(std::source_location site) {
    DeviceThread& t = *running_;
    if (barrier_arrived_ == 0) {
      barrier_site_ = site;
    } else if (!same_site(site, barrier_site_)) {
      fault(header() + ": thread " + describe(t) + " waits at __syncthreads at " + where(site) +
            " while other threads of the block wait at the one at " + where(barrier_site_) +
            ": threads of a block must meet at the same barrier");
    }
    if (++barrier_arrived_ == count_) {
      barrier_arrived_ = 0;
      for (DeviceThread& other : threads_)
        if (other.state == ThreadState::at_barrier) make_ready(other);
      return;
    }
    t.state = ThreadState::at_barrier;
    t.site = site;
    yield(t);
  }

  uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                   std::source_location site) {
    if (width <= 0 || width > 32 || (width & (width - 1)) != 0)
      fault(header() + ": thread " + describe(*running_) + " calls " + op_name(op) + " at " +
            where(site) + " with width " + std::to_string(width) +
            " (valid: a power of two from 1 to 32)");
    PendingCollective& c = join(Collective::warp_op, op, mask, width, site);
    const unsigned lane = running_->lane;
    c.value[lane] = value;
    c.arg[lane] = arg;
    return arrive(c).result;
  }

  std::array<float, 4> mma(const float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                           std::source_location site) {
    PendingCollective& c = join(Collective::mma, WarpOp::sync, 0xffffffffu, 32, site);
    MmaOperands& m = c.mma[running_->lane];
    for (int i = 0; i < 4; ++i) m[i] = a[i];
    m[4] = b[0];
    m[5] = b[1];
    for (int i = 0; i < 4; ++i) std::memcpy(&m[6 + i], &d[i], 4);
    return arrive(c).mma_result;
  }

  void* shared() const {
    if (!shared_)
      fault(header() + ": thread " + describe(*running_) +
            " uses dynamic shared memory but the launch asked for 0 bytes");
    return shared_.get();
  }

  [[noreturn]] void launch_bounds_exceeded(unsigned long long threads, int bound,
                                           std::source_location site) {
    fault(header() + ": launched with " + std::to_string(threads) +
          " threads per block, more than its __launch_bounds__(" + std::to_string(bound) +
          ") (checked at " + where(site) + "): a GPU refuses this launch");
  }

  [[noreturn]] void trap(std::source_location site) {
    fault(header() + ": thread " + describe(*running_) + " executed __trap() at " + where(site));
  }

 private:
  static void thread_main(void* argument) {
    auto* t = static_cast<DeviceThread*>(argument);
    BlockRun& block = *active_;
    fiber_entered(block.host_);
    try {
      block.launch_.run_thread();
    } catch (...) {
      block.error_ = std::current_exception();
    }
    t->state = ThreadState::finished;
    switch_fiber(t->context, block.host_);
    std::abort();  // a finished fiber is never resumed
  }

  void resume(DeviceThread& t) {
    if (t.state == ThreadState::not_started) {
      if (!spare_stacks.empty()) {
        t.stack = std::move(spare_stacks.back());
        spare_stacks.pop_back();
      } else {
        t.stack = std::make_unique<FiberStack>(fiber_stack_bytes());
      }
      make_fiber(t.context, *t.stack, &BlockRun::thread_main, &t);
    }
    t.state = ThreadState::runnable;
    running_ = &t;
    current_coordinates = &t.coordinates;
    switch_fiber(host_, t.context);
    running_ = nullptr;
    // Back here it has finished or waits: it runs again when released.
    ready_[t.linear / 64] &= ~(uint64_t{1} << (t.linear % 64));
    if (t.state == ThreadState::finished) spare_stacks.push_back(std::move(t.stack));
  }

  void make_ready(DeviceThread& t) {
    t.state = ThreadState::runnable;
    ready_[t.linear / 64] |= uint64_t{1} << (t.linear % 64);
  }

  // The thread to run next. The lowest-numbered ready thread goes first
  // (SDP_CUDA_EMULATOR_SCHEDULE=highest reverses it): after a barrier or a
  // shuffle completes, the first warp runs ahead as far as it can, into the
  // next phase, before the others have read what the last phase left. A
  // missing barrier then gives wrong results instead of a lucky order.
  int next_ready() const {
    if (schedule() == Schedule::highest) {
      for (size_t w = ready_.size(); w-- > 0;)
        if (ready_[w])
          return static_cast<int>(w * 64 + 63 - static_cast<unsigned>(__builtin_clzll(ready_[w])));
      return -1;
    }
    for (size_t w = 0; w < ready_.size(); ++w)
      if (ready_[w])
        return static_cast<int>(w * 64 + static_cast<unsigned>(__builtin_ctzll(ready_[w])));
    return -1;
  }

  void yield(DeviceThread& t) {
    switch_fiber(t.context, host_);
    // Resumed: the scheduler set running_ and the coordinates back to t.
  }

  unsigned lanes_in_warp(unsigned warp) const {
    const unsigned first = warp * 32;
    return count_ - first >= 32 ? 32 : count_ - first;
  }

  // The pending collective the running lane joins (made if it is the first).
  PendingCollective& join(Collective kind, WarpOp op, unsigned mask, int width,
                          std::source_location site) {
    DeviceThread& t = *running_;
    const unsigned bit = 1u << t.lane;
    const std::string name = kind == Collective::mma ? "mma.sync.m16n8k16" : op_name(op);
    if (!(mask & bit))
      fault(header() + ": thread " + describe(t) + " (lane " + std::to_string(t.lane) + ") calls " +
            name + " at " + where(site) + " with mask " + hex(mask) +
            ", which does not include its own lane");
    const unsigned lanes = lanes_in_warp(t.warp);
    const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    if (mask & ~existing)
      fault(header() + ": thread " + describe(t) + " calls " + name + " at " + where(site) +
            " with mask " + hex(mask) + " but warp " + std::to_string(t.warp) + " has only " +
            std::to_string(lanes) + " lanes (mask " + hex(existing) + ")");
    std::vector<PendingCollective>& warp = pending_[t.warp];
    for (PendingCollective& c : warp) {
      if (!(c.mask & bit)) continue;
      if (c.mask != mask || c.kind != kind || (kind == Collective::warp_op && c.op != op) ||
          c.width != width)
        fault(header() + ": lane " + std::to_string(t.lane) + " of warp " + std::to_string(t.warp) +
              " calls " + name + " at " + where(site) + " with mask " + hex(mask) +
              " while lanes " +
              lane_list(c.arrived) + " wait in " + collective_name(c) + " at " + where(c.site) +
              " with mask " + hex(c.mask) + ": the lanes of a mask must make the same call");
      return c;
    }
    for (const PendingCollective& c : warp)
      if (c.mask & mask)
        fault(header() + ": lane " + std::to_string(t.lane) + " of warp " + std::to_string(t.warp) +
              " calls " + name + " at " + where(site) + " with mask " + hex(mask) +
              ", which overlaps the mask " + hex(c.mask) + " of lanes " + lane_list(c.arrived) +
              " waiting in " + collective_name(c) + " at " + where(c.site));
    warp.push_back(PendingCollective{});
    PendingCollective& c = warp.back();
    c.kind = kind;
    c.op = op;
    c.mask = mask;
    c.width = width;
    c.site = site;
    return c;
  }

  // Records the running lane's arrival; the last lane computes every lane's
  // result and releases the others. Returns the running lane once it has
  // its result.
  DeviceThread& arrive(PendingCollective& c) {
    DeviceThread& t = *running_;
    c.arrived |= 1u << t.lane;
    if (c.arrived != c.mask) {
      t.state = ThreadState::in_warp_op;
      t.site = c.site;
      yield(t);
      return t;
    }
    complete(c, t.warp);
    std::vector<PendingCollective>& warp = pending_[t.warp];
    for (size_t i = 0; i < warp.size(); ++i)
      if (&warp[i] == &c) {
        warp.erase(warp.begin() + static_cast<long>(i));
        break;
      }
    return t;
  }

  void complete(const PendingCollective& c, unsigned warp) {
    DeviceThread* lanes = &threads_[warp * 32];
    if (c.kind == Collective::mma) {
      complete_mma(c, lanes);
    } else {
      for (unsigned l = 0; l < 32; ++l) {
        if (!(c.mask >> l & 1)) continue;
        lanes[l].result = warp_result(c, l, warp);
      }
    }
    for (unsigned l = 0; l < 32; ++l)
      if ((c.mask >> l & 1) && lanes[l].state == ThreadState::in_warp_op)
        make_ready(lanes[l]);
  }

  uint64_t warp_result(const PendingCollective& c, unsigned lane, unsigned warp) {
    const unsigned w = static_cast<unsigned>(c.width);
    const unsigned group = lane / w * w;
    unsigned source = lane;
    switch (c.op) {
      case WarpOp::sync: return 0;
      case WarpOp::ballot:
      case WarpOp::any:
      case WarpOp::all: {
        unsigned votes = 0;
        for (unsigned l = 0; l < 32; ++l)
          if ((c.mask >> l & 1) && c.value[l]) votes |= 1u << l;
        if (c.op == WarpOp::ballot) return votes;
        if (c.op == WarpOp::any) return votes != 0;
        return votes == c.mask;
      }
      case WarpOp::shfl_xor: {
        // A lane may read an earlier group, never a later one (it keeps its own value).
        const unsigned target = lane ^ static_cast<unsigned>(c.arg[lane]);
        source = target / w * w > group || target >= 32 ? lane : target;
        break;
      }
      case WarpOp::shfl_index:
        source = group + (static_cast<unsigned>(c.arg[lane]) & (w - 1));
        break;
      case WarpOp::shfl_down: {
        const unsigned delta = static_cast<unsigned>(c.arg[lane]);
        source = (lane - group) + delta >= w ? lane : lane + delta;
        break;
      }
      case WarpOp::shfl_up: {
        const unsigned delta = static_cast<unsigned>(c.arg[lane]);
        source = lane - group < delta ? lane : lane - delta;
        break;
      }
    }
    if (!(c.mask >> source & 1))
      fault(header() + ": lane " + std::to_string(lane) + " of warp " + std::to_string(warp) +
            " reads lane " + std::to_string(source) + " in " + op_name(c.op) + " at " +
            where(c.site) + " but the mask " + hex(c.mask) +
            " does not include that lane (its value is undefined)");
    return c.value[source];
  }

  // D = A B + C per the PTX ISA's fragment layouts for m16n8k16 with
  // .row.col bf16 operands and f32 accumulators; g = lane / 4, t = lane % 4:
  //   a0: A[g][2t..2t+1]    a1: A[g+8][2t..2t+1]
  //   a2: A[g][2t+8..2t+9]  a3: A[g+8][2t+8..2t+9]
  //   b0: B[2t..2t+1][g]    b1: B[2t+8..2t+9][g]
  //   c0, c1: C[g][2t], C[g][2t+1]    c2, c3: C[g+8][2t], C[g+8][2t+1]
  // A register's lower 16 bits hold the lower index.
  static void complete_mma(const PendingCollective& c, DeviceThread* lanes) {
    float a[16][16], b[16][8], acc[16][8];
    auto low = [](uint32_t r) { return bf16_bits_to_float(static_cast<uint16_t>(r & 0xffffu)); };
    auto high = [](uint32_t r) { return bf16_bits_to_float(static_cast<uint16_t>(r >> 16)); };
    for (unsigned lane = 0; lane < 32; ++lane) {
      const MmaOperands& m = c.mma[lane];
      const unsigned g = lane / 4, t = lane % 4;
      a[g][2 * t] = low(m[0]);
      a[g][2 * t + 1] = high(m[0]);
      a[g + 8][2 * t] = low(m[1]);
      a[g + 8][2 * t + 1] = high(m[1]);
      a[g][2 * t + 8] = low(m[2]);
      a[g][2 * t + 9] = high(m[2]);
      a[g + 8][2 * t + 8] = low(m[3]);
      a[g + 8][2 * t + 9] = high(m[3]);
      b[2 * t][g] = low(m[4]);
      b[2 * t + 1][g] = high(m[4]);
      b[2 * t + 8][g] = low(m[5]);
      b[2 * t + 9][g] = high(m[5]);
      float cv[4];
      std::memcpy(cv, &m[6], sizeof cv);
      acc[g][2 * t] = cv[0];
      acc[g][2 * t + 1] = cv[1];
      acc[g + 8][2 * t] = cv[2];
      acc[g + 8][2 * t + 1] = cv[3];
    }
    // Products of bf16 values are exact in f32; the sum is taken in f32 in k
    // order (the tensor core's internal order is unspecified).
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float sum = acc[i][j];
        for (int k = 0; k < 16; ++k) sum += a[i][k] * b[k][j];
        acc[i][j] = sum;
      }
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned g = lane / 4, t = lane % 4;
      lanes[lane].mma_result = {acc[g][2 * t], acc[g][2 * t + 1], acc[g + 8][2 * t],
                                acc[g + 8][2 * t + 1]};
    }
  }

  static float bf16_bits_to_float(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }

  std::string header() const {
    const uint3 b = threads_.empty() ? uint3{} : threads_[0].coordinates.block_idx;
    return "kernel " + launch_.name + ", block " + triple(b.x, b.y, b.z);
  }

  static std::string describe(const DeviceThread& t) {
    const uint3 i = t.coordinates.thread_idx;
    return triple(i.x, i.y, i.z);
  }

  static std::string lane_list(unsigned mask) {
    std::vector<unsigned> lanes;
    for (unsigned l = 0; l < 32; ++l)
      if (mask >> l & 1) lanes.push_back(l);
    return lanes.empty() ? "none" : ranges(lanes);
  }

  std::string state_text(const DeviceThread& t) const {
    switch (t.state) {
      case ThreadState::finished: return "has exited";
      case ThreadState::at_barrier: return "waits at __syncthreads at " + where(t.site);
      case ThreadState::in_warp_op: return "waits in a warp collective at " + where(t.site);
      default: return "is runnable";
    }
  }

  // No thread can run: says who waits where and who never comes.
  std::string deadlock_report() const {
    std::ostringstream out;
    out << header() << " can never finish:";
    for (size_t w = 0; w < pending_.size(); ++w)
      for (const PendingCollective& c : pending_[w]) {
        const unsigned missing = c.mask & ~c.arrived;
        out << " in warp " << w << ", lanes " << lane_list(c.arrived) << " wait in "
            << collective_name(c) << " at " << where(c.site) << " with mask " << hex(c.mask)
            << " but lanes " << lane_list(missing) << " never arrive (lane "
            << __builtin_ctz(missing) << " "
            << state_text(threads_[w * 32 + static_cast<unsigned>(__builtin_ctz(missing))]) << ");";
      }
    std::vector<unsigned> at_barrier, exited, elsewhere;
    for (const DeviceThread& t : threads_) {
      if (t.state == ThreadState::at_barrier) at_barrier.push_back(t.linear);
      else if (t.state == ThreadState::finished) exited.push_back(t.linear);
      else elsewhere.push_back(t.linear);
    }
    if (!at_barrier.empty()) {
      out << " threads " << ranges(at_barrier) << " (of " << count_
          << ", numbered x fastest) wait at __syncthreads at " << where(barrier_site_);
      if (!exited.empty()) out << " but threads " << ranges(exited) << " have exited";
      if (!elsewhere.empty())
        out << "; threads " << ranges(elsewhere) << " wait in warp collectives";
      out << ": a barrier that not every thread of the block reaches";
    }
    return out.str();
  }

  const KernelLaunch& launch_;
  unsigned count_ = 0;
  std::vector<DeviceThread> threads_;
  std::vector<std::vector<PendingCollective>> pending_;  // per warp
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{128}); }
  };
  std::unique_ptr<std::byte[], AlignedDelete> shared_;
  std::vector<uint64_t> ready_;  // bit per thread: not started, or released
  unsigned barrier_arrived_ = 0;
  std::source_location barrier_site_;
  DeviceThread* running_ = nullptr;
  FiberContext host_;
  std::exception_ptr error_;

  static thread_local BlockRun* active_;
};

thread_local BlockRun* BlockRun::active_ = nullptr;

}  // namespace

void block_barrier(std::source_location site) { BlockRun::active().barrier(site); }

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width,
                         std::source_location site) {
  return BlockRun::active().warp_op(op, mask, value, arg, width, site);
}

void mma_m16n8k16_row_col_f32_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                   std::source_location site) {
  const std::array<float, 4> r = BlockRun::active().mma(d, a, b, site);
  for (int i = 0; i < 4; ++i) d[i] = r[i];
}

void* dynamic_shared_memory() { return BlockRun::active().shared(); }

void device_trap(std::source_location site) { BlockRun::active().trap(site); }

void check_launch_bounds(int max_threads, std::source_location site) {
  const dim3 b = coordinates().block_dim;
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  if (threads > static_cast<unsigned long long>(max_threads))
    BlockRun::active().launch_bounds_exceeded(threads, max_threads, site);
}

void run_grid(const KernelLaunch& launch) {
  const dim3 g = launch.grid;
  for (unsigned z = 0; z < g.z; ++z)
    for (unsigned y = 0; y < g.y; ++y)
      for (unsigned x = 0; x < g.x; ++x) {
        BlockRun block(launch, uint3{x, y, z});
        block.run();
      }
}

}  // namespace sdp::emu
