#pragma once
// Internals of the emulated NCCL: the struct behind ncclComm_t, the calls as
// they wait for their turn on the wire, and the one way a call reports a
// refusal.
//
// Transport: MPI. A communicator of N > 1 ranks owns two MPI communicators
// of the same ranks: `control` carries the blocking setup calls
// (ncclCommInitRank's checks, ncclCommSplit) and `data` the nonblocking
// operations the streams start. They are apart because the data operations
// are posted late (in stream order, below) while setup calls happen at once:
// on one MPI communicator a rank could then post a split before an
// all-reduce that its peer posted after it, and MPI requires every rank to
// make the collective calls of a communicator in the same order. A
// communicator of one rank needs no MPI at all (a single-GPU run initializes
// none): its operations are local copies.
//
// Order on the wire: every call is registered with its communicator in the
// order the host made it and posted to MPI in that order, each once its
// stream has reached it. NCCL requires every rank to call the collectives of
// a communicator in the same order, and MPI requires the same of the
// nonblocking collectives posted on one MPI communicator; posting in stream
// order instead could pair one rank's first all-reduce with another's second
// when their streams get there in different orders. A call whose stream is
// ready before an earlier call's stream waits (its work stays in flight)
// until the earlier one is posted. That is also how NCCL launches the
// operations of one communicator, in call order whatever their streams
// (its kernels queue behind one another on the communicator's own stream),
// so a program that deadlocks here (a send called after an all-reduce whose
// stream waits for that send's receiver) can hang on GPUs too. The emulator
// is more lenient in one way: a posted operation does not hold up the
// posting of the next, while NCCL runs a communicator's kernels one after
// another.
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if SDP_HAVE_MPI
#include <mpi.h>
#endif

#include "cuda_emulator/runtime/stream_work.h"

namespace sdp::emu::nccl {

enum class Kind { all_reduce, reduce_scatter, all_gather, broadcast, send, recv };

struct CommState;

// One validated call, with everything its execution needs captured by value.
struct Call {
  Kind kind = Kind::all_reduce;
  const char* name = "";  // "ncclAllReduce"
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements per rank as NCCL counts them: count (all-reduce, broadcast,
  // send, recv), recvcount (reduce-scatter), sendcount (all-gather).
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int peer = 0;  // root of a broadcast, peer of a send or recv
  bool in_place = false;
  std::vector<DeviceAccess> accesses;
};

// A call after the host handed it to a stream: waiting for its stream
// (ready = false), waiting for its turn (ready, not posted), on the wire
// (posted), or done.
struct Flight {
  Call call;
  std::shared_ptr<CommState> comm;
  bool ready = false;
  bool posted = false;
  bool done = false;
#if SDP_HAVE_MPI
  std::vector<MPI_Request> requests;
#endif
  // A reduce-scatter in place receives into this first: MPI may not write
  // a buffer it also reads, and MPI_IN_PLACE would leave the result at the
  // start of the buffer, not at this rank's chunk where NCCL puts it.
  std::vector<unsigned char> scratch;
};

// What the handle, and every call still in flight, share: the handle may be
// destroyed while its calls finish (CUDA lets a stream run on), so the MPI
// communicators are freed when the last of them lets go.
struct CommState {
  int rank = 0;
  int size = 1;
  uint64_t serial = 0;  // "communicator 3" in messages
#if SDP_HAVE_MPI
  MPI_Comm control = MPI_COMM_NULL;
  MPI_Comm data = MPI_COMM_NULL;
  int thread_level = 0;  // what MPI_Query_thread said when it was made
#endif
  std::mutex mutex;  // guards everything below
  std::deque<std::shared_ptr<Flight>> unposted;  // in the order the host made the calls
  ncclResult_t async_error = ncclSuccess;
  std::string async_message;
  bool aborted = false;
  // ncclCommAbort leaves the MPI communicators alone: requests may still be
  // pending on them, and the job is ending.
  bool keep_mpi = false;

  bool uses_mpi() const;
  std::string label() const;  // "communicator 3 (rank 1 of 4)"
  ~CommState();
};

// The calls of this library report a refusal the same way: one line on
// stderr, the text kept for ncclGetLastError, and the status returned.
ncclResult_t refuse(ncclResult_t status, const std::string& message);
// Records an error found while a call was in flight: the communicator's
// asynchronous error (ncclCommGetAsyncError), one line on stderr.
void set_async_error(CommState& comm, ncclResult_t status, const std::string& message);

// The state of a live handle; null (after refusing, naming `call`) when
// `comm` is null or not a communicator this library made and still holds.
std::shared_ptr<CommState> live_state(ncclComm_t comm, const char* call);

// How deep the calling thread is inside ncclGroupStart (0: not in a group).
int group_depth();

// Names for messages: "ncclFloat32 (7)", "ncclProd (1)".
std::string type_name(ncclDataType_t type);
std::string op_name(ncclRedOp_t op);
// Bytes of one element; 0 for a type this library does not carry.
size_t type_bytes(ncclDataType_t type);

// bf16 <-> f32, round to nearest even (NaN stays a quiet NaN).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);

#if SDP_HAVE_MPI
// The MPI operation that sums bf16 words (created on first use).
MPI_Op bf16_sum_op();
// MPI's text for an error code.
std::string mpi_error_text(int code);
// Empty when this thread may call MPI for `comm`; else what is wrong.
std::string mpi_thread_problem(const CommState& comm);
#endif

}  // namespace sdp::emu::nccl

// The opaque type nccl.h declares (typedef struct ncclComm* ncclComm_t).
struct ncclComm {
  std::shared_ptr<sdp::emu::nccl::CommState> state;
};
