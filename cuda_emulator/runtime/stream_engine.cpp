#include "cuda_emulator/runtime/stream_engine.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "cuda_emulator/runtime/device_memory.h"
#include "cuda_emulator/runtime/emulator_config.h"

// The opaque handle types of the runtime API: a stream or an event of the
// engine below, named by its index.
struct CUstream_st {
  int id;
};
struct CUevent_st {
  int id;
};

namespace sdp::emu {

namespace {

using Clock = std::vector<uint64_t>;  // per stream id

uint64_t entry(const Clock& c, size_t i) { return i < c.size() ? c[i] : 0; }

void join_into(Clock& into, const Clock& other) {
  if (into.size() < other.size()) into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i) into[i] = std::max(into[i], other[i]);
}

// One access as the checker remembers it.
struct AccessRecord {
  int stream = 0;
  uint64_t seq = 0;
  std::shared_ptr<const std::string> what;  // "kernel foo (argument 1 `x`, read) on stream 2"
};

struct Shadow {
  uintptr_t end = 0;
  bool has_write = false;
  AccessRecord write;
  std::vector<AccessRecord> reads;  // the last read of each stream
};

struct QueuedWork {
  StreamWork work;
  uint64_t seq = 0;
  Clock clock;  // includes its own tick
  bool started = false;
};

struct Stream {
  int id = 0;
  bool blocking = true;
  bool legacy = false;
  bool live = true;
  Clock clock;
  uint64_t enqueued = 0, completed = 0;
  std::deque<QueuedWork> queue;
  std::unique_ptr<CUstream_st> handle;
};

struct Event {
  bool live = true;
  bool recorded = false;
  Clock clock;
  std::unique_ptr<CUevent_st> handle;
};

std::string stream_label(const Stream& s) {
  if (s.legacy) return "the legacy default stream";
  return "stream " + std::to_string(s.id) + (s.blocking ? "" : " (non-blocking)");
}

std::string hex(uintptr_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

class Engine {
 public:
  Engine() {
    auto legacy = std::make_unique<Stream>();
    legacy->legacy = true;
    legacy->handle = std::make_unique<CUstream_st>(CUstream_st{0});
    streams_.push_back(std::move(legacy));
  }

  std::recursive_mutex mutex;

  Stream* find(cudaStream_t handle) {
    if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
      return streams_[0].get();
    for (auto& s : streams_)
      if (s->live && s->handle.get() == handle) return s.get();
    return nullptr;
  }

  Event* find(cudaEvent_t handle) {
    for (auto& e : events_)
      if (e->live && e->handle.get() == handle) return e.get();
    return nullptr;
  }

  cudaStream_t create_stream(bool blocking) {
    auto s = std::make_unique<Stream>();
    s->id = static_cast<int>(streams_.size());
    s->blocking = blocking;
    s->handle = std::make_unique<CUstream_st>(CUstream_st{s->id});
    join_into(s->clock, host_);
    cudaStream_t h = s->handle.get();
    streams_.push_back(std::move(s));
    return h;
  }

  cudaEvent_t create_event() {
    auto e = std::make_unique<Event>();
    e->handle = std::make_unique<CUevent_st>(CUevent_st{static_cast<int>(events_.size())});
    cudaEvent_t h = e->handle.get();
    events_.push_back(std::move(e));
    return h;
  }

  // The joins every operation (or event record) on `s` starts from.
  void prepare(Stream& s) {
    join_into(s.clock, host_);
    if (s.legacy) {
      for (auto& other : streams_)
        if (other->live && other->blocking && !other->legacy) join_into(s.clock, other->clock);
    } else if (s.blocking) {
      join_into(s.clock, streams_[0]->clock);
    }
  }

  uint64_t enqueue(Stream& s, StreamWork work) {
    prepare(s);
    const uint64_t seq = s.enqueued + 1;
    Clock clock = s.clock;
    if (clock.size() <= static_cast<size_t>(s.id)) clock.resize(static_cast<size_t>(s.id) + 1, 0);
    clock[static_cast<size_t>(s.id)] = seq;
    check_accesses(s, seq, clock, work);
    s.clock = clock;
    s.enqueued = seq;
    s.queue.push_back(QueuedWork{std::move(work), seq, std::move(clock), false});
    progress();
    return seq;
  }

  bool finished_through(const Clock& clock) const {
    for (size_t i = 0; i < clock.size(); ++i)
      if (clock[i] > streams_[i]->completed) return false;
    return true;
  }

  // Starts whatever may start and retires whatever has finished, until
  // nothing changes.
  void progress() {
    if (progressing_) return;  // work started from inside a work item
    progressing_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{progressing_};
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t i = 0; i < streams_.size(); ++i) {
        Stream& s = *streams_[i];
        while (!s.queue.empty()) {
          QueuedWork& w = s.queue.front();
          if (!w.started) {
            Clock deps = w.clock;
            deps[static_cast<size_t>(s.id)] = w.seq - 1;
            if (!finished_through(deps)) break;
            w.started = true;
            try {
              if (w.work.start) w.work.start();
            } catch (...) {
              retire(s);
              throw;
            }
          }
          if (w.work.finished && !w.work.finished()) break;
          retire(s);
          changed = true;
        }
      }
    }
  }

  void retire(Stream& s) {
    s.completed = s.queue.front().seq;
    s.queue.pop_front();
  }

  // Drives progress until done() or the timeout, which is a fault naming
  // what is still in flight.
  void wait(const std::function<bool()>& done, const char* call) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(config().timeout_seconds);
    for (int spin = 0;; ++spin) {
      progress();
      if (done()) return;
      if (std::chrono::steady_clock::now() > deadline) fault(stuck_report(call));
      if (spin > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::string stuck_report(const char* call) const {
    std::ostringstream out;
    out << call << " waited " << config().timeout_seconds
        << " s (SDP_CUDA_EMULATOR_TIMEOUT) for work that never finished:";
    for (const auto& s : streams_)
      if (!s->queue.empty())
        out << " " << s->queue.front().work.name << " on " << stream_label(*s)
            << (s->queue.front().started ? " (in flight)" : " (waiting for other streams)") << ";";
    return out.str();
  }

  void host_joins(const Clock& clock) { join_into(host_, clock); }

  void synchronize(Stream& s) {
    const uint64_t target = s.enqueued;
    wait([&] { return s.completed >= target; }, "cudaStreamSynchronize");
    host_joins(s.clock);
  }

  bool idle(Stream& s) {
    progress();
    if (s.completed < s.enqueued) return false;
    host_joins(s.clock);
    return true;
  }

  void synchronize_all() {
    wait(
        [&] {
          for (auto& s : streams_)
            if (s->completed < s->enqueued) return false;
          return true;
        },
        "cudaDeviceSynchronize");
    for (auto& s : streams_) host_joins(s->clock);
  }

  void record(Event& e, Stream& s) {
    prepare(s);
    e.clock = s.clock;
    e.recorded = true;
  }

  void wait_event(Stream& s, const Event& e) {
    if (e.recorded) join_into(s.clock, e.clock);
  }

  bool event_done(const Event& e) {
    progress();
    if (!e.recorded || finished_through(e.clock)) {
      host_joins(e.clock);
      return true;
    }
    return false;
  }

  void synchronize(Event& e) {
    wait([&] { return !e.recorded || finished_through(e.clock); }, "cudaEventSynchronize");
    host_joins(e.clock);
  }

  void destroy(Stream& s) {
    // CUDA lets queued work finish after cudaStreamDestroy returns; here it
    // finishes first, which is one of the orders a GPU may take.
    wait([&] { return s.completed >= s.enqueued; }, "cudaStreamDestroy");
    s.live = false;
  }

  void destroy(Event& e) { e.live = false; }

  void forget(uintptr_t begin, uintptr_t end) {
    auto it = shadow_.lower_bound(begin);
    if (it != shadow_.begin()) {
      auto before = std::prev(it);
      if (before->second.end > begin) it = before;
    }
    while (it != shadow_.end() && it->first < end) {
      if (it->first < begin || it->second.end > end) {
        // Keep the parts outside [begin, end).
        Shadow keep = it->second;
        const uintptr_t start = it->first, stop = it->second.end;
        it = shadow_.erase(it);
        if (start < begin) {
          Shadow left = keep;
          left.end = begin;
          shadow_[start] = left;
        }
        if (stop > end) {
          keep.end = stop;
          it = shadow_.emplace(end, keep).first;
          ++it;
        }
        continue;
      }
      it = shadow_.erase(it);
    }
  }

 private:
  // Splits the shadow so that `at` is a segment boundary.
  void split(uintptr_t at) {
    auto it = shadow_.upper_bound(at);
    if (it == shadow_.begin()) return;
    --it;
    if (it->first == at || it->second.end <= at) return;
    Shadow right = it->second;
    it->second.end = at;
    shadow_.emplace(at, std::move(right));
  }

  static bool ordered(const AccessRecord& earlier, const Clock& clock) {
    return entry(clock, static_cast<size_t>(earlier.stream)) >= earlier.seq;
  }

  [[noreturn]] void race(const std::string& now, const AccessRecord& earlier, uintptr_t begin,
                         uintptr_t end, const Stream& s) const {
    std::ostringstream out;
    out << "stream-order race on device memory [" << hex(begin) << ", " << hex(end) << ") ("
        << (end - begin) << " bytes";
    if (auto a = find_allocation(reinterpret_cast<const void*>(begin)))
      out << " of the allocation at " << hex(a->begin) << ", " << (a->end - a->begin) << " bytes";
    out << "): " << now << " on " << stream_label(s) << " is not ordered after " << *earlier.what
        << " on " << stream_label(*streams_[static_cast<size_t>(earlier.stream)])
        << ": no event wait or synchronization between the two streams orders them";
    fault(out.str());
  }

  void check_accesses(const Stream& s, uint64_t seq, const Clock& clock, const StreamWork& work) {
    for (const DeviceAccess& a : work.accesses) {
      if (a.bytes == 0 || a.ptr == nullptr) continue;
      const auto begin = reinterpret_cast<uintptr_t>(a.ptr), end = begin + a.bytes;
      const bool writes = a.kind == AccessKind::write;
      const std::string now = work.name + (a.role.empty() ? "" : " (" + a.role + ", ") +
                              (a.role.empty() ? (writes ? " (write)" : " (read)")
                                              : (writes ? "write)" : "read)"));
      auto record = AccessRecord{s.id, seq, std::make_shared<const std::string>(now)};
      split(begin);
      split(end);
      // Walk [begin, end): existing segments and the gaps between them.
      uintptr_t cursor = begin;
      auto it = shadow_.lower_bound(begin);
      std::vector<std::pair<uintptr_t, Shadow>> gaps;
      for (; it != shadow_.end() && it->first < end; ++it) {
        Shadow& seg = it->second;
        if (it->first > cursor) gaps.push_back({cursor, Shadow{it->first, false, {}, {}}});
        if (seg.has_write && !ordered(seg.write, clock))
          race(now, seg.write, it->first, seg.end, s);
        if (writes)
          for (const AccessRecord& r : seg.reads)
            if (!ordered(r, clock)) race(now, r, it->first, seg.end, s);
        cursor = seg.end;
      }
      if (cursor < end) gaps.push_back({cursor, Shadow{end, false, {}, {}}});
      for (auto& [at, gap] : gaps) shadow_.emplace(at, std::move(gap));
      if (writes) {
        // The write supersedes everything before it in the range.
        shadow_.erase(shadow_.lower_bound(begin), shadow_.lower_bound(end));
        Shadow seg;
        seg.end = end;
        seg.has_write = true;
        seg.write = record;
        shadow_.emplace(begin, std::move(seg));
      } else {
        for (auto seg = shadow_.lower_bound(begin); seg != shadow_.end() && seg->first < end; ++seg) {
          auto& reads = seg->second.reads;
          auto same = std::find_if(reads.begin(), reads.end(),
                                   [&](const AccessRecord& r) { return r.stream == s.id; });
          if (same != reads.end()) *same = record;
          else reads.push_back(record);
        }
      }
    }
  }

  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Event>> events_;
  Clock host_;
  std::map<uintptr_t, Shadow> shadow_;
  bool progressing_ = false;
};

Engine& engine() {
  static Engine* e = new Engine();  // never destroyed: work may be queued from static destructors
  return *e;
}

}  // namespace

int stream_id(cudaStream_t stream) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  Stream* s = e.find(stream);
  return s ? s->id : -1;
}

cudaError_t submit(cudaStream_t stream, StreamWork work) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  Stream* s = e.find(stream);
  if (!s) {
    std::fprintf(stderr, "sdp emulated CUDA device: %s: the stream handle %p is not a live stream\n",
                 work.name.c_str(), static_cast<void*>(stream));
    return cudaErrorInvalidResourceHandle;
  }
  for (const DeviceAccess& a : work.accesses) {
    if (a.bytes == 0) continue;
    const std::string problem = check_device_range(a.ptr, a.bytes);
    if (!problem.empty()) {
      std::fprintf(stderr, "sdp emulated CUDA device: %s: %s%s%s\n", work.name.c_str(),
                   a.role.c_str(), a.role.empty() ? "" : ": ", problem.c_str());
      return cudaErrorInvalidValue;
    }
  }
  e.enqueue(*s, std::move(work));
  return cudaSuccess;
}

cudaError_t submit_and_wait(cudaStream_t stream, StreamWork work) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  const cudaError_t status = submit(stream, std::move(work));
  if (status != cudaSuccess) return status;
  e.synchronize(*e.find(stream));
  return cudaSuccess;
}

std::string check_device_range(const void* ptr, size_t bytes) {
  const auto allocation = find_allocation(ptr);
  std::ostringstream out;
  if (!allocation) {
    out << hex(reinterpret_cast<uintptr_t>(ptr))
        << " is not device memory (no live cudaMalloc holds it)";
    return out.str();
  }
  // Inside a block the caching allocator handed out, the block is the limit:
  // running into the next block is writing another tensor.
  const auto block = find_block(ptr);
  const bool pool_block = block->begin != allocation->begin || block->end != allocation->end;
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  if (begin + bytes > block->end) {
    out << "[" << hex(begin) << ", +" << bytes << " bytes) runs " << (begin + bytes - block->end)
        << " bytes past the end of its " << (pool_block ? "caching-allocator block" : "allocation")
        << " [" << hex(block->begin) << ", +" << (block->end - block->begin) << " bytes)";
    return out.str();
  }
  return "";
}

// Runs f on the live stream (and event) a handle names, under the engine's
// lock; a handle that names none is cudaErrorInvalidResourceHandle.
template <typename F>
cudaError_t on_stream(cudaStream_t stream, F&& f) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  Stream* s = e.find(stream);
  return s ? f(e, *s) : cudaErrorInvalidResourceHandle;
}
template <typename F>
cudaError_t on_event(cudaEvent_t event, F&& f) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  Event* ev = e.find(event);
  return ev ? f(e, *ev) : cudaErrorInvalidResourceHandle;
}
template <typename F>
cudaError_t on_stream_and_event(cudaStream_t stream, cudaEvent_t event, F&& f) {
  return on_stream(stream, [&](Engine& e, Stream& s) {
    Event* ev = e.find(event);
    return ev ? f(e, s, *ev) : cudaErrorInvalidResourceHandle;
  });
}

cudaError_t create_stream(cudaStream_t* stream, bool blocking) {
  if (!stream) return cudaErrorInvalidValue;
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  *stream = e.create_stream(blocking);
  return cudaSuccess;
}

cudaError_t destroy_stream(cudaStream_t stream) {
  return on_stream(stream, [](Engine& e, Stream& s) {
    if (s.legacy) return cudaErrorInvalidResourceHandle;
    e.destroy(s);
    return cudaSuccess;
  });
}

cudaError_t synchronize_stream(cudaStream_t stream) {
  return on_stream(stream, [](Engine& e, Stream& s) {
    e.synchronize(s);
    return cudaSuccess;
  });
}

cudaError_t query_stream(cudaStream_t stream) {
  return on_stream(stream, [](Engine& e, Stream& s) {
    return e.idle(s) ? cudaSuccess : cudaErrorNotReady;
  });
}

cudaError_t synchronize_device() {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  e.synchronize_all();
  return cudaSuccess;
}

cudaError_t create_event(cudaEvent_t* event) {
  if (!event) return cudaErrorInvalidValue;
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  *event = e.create_event();
  return cudaSuccess;
}

cudaError_t destroy_event(cudaEvent_t event) {
  return on_event(event, [](Engine& e, Event& ev) {
    e.destroy(ev);
    return cudaSuccess;
  });
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  return on_stream_and_event(stream, event, [](Engine& e, Stream& s, Event& ev) {
    e.record(ev, s);
    return cudaSuccess;
  });
}

cudaError_t wait_event(cudaStream_t stream, cudaEvent_t event) {
  return on_stream_and_event(stream, event, [](Engine& e, Stream& s, Event& ev) {
    e.wait_event(s, ev);
    return cudaSuccess;
  });
}

cudaError_t query_event(cudaEvent_t event) {
  return on_event(event, [](Engine& e, Event& ev) {
    return e.event_done(ev) ? cudaSuccess : cudaErrorNotReady;
  });
}

cudaError_t synchronize_event(cudaEvent_t event) {
  return on_event(event, [](Engine& e, Event& ev) {
    e.synchronize(ev);
    return cudaSuccess;
  });
}

void forget_accesses(uintptr_t begin, uintptr_t end) {
  Engine& e = engine();
  std::lock_guard lock(e.mutex);
  e.forget(begin, end);
}

}  // namespace sdp::emu
