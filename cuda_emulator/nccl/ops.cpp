// Collectives, point-to-point and group calls of the emulated NCCL.
//
// A call is checked when it is made (its arguments, and that each buffer
// lies in device memory) and then becomes stream work
// (cuda_emulator/runtime/stream_work.h): nothing moves until its stream
// reaches it. The work's start posts nonblocking MPI operations and its
// finished() polls them with MPI_Testall, so the host never blocks inside
// MPI while a stream runs: the engine polls cudaStreamQuery and
// ncclCommGetAsyncError under its own deadline, and a peer that never comes
// must end in its message, not in a hang inside MPI_Wait.
//
// Supported, because the engine uses them (comm/cuda/nccl_communicator.cpp):
//   ncclAllReduce, ncclReduceScatter      ncclSum, ncclAvg over ncclFloat32,
//                                         ncclFloat64, ncclInt32, ncclBfloat16
//   ncclAllGather, ncclBroadcast,         any of those types and ncclUint8
//   ncclSend, ncclRecv                    (moved as bytes)
//   ncclGroupStart, ncclGroupEnd          nested, counted by depth
// Anything else (ncclProd/Max/Min, custom ops, other types, a send or
// receive within a communicator of one rank) is refused with
// ncclInvalidArgument or ncclInvalidUsage and one line on stderr naming the
// value and what is valid; ncclGetLastError returns the same text.
//
// Groups: the calls between ncclGroupStart and ncclGroupEnd are checked when
// made and launched by the outermost ncclGroupEnd as one piece of stream
// work, whose start posts all their MPI operations and whose finished()
// waits for all (a grouped send and receive between two ranks cannot wait
// for each other). A refused call fails the whole group, as in NCCL.
#include <algorithm>
#include <climits>
#include <cstring>

#include "cuda_emulator/nccl/nccl_emu.h"

namespace sdp::emu::nccl {

namespace {

// Point-to-point messages of the emulator on a communicator's data
// communicator use one tag: MPI matches messages of one sender and tag in
// the order they were posted, which is the order NCCL matches ncclSend with
// ncclRecv between two ranks.
constexpr int kPointToPointTag = 0x5dc;

// A call checked, waiting for ncclGroupEnd or launched at once.
struct Pending {
  Call call;
  std::shared_ptr<CommState> comm;
  cudaStream_t stream = nullptr;
};

// NCCL's group state is per host thread, and so is this.
struct GroupState {
  int depth = 0;
  std::vector<Pending> calls;
  ncclResult_t error = ncclSuccess;  // the first refusal inside the group
  std::string error_message;
};
thread_local GroupState group;

bool is_reduction(Kind kind) { return kind == Kind::all_reduce || kind == Kind::reduce_scatter; }

bool reducible(ncclDataType_t type) {
  return type == ncclFloat32 || type == ncclFloat64 || type == ncclInt32 || type == ncclBfloat16;
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

const char* offset_text(const void* base, const void* p) {
  thread_local std::string text;
  const auto b = reinterpret_cast<uintptr_t>(base), q = reinterpret_cast<uintptr_t>(p);
  text = q >= b ? "+" + std::to_string(q - b) : "-" + std::to_string(b - q);
  return text.c_str();
}

// Checks `c` for a communicator of `comm`, fills in in_place and the device
// ranges it reads and writes, and returns what is wrong (empty when nothing).
std::string validate(Call& c, const CommState& comm, ncclResult_t& status) {
  status = ncclInvalidArgument;
  const std::string types_moved =
      "ncclUint8, ncclInt32, ncclFloat32, ncclFloat64, ncclBfloat16";
  if (is_reduction(c.kind)) {
    if (c.op != ncclSum && c.op != ncclAvg)
      return "op = " + op_name(c.op) + " is not emulated (valid: ncclSum, ncclAvg)";
    if (!reducible(c.type))
      return "datatype = " + type_name(c.type) +
             " is not emulated for reductions (valid: ncclFloat32, ncclFloat64, ncclInt32, "
             "ncclBfloat16)";
  } else if (type_bytes(c.type) == 0) {
    return "datatype = " + type_name(c.type) + " is not emulated (valid: " + types_moved + ")";
  }
  const size_t element = type_bytes(c.type);
  const auto ranks = static_cast<size_t>(comm.size);
  if (c.count > SIZE_MAX / element / ranks)
    return "count = " + std::to_string(c.count) + " elements of " + type_name(c.type) +
           " times " + std::to_string(ranks) + " ranks overflows size_t";
  const size_t bytes = c.count * element;  // one rank's part
  // MPI counts are int: a reduction sends count elements, a move count *
  // element bytes, in one message.
  const size_t limit = INT_MAX;
  if ((is_reduction(c.kind) ? c.count : bytes) > limit)
    return "count = " + std::to_string(c.count) + " elements of " + type_name(c.type) + " (" +
           std::to_string(bytes) +
           " bytes per rank) is more than the emulator's MPI transport carries in one message "
           "(MPI counts are int: at most " + std::to_string(limit) +
           (is_reduction(c.kind) ? " elements)" : " bytes)");

  auto add = [&](const void* p, size_t n, AccessKind kind, const char* role) {
    if (n > 0) c.accesses.push_back(DeviceAccess{p, n, kind, role});
  };
  switch (c.kind) {
    case Kind::all_reduce:
      c.in_place = c.send == c.recv;
      if (!c.in_place && overlaps(c.send, bytes, c.recv, bytes))
        return "recvbuff overlaps sendbuff without being it (in place is recvbuff == sendbuff)";
      add(c.send, bytes, AccessKind::read, "sendbuff");
      add(c.recv, bytes, AccessKind::write, "recvbuff");
      break;
    case Kind::reduce_scatter: {
      // In place: recvbuff is this rank's chunk of sendbuff.
      const uintptr_t own = reinterpret_cast<uintptr_t>(c.send) + comm.rank * bytes;
      c.in_place = reinterpret_cast<uintptr_t>(c.recv) == own;
      if (!c.in_place && overlaps(c.send, bytes * ranks, c.recv, bytes))
        return std::string("recvbuff (at sendbuff ") + offset_text(c.send, c.recv) +
               " bytes) overlaps sendbuff without being this rank's chunk (in place is "
               "recvbuff == sendbuff + rank * recvcount elements, here sendbuff +" +
               std::to_string(comm.rank * bytes) + " bytes)";
      add(c.send, bytes * ranks, AccessKind::read, "sendbuff");
      add(c.recv, bytes, AccessKind::write, "recvbuff");
      break;
    }
    case Kind::all_gather: {
      // In place: sendbuff is this rank's chunk of recvbuff.
      const uintptr_t own = reinterpret_cast<uintptr_t>(c.recv) + comm.rank * bytes;
      c.in_place = reinterpret_cast<uintptr_t>(c.send) == own;
      if (!c.in_place && overlaps(c.send, bytes, c.recv, bytes * ranks))
        return std::string("sendbuff (at recvbuff ") + offset_text(c.recv, c.send) +
               " bytes) overlaps recvbuff without being this rank's chunk (in place is "
               "sendbuff == recvbuff + rank * sendcount elements, here recvbuff +" +
               std::to_string(comm.rank * bytes) + " bytes)";
      add(c.send, bytes, AccessKind::read, "sendbuff");
      add(c.recv, bytes * ranks, AccessKind::write, "recvbuff");
      break;
    }
    case Kind::broadcast:
      if (c.peer < 0 || c.peer >= comm.size)
        return "root = " + std::to_string(c.peer) + " is invalid (valid: 0 to " +
               std::to_string(comm.size - 1) + ", the ranks of the communicator)";
      c.in_place = c.send == c.recv;
      if (comm.rank == c.peer) {  // sendbuff matters on the root only
        if (!c.in_place && overlaps(c.send, bytes, c.recv, bytes))
          return "recvbuff overlaps sendbuff without being it (in place is recvbuff == sendbuff)";
        add(c.send, bytes, AccessKind::read, "sendbuff");
      }
      add(c.recv, bytes, AccessKind::write, "recvbuff");
      break;
    case Kind::send:
    case Kind::recv:
      if (c.peer < 0 || c.peer >= comm.size)
        return "peer = " + std::to_string(c.peer) + " is invalid (valid: 0 to " +
               std::to_string(comm.size - 1) + ", the ranks of the communicator)";
      if (!comm.uses_mpi()) {
        status = ncclInvalidUsage;
        return "a send or receive within a communicator of one rank (to itself) is not emulated";
      }
      if (c.kind == Kind::send) add(c.send, bytes, AccessKind::read, "sendbuff");
      else add(c.recv, bytes, AccessKind::write, "recvbuff");
      break;
  }
  for (const DeviceAccess& a : c.accesses) {
    const std::string problem = check_device_range(a.ptr, a.bytes);
    if (!problem.empty()) return a.role + ": " + problem;
  }
  return "";
}

// ---- execution (the stream's side) ------------------------------------

void check_thread(const CommState& comm, const Call& call) {
#if SDP_HAVE_MPI
  if (!comm.uses_mpi()) return;
  const std::string problem = mpi_thread_problem(comm);
  if (!problem.empty())
    fault(std::string("emulated NCCL: ") + call.name + " on " + comm.label() + ": " + problem);
#else
  (void)comm;
  (void)call;
#endif
}

// A communicator of one rank: every operation is a copy of its own data
// (the average of one value is the value).
void run_local(const Call& c) {
  const size_t bytes = c.count * type_bytes(c.type);
  if (!c.in_place) std::memmove(c.recv, c.send, bytes);
}

#if SDP_HAVE_MPI
// The average of a sum: every element divided by the number of ranks, after
// the sum. Real NCCL computes ncclAvg of floating-point types differently:
// it multiplies each rank's value by 1/nranks (rounded to the type) before
// summing (its PreMulSum), and divides integer sums afterwards as here. For
// a power-of-two number of ranks scaling by 1/nranks is exact, so the two
// agree for sums added in the same order, except at the edges of the range
// (a sum that overflows, subnormals); for other counts they may differ in
// the last bit. (The order differs anyway: MPI's, not NCCL's ring or tree.)
// Integers truncate toward zero.
void divide(void* data, size_t n, ncclDataType_t type, int ranks) {
  switch (type) {
    case ncclFloat32: {
      auto* p = static_cast<float*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<float>(ranks);
      break;
    }
    case ncclFloat64: {
      auto* p = static_cast<double*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<double>(ranks);
      break;
    }
    case ncclInt32: {
      auto* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= ranks;
      break;
    }
    case ncclBfloat16: {
      // The bf16 sum widened to f32, divided, rounded once to bf16.
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < n; ++i)
        p[i] = f32_to_bf16(bf16_to_f32(p[i]) / static_cast<float>(ranks));
      break;
    }
    default: break;  // refused at call time
  }
}

MPI_Datatype reduce_type(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
    case ncclInt32: return MPI_INT32_T;
    default: return MPI_UINT16_T;  // ncclBfloat16, summed by bf16_sum_op
  }
}

MPI_Op reduce_op(ncclDataType_t type) { return type == ncclBfloat16 ? bf16_sum_op() : MPI_SUM; }

// Posts the MPI operations of `f` (the communicator's mutex is held).
//
// MPI_IN_PLACE must be passed by every rank or by none, while NCCL lets
// each rank choose: all-reduce and all-gather therefore always run in place
// (a rank that is not in place copies its input into recvbuff first) and
// reduce-scatter never does (a rank in place receives into scratch).
void post_mpi(Flight& f) {
  const Call& c = f.call;
  CommState& comm = *f.comm;
  const size_t bytes = c.count * type_bytes(c.type);
  const int count = static_cast<int>(c.count), byte_count = static_cast<int>(bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  const char* mpi_call = "";
  switch (c.kind) {
    case Kind::all_reduce:
      mpi_call = "MPI_Iallreduce";
      if (!c.in_place) std::memcpy(c.recv, c.send, bytes);
      rc = MPI_Iallreduce(MPI_IN_PLACE, c.recv, count, reduce_type(c.type), reduce_op(c.type),
                          comm.data, &request);
      break;
    case Kind::reduce_scatter: {
      mpi_call = "MPI_Ireduce_scatter_block";
      void* out = c.recv;
      if (c.in_place) {
        f.scratch.resize(bytes);
        out = f.scratch.data();
      }
      rc = MPI_Ireduce_scatter_block(c.send, out, count, reduce_type(c.type), reduce_op(c.type),
                                     comm.data, &request);
      break;
    }
    case Kind::all_gather: {
      mpi_call = "MPI_Iallgather";
      auto* own = static_cast<unsigned char*>(c.recv) + static_cast<size_t>(comm.rank) * bytes;
      if (!c.in_place) std::memcpy(own, c.send, bytes);
      rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, byte_count, MPI_BYTE,
                          comm.data, &request);
      break;
    }
    case Kind::broadcast:
      mpi_call = "MPI_Ibcast";
      // The root sends from recvbuff, which it fills from sendbuff first:
      // NCCL leaves the data in the root's recvbuff too.
      if (comm.rank == c.peer && !c.in_place) std::memcpy(c.recv, c.send, bytes);
      rc = MPI_Ibcast(c.recv, byte_count, MPI_BYTE, c.peer, comm.data, &request);
      break;
    case Kind::send:
      mpi_call = "MPI_Isend";
      rc = MPI_Isend(c.send, byte_count, MPI_BYTE, c.peer, kPointToPointTag, comm.data, &request);
      break;
    case Kind::recv:
      mpi_call = "MPI_Irecv";
      rc = MPI_Irecv(c.recv, byte_count, MPI_BYTE, c.peer, kPointToPointTag, comm.data, &request);
      break;
  }
  if (rc != MPI_SUCCESS) {
    set_async_error(comm, ncclSystemError,
                    std::string(c.name) + ": " + mpi_call + " failed: " + mpi_error_text(rc));
    return;
  }
  f.requests.push_back(request);
}

// After the MPI operations of `f` completed (the mutex is held).
void complete_mpi(Flight& f, const MPI_Status& status) {
  const Call& c = f.call;
  const CommState& comm = *f.comm;
  const size_t bytes = c.count * type_bytes(c.type);
  switch (c.kind) {
    case Kind::all_reduce:
      if (c.op == ncclAvg) divide(c.recv, c.count, c.type, comm.size);
      break;
    case Kind::reduce_scatter:
      if (c.in_place) std::memcpy(c.recv, f.scratch.data(), bytes);
      if (c.op == ncclAvg) divide(c.recv, c.count, c.type, comm.size);
      break;
    case Kind::recv: {
      int received = 0;
      MPI_Get_count(&status, MPI_BYTE, &received);
      if (static_cast<size_t>(received) != bytes) {
        f.done = true;  // reported once
        fault("emulated NCCL: ncclRecv from rank " + std::to_string(c.peer) + " on " +
              comm.label() + " expected " + std::to_string(bytes) + " bytes (" +
              std::to_string(c.count) + " x " + type_name(c.type) + ") but the matching ncclSend "
              "sent " + std::to_string(received) +
              ": a send and its receive must name the same count and datatype");
      }
      break;
    }
    default: break;
  }
}
#endif

// Posts every call of `comm` whose turn has come: in the order the host
// made them, each once its stream has reached it (the mutex is held).
void post_ready(CommState& comm) {
  while (!comm.unposted.empty() && comm.unposted.front()->ready) {
    std::shared_ptr<Flight> f = comm.unposted.front();
    comm.unposted.pop_front();
    f->posted = true;
    if (f->call.count == 0) {
      f->done = true;  // nothing to move; every rank skips it alike (NCCL requires equal counts)
    } else if (!comm.uses_mpi()) {
      run_local(f->call);
      f->done = true;
    } else if (comm.async_error == ncclSuccess) {
#if SDP_HAVE_MPI
      post_mpi(*f);
#endif
    }
    // After an asynchronous error nothing more goes on the wire: the call
    // stays in flight, as work behind a failed NCCL kernel would, until the
    // caller sees the error and aborts.
  }
}

void start_flights(const std::vector<std::shared_ptr<Flight>>& flights) {
  for (const auto& f : flights) {
    std::lock_guard<std::mutex> lock(f->comm->mutex);
    if (f->comm->aborted) continue;
    check_thread(*f->comm, f->call);
    f->ready = true;
    post_ready(*f->comm);
  }
}

// True when every call of the work has finished.
bool poll_flights(const std::vector<std::shared_ptr<Flight>>& flights) {
  bool all_done = true;
  for (const auto& f : flights) {
    if (f->done) continue;
    CommState& comm = *f->comm;
    std::lock_guard<std::mutex> lock(comm.mutex);
    if (comm.aborted) {
      f->done = true;  // abandoned (ncclCommAbort)
      continue;
    }
    check_thread(comm, f->call);
    post_ready(comm);
    if (f->done) continue;
    if (!f->posted || comm.async_error != ncclSuccess) {
      all_done = false;
      continue;
    }
#if SDP_HAVE_MPI
    int flag = 0;
    std::vector<MPI_Status> statuses(f->requests.size());
    const int rc = MPI_Testall(static_cast<int>(f->requests.size()), f->requests.data(), &flag,
                               statuses.data());
    if (rc != MPI_SUCCESS) {
      int code = rc;
      if (rc == MPI_ERR_IN_STATUS)
        for (const MPI_Status& s : statuses)
          if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING) code = s.MPI_ERROR;
      int error_class = code;
      MPI_Error_class(code, &error_class);
      if (f->call.kind == Kind::recv && error_class == MPI_ERR_TRUNCATE) {
        f->done = true;  // reported once
        fault("emulated NCCL: ncclRecv from rank " + std::to_string(f->call.peer) + " on " +
              comm.label() + ": the matching ncclSend sent more than the " +
              std::to_string(f->call.count * type_bytes(f->call.type)) + " bytes (" +
              std::to_string(f->call.count) + " x " + type_name(f->call.type) +
              ") this receive expects: a send and its receive must name the same count and "
              "datatype");
      }
      set_async_error(comm, ncclSystemError,
                      std::string(f->call.name) + ": MPI reported: " + mpi_error_text(code));
      all_done = false;
      continue;
    }
    if (!flag) {
      all_done = false;
      continue;
    }
    complete_mpi(*f, statuses.empty() ? MPI_Status{} : statuses[0]);
    f->done = true;
#else
    all_done = false;  // unreachable: without MPI every call runs locally
#endif
  }
  return all_done;
}

// Makes `waiter` wait for the work queued so far on `stream` (an event, as
// NCCL does it); the status of the first CUDA call that failed.
cudaError_t join(cudaStream_t waiter, cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (status != cudaSuccess) return status;
  status = cudaEventRecord(event, stream);
  if (status == cudaSuccess) status = cudaStreamWaitEvent(waiter, event, 0);
  cudaEventDestroy(event);  // the wait has taken the event's state already
  return status;
}

ncclResult_t refuse_cuda(const Call& call, const char* what, cudaError_t status) {
  return refuse(status == cudaErrorInvalidResourceHandle || status == cudaErrorInvalidValue
                    ? ncclInvalidArgument
                    : ncclUnhandledCudaError,
                std::string(call.name) + ": the emulated CUDA runtime refused " + what + " (" +
                    cudaGetErrorName(status) + "; a line before this one may say more)");
}

// Registers the calls with their communicators in the order they were made
// and hands them to the stream as one piece of work (a group's calls start
// together, so a grouped send and receive between two ranks cannot wait for
// each other). A group whose calls name several streams is, as NCCL
// documents it, one operation on all of them: it starts once every one of
// them has reached it and each of them waits until it has finished. It runs
// on the first stream, joined by events with the others before and after,
// which also tells the runtime's stream-order checker the truth.
ncclResult_t launch(std::vector<Pending>& calls) {
  std::vector<cudaStream_t> streams;
  for (const Pending& p : calls)
    if (std::find(streams.begin(), streams.end(), p.stream) == streams.end())
      streams.push_back(p.stream);
  const cudaStream_t home = streams[0];
  for (size_t i = 1; i < streams.size(); ++i) {
    const cudaError_t joined = join(home, streams[i]);
    if (joined != cudaSuccess)
      return refuse_cuda(calls[0].call, "the group's streams (joining them before it)", joined);
  }

  std::vector<std::shared_ptr<Flight>> flights;
  flights.reserve(calls.size());
  for (Pending& p : calls) {
    auto f = std::make_shared<Flight>();
    f->call = std::move(p.call);
    f->comm = p.comm;
    std::lock_guard<std::mutex> lock(f->comm->mutex);
    f->comm->unposted.push_back(f);
    flights.push_back(std::move(f));
  }
  StreamWork work;
  const bool several = flights.size() > 1;
  work.name = several ? "ncclGroupEnd:" : flights[0]->call.name;
  for (const auto& f : flights) {
    if (several) work.name += std::string(" ") + f->call.name;
    for (DeviceAccess a : f->call.accesses) {
      if (several) a.role = std::string(f->call.name) + " " + a.role;
      work.accesses.push_back(std::move(a));
    }
  }
  work.start = [flights] { start_flights(flights); };
  work.finished = [flights] { return poll_flights(flights); };
  const cudaError_t submitted = submit(home, std::move(work));
  if (submitted != cudaSuccess) {
    // Withdrawn, so that later calls of the communicators do not wait for them.
    for (const auto& f : flights) {
      std::lock_guard<std::mutex> lock(f->comm->mutex);
      auto& queue = f->comm->unposted;
      queue.erase(std::remove(queue.begin(), queue.end(), f), queue.end());
    }
    return refuse_cuda(flights[0]->call, "the stream work", submitted);
  }
  for (size_t i = 1; i < streams.size(); ++i) {
    const cudaError_t joined = join(streams[i], home);
    if (joined != cudaSuccess)
      return refuse_cuda(flights[0]->call, "the group's streams (joining them after it)", joined);
  }
  return ncclSuccess;
}

// Checks a call and launches it, or keeps it for ncclGroupEnd.
ncclResult_t enqueue(ncclComm_t handle, cudaStream_t stream, Call call) {
  auto comm = live_state(handle, call.name);
  ncclResult_t status = ncclInvalidArgument;
  std::string problem;
  if (!comm) {
    problem = ncclGetLastError(nullptr);  // live_state said what
  } else {
    problem = validate(call, *comm, status);
    if (!problem.empty()) {
      problem = std::string(call.name) + ": " + problem;
      refuse(status, problem);
    }
  }
  if (!problem.empty()) {
    if (group.depth > 0 && group.error == ncclSuccess) {
      group.error = status;
      group.error_message = problem;
    }
    return status;
  }
  std::vector<Pending> calls;
  calls.push_back(Pending{std::move(call), std::move(comm), stream});
  if (group.depth > 0) {
    group.calls.push_back(std::move(calls.back()));
    return ncclSuccess;
  }
  return launch(calls);
}

Call make_call(Kind kind, const char* name, const void* send, void* recv, size_t count,
               ncclDataType_t type, ncclRedOp_t op, int peer) {
  Call c;
  c.kind = kind;
  c.name = name;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.type = type;
  c.op = op;
  c.peer = peer;
  return c;
}

}  // namespace

int group_depth() { return group.depth; }

}  // namespace sdp::emu::nccl

using namespace sdp::emu::nccl;

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::all_reduce, "ncclAllReduce", sendbuff, recvbuff, count, datatype,
                           op, 0));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::reduce_scatter, "ncclReduceScatter", sendbuff, recvbuff,
                           recvcount, datatype, op, 0));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::all_gather, "ncclAllGather", sendbuff, recvbuff, sendcount,
                           datatype, ncclSum, 0));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::broadcast, "ncclBroadcast", sendbuff, recvbuff, count, datatype,
                           ncclSum, root));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::send, "ncclSend", sendbuff, nullptr, count, datatype, ncclSum,
                           peer));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream,
                 make_call(Kind::recv, "ncclRecv", nullptr, recvbuff, count, datatype, ncclSum,
                           peer));
}

ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group.depth == 0)
    return refuse(ncclInvalidUsage,
                  "ncclGroupEnd: no ncclGroupStart to end (each ncclGroupEnd closes one "
                  "ncclGroupStart of the same thread)");
  if (--group.depth > 0) return ncclSuccess;  // an inner group: the outermost one launches
  std::vector<Pending> calls = std::move(group.calls);
  group.calls.clear();
  const ncclResult_t error = group.error;
  const std::string message = std::move(group.error_message);
  group.error = ncclSuccess;
  group.error_message.clear();
  if (error != ncclSuccess)
    // As NCCL: a refused call fails the whole group, and nothing of it runs.
    return refuse(error, "ncclGroupEnd: nothing in the group was started because a call in it "
                         "was refused (" + message + ")");
  if (calls.empty()) return ncclSuccess;
  return launch(calls);
}

}  // extern "C"
