// Communicators of the emulated NCCL: unique ids, ncclCommInitRank over
// MPI_COMM_WORLD (or a world of one rank without MPI), ncclCommSplit,
// destroy and abort, asynchronous errors, and the error strings.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "cuda_emulator/nccl/nccl_emu.h"

namespace sdp::emu::nccl {

namespace {

// The bytes of an ncclUniqueId this library made: a mark that tells them
// from zeros or another library's id, and what makes two ids differ (the
// process, the time, a counter). ncclCommInitRank checks that every rank
// was given the same id, as real NCCL's bootstrap would (it hangs instead).
struct IdBody {
  char mark[16];
  uint64_t pid;
  uint64_t nanoseconds;
  uint64_t counter;
  char host[64];
};
static_assert(sizeof(IdBody) <= NCCL_UNIQUE_ID_BYTES);
constexpr char kIdMark[16] = "sdp-emu-nccl-1";

std::atomic<uint64_t> next_serial{1};

// Handles this library made and has not destroyed: a destroyed or foreign
// pointer is refused instead of read.
std::mutex registry_mutex;
std::unordered_set<const ncclComm*>& registry() {
  static auto* live = new std::unordered_set<const ncclComm*>();  // outlives static destructors
  return *live;
}

ncclComm_t make_handle(std::shared_ptr<CommState> state) {
  auto* comm = new ncclComm{std::move(state)};
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().insert(comm);
  return comm;
}

// Removes the handle from the registry; false when it was not there.
bool retire_handle(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  return registry().erase(comm) > 0;
}

thread_local std::string last_error;

std::string world_rank_prefix() {
#if SDP_HAVE_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int level = 0, main_thread = 0;
  if (initialized && !finalized) {
    // Any thread may ask these; only an allowed one asks for the rank.
    MPI_Query_thread(&level);
    MPI_Is_thread_main(&main_thread);
  }
  if (initialized && !finalized && (main_thread || level >= MPI_THREAD_SERIALIZED)) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return "[rank " + std::to_string(rank) + "] ";
  }
#endif
  return "";
}

std::shared_ptr<CommState> make_state(int rank, int size) {
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->size = size;
  state->serial = next_serial++;
  return state;
}

#if SDP_HAVE_MPI
uint64_t fnv1a(const void* bytes, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Makes the data communicator beside `control` and the state of both; on
// failure frees `control` and returns null after refusing.
std::shared_ptr<CommState> make_mpi_state(MPI_Comm control, const char* call) {
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  MPI_Comm data = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(control, &data);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&control);
    refuse(ncclSystemError, std::string(call) + ": MPI_Comm_dup failed: " + mpi_error_text(rc));
    return nullptr;
  }
  // Errors of the nonblocking operations come back as codes from MPI_Test,
  // and become the communicator's asynchronous error, as a failed NCCL
  // kernel's would, instead of ending the process inside MPI.
  MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(control, &rank);
  MPI_Comm_size(control, &size);
  auto state = make_state(rank, size);
  state->control = control;
  state->data = data;
  MPI_Query_thread(&state->thread_level);
  bf16_sum_op();  // made now, on the thread that sets up, never from a stream
  return state;
}

// Every field of a config must be left as NCCL_CONFIG_INITIALIZER set it:
// the emulator has no CTAs, networks or nonblocking setup to tune. The one
// exception is blocking = 1, which is what it does anyway.
std::string config_problem(const ncclConfig_t* config) {
  if (!config) return "";
  if (config->magic != 0xcafebeef)
    return "config was not initialized with NCCL_CONFIG_INITIALIZER (its magic is wrong)";
  if (config->blocking != NCCL_CONFIG_UNDEF_INT && config->blocking != 1)
    return "config->blocking = " + std::to_string(config->blocking) +
           " is not emulated (valid: 1, or left undefined: every call is blocking)";
  struct IntField {
    const char* name;
    int value;
  };
  const IntField ints[] = {{"cgaClusterSize", config->cgaClusterSize},
                           {"minCTAs", config->minCTAs},
                           {"maxCTAs", config->maxCTAs},
                           {"splitShare", config->splitShare},
                           {"trafficClass", config->trafficClass},
                           {"collnetEnable", config->collnetEnable},
                           {"CTAPolicy", config->CTAPolicy},
                           {"shrinkShare", config->shrinkShare},
                           {"nvlsCTAs", config->nvlsCTAs},
                           {"nChannelsPerNetPeer", config->nChannelsPerNetPeer},
                           {"nvlinkCentricSched", config->nvlinkCentricSched}};
  for (const IntField& f : ints)
    if (f.value != NCCL_CONFIG_UNDEF_INT)
      return std::string("config->") + f.name + " = " + std::to_string(f.value) +
             " is not emulated (valid: left as NCCL_CONFIG_INITIALIZER set it)";
  if (config->netName) return "config->netName is not emulated (valid: NULL)";
  if (config->commName) return "config->commName is not emulated (valid: NULL)";
  return "";
}
#endif

}  // namespace

bool CommState::uses_mpi() const {
#if SDP_HAVE_MPI
  return data != MPI_COMM_NULL;
#else
  return false;
#endif
}

std::string CommState::label() const {
  return "communicator " + std::to_string(serial) + " (rank " + std::to_string(rank) + " of " +
         std::to_string(size) + ")";
}

CommState::~CommState() {
#if SDP_HAVE_MPI
  if (!uses_mpi() || keep_mpi) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI freed everything it had
  MPI_Comm_free(&data);
  MPI_Comm_free(&control);
#endif
}

ncclResult_t refuse(ncclResult_t status, const std::string& message) {
  last_error = message;
  std::fprintf(stderr, "%ssdp emulated NCCL: %s\n", world_rank_prefix().c_str(), message.c_str());
  std::fflush(stderr);
  return status;
}

void set_async_error(CommState& comm, ncclResult_t status, const std::string& message) {
  // Called with comm.mutex held.
  if (comm.async_error != ncclSuccess) return;  // the first error is the one that counts
  comm.async_error = status;
  comm.async_message = comm.label() + ": " + message;
  std::fprintf(stderr, "%ssdp emulated NCCL: %s\n", world_rank_prefix().c_str(),
               comm.async_message.c_str());
  std::fflush(stderr);
}

std::shared_ptr<CommState> live_state(ncclComm_t comm, const char* call) {
  if (!comm) {
    refuse(ncclInvalidArgument, std::string(call) + ": comm is NULL");
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    if (registry().count(comm)) return comm->state;
  }
  refuse(ncclInvalidArgument,
         std::string(call) + ": comm is not a live communicator (destroyed, aborted, or never "
                             "made by ncclCommInitRank or ncclCommSplit)");
  return nullptr;
}

std::string type_name(ncclDataType_t type) {
  static const char* const names[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",
                                      "ncclUint32",  "ncclInt64",    "ncclUint64",
                                      "ncclFloat16", "ncclFloat32",  "ncclFloat64",
                                      "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  const int t = static_cast<int>(type);
  const std::string name = t >= 0 && t < 12 ? names[t] : "not an ncclDataType_t";
  return name + " (" + std::to_string(t) + ")";
}

std::string op_name(ncclRedOp_t op) {
  static const char* const names[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  const int o = static_cast<int>(op);
  const std::string name = o >= 0 && o < 5 ? names[o] : "a custom or unknown ncclRedOp_t";
  return name + " (" + std::to_string(o) + ")";
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclUint8: return 1;
    case ncclInt32: return 4;
    case ncclFloat32: return 4;
    case ncclFloat64: return 8;
    case ncclBfloat16: return 2;
    default: return 0;
  }
}

float bf16_to_f32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep the sign, make it quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Round to nearest, ties to even: add just under half an ulp of bf16, plus
  // one when the kept part is odd, then truncate.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

#if SDP_HAVE_MPI
namespace {
// MPI has no bf16: the reduction runs over 16-bit words, each pair widened
// to f32, added, and rounded back to bf16 (nearest even). Every partial sum
// is rounded, as in NCCL, but MPI combines the ranks' values in its own
// order (a tree, recursive halving...), not in NCCL's ring or tree order, so
// a sum of more than two ranks may differ from real NCCL's in the last bit.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}
}  // namespace

MPI_Op bf16_sum_op() {
  // Made once and never freed: MPI_Finalize releases it.
  static MPI_Op op = [] {
    MPI_Op made = MPI_OP_NULL;
    MPI_Op_create(&bf16_sum, /*commute=*/1, &made);
    return made;
  }();
  return op;
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

std::string mpi_thread_problem(const CommState& comm) {
  if (comm.thread_level >= MPI_THREAD_SERIALIZED) return "";
  int main_thread = 0;
  MPI_Is_thread_main(&main_thread);
  if (main_thread) return "";
  return "MPI was initialized with thread level " + std::to_string(comm.thread_level) +
         " (MPI_THREAD_FUNNELED or lower), so only the thread that initialized it may call MPI, "
         "and this NCCL call (or the CUDA runtime call that drives its stream) came from "
         "another thread";
}
#endif

}  // namespace sdp::emu::nccl

using namespace sdp::emu::nccl;

extern "C" {

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error (the emulated NCCL's MPI transport failed)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  // A communicator's asynchronous error is the more specific message; its
  // text lives as long as the communicator.
  if (comm) {
    std::lock_guard<std::mutex> registry_lock(registry_mutex);
    if (registry().count(comm)) {
      std::lock_guard<std::mutex> lock(comm->state->mutex);
      if (comm->state->async_error != ncclSuccess) return comm->state->async_message.c_str();
    }
  }
  return last_error.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return refuse(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static std::atomic<uint64_t> counter{0};
  IdBody body{};
  std::memcpy(body.mark, kIdMark, sizeof body.mark);
  body.pid = static_cast<uint64_t>(getpid());
  body.nanoseconds = static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  body.counter = counter++;
  gethostname(body.host, sizeof body.host - 1);
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  std::memcpy(uniqueId->internal, &body, sizeof body);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (!comm) return refuse(ncclInvalidArgument, "ncclCommInitRank: comm (the result) is NULL");
  *comm = nullptr;
  if (nranks < 1)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: nranks = " + std::to_string(nranks) +
                                           " is invalid (valid: >= 1)");
  if (rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, "ncclCommInitRank: rank = " + std::to_string(rank) +
                                           " is invalid (valid: 0 to nranks - 1 = " +
                                           std::to_string(nranks - 1) + ")");
  if (group_depth() > 0)
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: called between ncclGroupStart and ncclGroupEnd, which the "
                  "emulator does not support for communicator setup (call it outside a group)");
  if (std::memcmp(commId.internal, kIdMark, sizeof kIdMark) != 0)
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRank: commId was not made by ncclGetUniqueId (of the emulated "
                  "NCCL): rank 0 makes it and sends it to the others");
  if (nranks == 1) {
    // A world of one: no peer, no MPI (a single-GPU run initializes none).
    *comm = make_handle(make_state(0, 1));
    return ncclSuccess;
  }
#if !SDP_HAVE_MPI
  return refuse(ncclInvalidUsage,
                "ncclCommInitRank: nranks = " + std::to_string(nranks) +
                    ": the emulated NCCL carries data between ranks through MPI, which this "
                    "build lacks (valid here: nranks = 1)");
#else
  const char* call = "ncclCommInitRank";
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: nranks = " + std::to_string(nranks) +
                      " needs MPI, which is " + (finalized ? "finalized" : "not initialized") +
                      ": the emulated NCCL carries data between ranks through MPI (initialize "
                      "it first, as comm/mpi_runtime does; a world of nranks = 1 needs none)");
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (nranks != world_size)
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: nranks = " + std::to_string(nranks) + " is " +
                      (nranks < world_size ? "a subset of" : "more than") + " the " +
                      std::to_string(world_size) +
                      " ranks of MPI_COMM_WORLD: the emulated NCCL makes a communicator of "
                      "every MPI rank (nranks = " + std::to_string(world_size) +
                      ") or of one (nranks = 1); make smaller groups with ncclCommSplit");
  {
    CommState probe;  // the thread level, to check this thread may call MPI
    MPI_Query_thread(&probe.thread_level);
    const std::string problem = mpi_thread_problem(probe);
    if (!problem.empty()) return refuse(ncclInvalidUsage, std::string(call) + ": " + problem);
  }

  // Ranks ordered by `rank`; then every rank learns whether all were given
  // the same id and each its own rank, so that all refuse alike instead of
  // some hanging.
  MPI_Comm control = MPI_COMM_NULL;
  int rc = MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &control);
  if (rc != MPI_SUCCESS)
    return refuse(ncclSystemError, "ncclCommInitRank: MPI_Comm_split of MPI_COMM_WORLD failed: " +
                                       mpi_error_text(rc));
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  int control_rank = 0;
  MPI_Comm_rank(control, &control_rank);
  const uint64_t id_hash = fnv1a(commId.internal, sizeof commId.internal);
  uint64_t check[3] = {id_hash, ~id_hash, control_rank != rank ? 1u : 0u};
  rc = MPI_Allreduce(MPI_IN_PLACE, check, 3, MPI_UINT64_T, MPI_MAX, control);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&control);
    return refuse(ncclSystemError, "ncclCommInitRank: MPI_Allreduce (checking the ids) failed: " +
                                       mpi_error_text(rc));
  }
  // max(h) == h everywhere and max(~h) == ~h everywhere: every rank's h is the same.
  if (check[0] != id_hash || check[1] != ~id_hash) {
    MPI_Comm_free(&control);
    return refuse(ncclInvalidUsage,
                  "ncclCommInitRank: the ranks were given different commIds (every rank must "
                  "pass the one id that rank 0 made with ncclGetUniqueId)");
  }
  if (check[2] != 0) {
    MPI_Comm_free(&control);
    return refuse(ncclInvalidArgument,
                  "ncclCommInitRank: two ranks passed the same rank (valid: each of 0 to " +
                      std::to_string(nranks - 1) + " exactly once)");
  }
  auto state = make_mpi_state(control, call);
  if (!state) return ncclSystemError;
  *comm = make_handle(std::move(state));
  return ncclSuccess;
#endif
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  const char* call = "ncclCommSplit";
  auto parent = live_state(comm, call);
  if (!parent) return ncclInvalidArgument;
  if (newcomm) *newcomm = nullptr;

  // What is wrong with this rank's arguments, if anything. A rank that is
  // refused still takes part in the MPI split (as no color), so that its
  // peers get their groups instead of hanging.
  ncclResult_t status = ncclSuccess;
  std::string problem;
  if (!newcomm) {
    status = ncclInvalidArgument;
    problem = "newcomm (the result) is NULL";
  } else if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    status = ncclInvalidArgument;
    problem = "color = " + std::to_string(color) +
              " is invalid (valid: >= 0, or NCCL_SPLIT_NOCOLOR = -1 for no group)";
  } else if (group_depth() > 0) {
    status = ncclInvalidUsage;
    problem = "called between ncclGroupStart and ncclGroupEnd, which the emulator does not "
              "support for communicator setup (call it outside a group)";
  }
  if (problem.empty()) {
#if SDP_HAVE_MPI
    problem = config_problem(config);
#else
    if (config) problem = "config is not emulated (valid: NULL)";
#endif
    if (!problem.empty()) status = ncclInvalidArgument;
  }

  if (!parent->uses_mpi()) {
    // A communicator of one rank splits into one of one rank, or none
    // (the key orders nothing).
    (void)key;
    if (!problem.empty()) return refuse(status, std::string(call) + ": " + problem);
    if (color != NCCL_SPLIT_NOCOLOR) *newcomm = make_handle(make_state(0, 1));
    return ncclSuccess;
  }
#if SDP_HAVE_MPI
  {
    const std::string thread = mpi_thread_problem(*parent);
    if (!thread.empty()) return refuse(ncclInvalidUsage, std::string(call) + ": " + thread);
  }
  MPI_Comm control = MPI_COMM_NULL;
  const int mpi_color = !problem.empty() || color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color;
  const int rc = MPI_Comm_split(parent->control, mpi_color, key, &control);
  if (rc != MPI_SUCCESS)
    return refuse(ncclSystemError, std::string(call) + ": MPI_Comm_split failed: " +
                                       mpi_error_text(rc));
  if (!problem.empty()) return refuse(status, std::string(call) + ": " + problem);
  if (control == MPI_COMM_NULL) return ncclSuccess;  // NCCL_SPLIT_NOCOLOR: no group
  auto state = make_mpi_state(control, call);
  if (!state) return ncclSystemError;
  *newcomm = make_handle(std::move(state));
  return ncclSuccess;
#else
  return refuse(ncclInternalError, "ncclCommSplit: an MPI communicator in a build without MPI");
#endif
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: nothing to destroy
  if (!retire_handle(comm))
    return refuse(ncclInvalidArgument,
                  "ncclCommDestroy: comm is not a live communicator (destroyed or aborted "
                  "already, or never made by ncclCommInitRank or ncclCommSplit)");
  // Calls still queued or in flight hold the state: they finish first, and
  // the last of them frees the MPI communicators (CommState's destructor).
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (!retire_handle(comm))
    return refuse(ncclInvalidArgument,
                  "ncclCommAbort: comm is not a live communicator (destroyed or aborted already, "
                  "or never made by ncclCommInitRank or ncclCommSplit)");
  {
    // Never waits: calls not yet posted are dropped, calls in flight are
    // abandoned (their MPI requests stay pending and are never freed, and
    // neither are the MPI communicators: a collective still in flight may
    // be matched by a peer later, and MPI_Comm_free could wait for it). The
    // streams that held them move on, as after an aborted NCCL kernel; what
    // the buffers then hold is undefined. The caller is ending the job.
    std::lock_guard<std::mutex> lock(comm->state->mutex);
    comm->state->aborted = true;
    comm->state->keep_mpi = true;
    comm->state->unposted.clear();
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  auto state = live_state(comm, "ncclCommGetAsyncError");
  if (!state) return ncclInvalidArgument;
  if (!asyncError) return refuse(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  std::lock_guard<std::mutex> lock(state->mutex);
  *asyncError = state->async_error;
  return ncclSuccess;
}

}  // extern "C"
