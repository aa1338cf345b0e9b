// The emulated cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul.
//
// Both judge the product the same way (describe_problem): live descriptors,
// a supported type combination, column-major layouts with ld >= rows, and
// op(A) [m, k], op(B) [k, n], C and D [m, n]. The heuristic then offers one
// algorithm, recording in it the pointer alignments and workspace the
// preference promised; the matmul holds its call to those promises, checks
// its pointers, and queues the arithmetic in stream order through
// sdp::emu::submit. Nothing is computed at call time.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cuda_emulator/cublaslt/cublaslt_emu.h"
#include "cuda_emulator/cublaslt/matmul_compute.h"
#include "cuda_emulator/runtime/stream_work.h"

using namespace sdp::emu::cublaslt;

namespace {

constexpr int64_t kMaxDim = INT32_MAX;  // cuBLASLt: "usually only int32_t values"; sgemm takes int
constexpr const char* kRoles[4] = {"A", "B", "C", "D"};

// The product the descriptors describe, copied out of them.
struct Problem {
  Layout layout[4];  // A, B, C, D
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
};

std::string shape(const Layout& l) {
  return std::to_string(l.rows) + " x " + std::to_string(l.cols) + " (ld " + std::to_string(l.ld) +
         ")";
}

// Rows and columns of op(X) for a stored X.
std::pair<int64_t, int64_t> op_shape(const Layout& l, cublasOperation_t op) {
  const auto rows = static_cast<int64_t>(l.rows), cols = static_cast<int64_t>(l.cols);
  return op == CUBLAS_OP_N ? std::pair{rows, cols} : std::pair{cols, rows};
}

cublasStatus_t check_dims(const char* call, const char* role, const Layout& l) {
  const std::string what = std::string(role) + "desc is " + shape(l);
  if (l.rows == 0 || l.cols == 0)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  what + ": the emulator supports non-empty matrices only");
  if (l.ld < 0 || static_cast<uint64_t>(l.ld) < l.rows)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  what + ": a column-major matrix needs ld >= rows (columns must not overlap)");
  if (l.rows > static_cast<uint64_t>(kMaxDim) || l.cols > static_cast<uint64_t>(kMaxDim) ||
      l.ld > kMaxDim)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  what + ": the emulator supports rows, cols and ld up to 2^31 - 1");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t describe_problem(const char* call, cublasLtMatmulDesc_t desc,
                                cublasLtMatrixLayout_t adesc, cublasLtMatrixLayout_t bdesc,
                                cublasLtMatrixLayout_t cdesc, cublasLtMatrixLayout_t ddesc,
                                Problem* p) {
  if (const cublasStatus_t status = check_desc(call, desc); status != CUBLAS_STATUS_SUCCESS)
    return status;
  const cublasLtMatrixLayout_t descs[4] = {adesc, bdesc, cdesc, ddesc};
  for (int i = 0; i < 4; ++i) {
    const std::string role = std::string(kRoles[i]) + "desc";
    if (const cublasStatus_t status = check_layout(call, role.c_str(), descs[i]);
        status != CUBLAS_STATUS_SUCCESS)
      return status;
    p->layout[i] = *state_of(descs[i]);
  }
  const MatmulDesc& d = *state_of(desc);
  p->op_a = d.trans_a;
  p->op_b = d.trans_b;
  for (int i = 0; i < 4; ++i)
    if (const cublasStatus_t status = check_dims(call, kRoles[i], p->layout[i]);
        status != CUBLAS_STATUS_SUCCESS)
      return status;

  // CUBLAS_COMPUTE_32F with CUDA_R_32F scale: cuBLASLt's table allows A/B
  // bf16 with C/D bf16 or f32, and A/B f32 with C/D f32; the engine uses all
  // three. A and B share one type, C and D another.
  const cudaDataType_t ta = p->layout[0].type, tb = p->layout[1].type, tc = p->layout[2].type,
                       td = p->layout[3].type;
  if (ta != tb || tc != td || (ta == CUDA_R_32F && tc != CUDA_R_32F))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  "types A " + data_type_name(ta) + ", B " + data_type_name(tb) + ", C " +
                      data_type_name(tc) + ", D " + data_type_name(td) +
                      " (with CUBLAS_COMPUTE_32F the emulator supports A = B = CUDA_R_32F with "
                      "C = D = CUDA_R_32F, and A = B = CUDA_R_16BF with C = D = CUDA_R_16BF or "
                      "CUDA_R_32F)");

  const auto [m, k] = op_shape(p->layout[0], p->op_a);
  const auto [kb, n] = op_shape(p->layout[1], p->op_b);
  const Layout& c = p->layout[2];
  const Layout& dl = p->layout[3];
  if (kb != k || static_cast<int64_t>(c.rows) != m || static_cast<int64_t>(c.cols) != n ||
      static_cast<int64_t>(dl.rows) != m || static_cast<int64_t>(dl.cols) != n) {
    std::ostringstream out;
    out << "shapes do not match: op(A) = " << operation_name(p->op_a) << "(A "
        << shape(p->layout[0]) << ") is " << m << " x " << k
        << ", op(B) = " << operation_name(p->op_b) << "(B " << shape(p->layout[1]) << ") is " << kb
        << " x " << n << ", C is " << shape(c) << ", D is " << shape(dl)
        << " (need op(A) m x k, op(B) k x n, C and D m x n)";
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, out.str());
  }
  p->m = m;
  p->n = n;
  p->k = k;
  return CUBLAS_STATUS_SUCCESS;
}

// Bytes from a matrix's first element to one past its last.
uint64_t extent_bytes(const Layout& l) {
  return ((l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows) * element_bytes(l.type);
}

std::string hex(uintptr_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

// The largest power of two (up to 256) dividing the address, for messages.
uint32_t alignment_of(uintptr_t address) {
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

// The bytes a column-major matrix (or a flat buffer: one column) occupies:
// `cols` runs of `run` bytes, `stride` bytes apart (run <= stride).
struct Footprint {
  int64_t base = 0;  // address
  int64_t run = 0, stride = 0, cols = 0;
  int64_t end() const { return base + (cols - 1) * stride + run; }
};

Footprint footprint(const void* p, const Layout& l) {
  const auto es = static_cast<int64_t>(element_bytes(l.type));
  return Footprint{static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)),
                   static_cast<int64_t>(l.rows) * es, l.ld * es, static_cast<int64_t>(l.cols)};
}

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// True when the two footprints share a byte. Two matrices interleaved
// column by column (ld larger than rows) share none although their extents
// overlap, so each column of the narrower one is tested against the columns
// of the other that could reach it.
bool shares_bytes(Footprint x, Footprint y) {
  if (x.end() <= y.base || y.end() <= x.base) return false;
  if (x.cols > y.cols) std::swap(x, y);
  for (int64_t j = 0; j < x.cols; ++j) {
    const int64_t s = x.base + j * x.stride, e = s + x.run;
    // Columns i of y with y.base + i * stride in (s - run_y, e).
    int64_t lo = floor_div(s - y.run - y.base, y.stride) + 1;
    int64_t hi = floor_div(e - y.base - 1, y.stride);
    if (lo < 0) lo = 0;
    if (hi > y.cols - 1) hi = y.cols - 1;
    if (lo <= hi) return true;
  }
  return false;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  const char* call = "cublasLtMatmulAlgoGetHeuristic";
  if (const cublasStatus_t status = check_handle(call, lightHandle);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  if (requestedAlgoCount <= 0)
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE, call,
        "requestedAlgoCount = " + std::to_string(requestedAlgoCount) + " (must be at least 1)");
  if (heuristicResultsArray == nullptr || returnAlgoCount == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "heuristicResultsArray and returnAlgoCount must not be NULL");
  *returnAlgoCount = 0;
  if (const cublasStatus_t status = check_preference(call, preference);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  Problem p;
  if (const cublasStatus_t status =
          describe_problem(call, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
      status != CUBLAS_STATUS_SUCCESS)
    return status;

  const Preference pref = *state_of(preference);
  // No kernel reads elements that are not even aligned to their own size.
  for (int i = 0; i < 4; ++i)
    if (pref.min_alignment[i] < element_bytes(p.layout[i].type))
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                    std::string("no algorithm for ") + kRoles[i] + " aligned to " +
                        std::to_string(pref.min_alignment[i]) + " bytes: its " +
                        data_type_name(p.layout[i].type) + " elements need " +
                        std::to_string(element_bytes(p.layout[i].type)));

  // One algorithm, chosen (as the real heuristic may choose) for exactly the
  // alignments promised and using all the workspace allowed: a matmul that
  // then passes less aligned pointers or a smaller workspace is refused.
  AlgoRecord record;
  record.a_type = p.layout[0].type;
  record.b_type = p.layout[1].type;
  record.c_type = p.layout[2].type;
  record.d_type = p.layout[3].type;
  for (int i = 0; i < 4; ++i) record.alignment[i] = pref.min_alignment[i];
  record.workspace_bytes = pref.max_workspace_bytes;

  cublasLtMatmulHeuristicResult_t& result = heuristicResultsArray[0];
  std::memset(&result, 0, sizeof(result));
  encode_algo(record, &result.algo);
  result.workspaceSize = static_cast<size_t>(record.workspace_bytes);
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream) {
  const char* call = "cublasLtMatmul";
  if (const cublasStatus_t status = check_handle(call, lightHandle);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  Problem p;
  if (const cublasStatus_t status =
          describe_problem(call, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
      status != CUBLAS_STATUS_SUCCESS)
    return status;

  // Host pointer mode (the only one emulated): the scalars are read now.
  if (alpha == nullptr || beta == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "alpha and beta must point to host floats (CUBLASLT_POINTER_MODE_HOST)");
  float alpha_value = 0.0f, beta_value = 0.0f;
  std::memcpy(&alpha_value, alpha, sizeof(float));
  std::memcpy(&beta_value, beta, sizeof(float));
  const bool reads_c = beta_value != 0.0f;

  const void* ptrs[4] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (ptrs[i] == nullptr && (i != 2 || reads_c))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                    std::string(kRoles[i]) + " is NULL" + (i == 2 ? " while beta != 0" : ""));

  if (algo == nullptr)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  "algo is NULL: the emulator does not run the implicit heuristic; pass an algo "
                  "from cublasLtMatmulAlgoGetHeuristic");
  AlgoRecord record;
  if (!decode_algo(*algo, &record))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "algo was not returned by this emulator's cublasLtMatmulAlgoGetHeuristic");
  const cudaDataType_t types[4] = {record.a_type, record.b_type, record.c_type, record.d_type};
  for (int i = 0; i < 4; ++i)
    if (types[i] != p.layout[i].type)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                    std::string("algo was chosen for ") + kRoles[i] + " of type " +
                        data_type_name(types[i]) + ", but " + kRoles[i] + "desc has " +
                        data_type_name(p.layout[i].type));

  // Workspace: at least what the algo needs; present and 256-byte aligned
  // (cuBLASLt's documented requirement) whenever a size is given.
  if (workspaceSizeInBytes < record.workspace_bytes)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "workspaceSizeInBytes = " + std::to_string(workspaceSizeInBytes) +
                      " is less than the " + std::to_string(record.workspace_bytes) +
                      " bytes the algo needs (its heuristic result's workspaceSize)");
  if (workspaceSizeInBytes > 0 && workspace == nullptr)
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE, call,
        "workspace is NULL but workspaceSizeInBytes = " + std::to_string(workspaceSizeInBytes));
  if (workspaceSizeInBytes > 0 && reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
    return refuse(
        CUBLAS_STATUS_INVALID_VALUE, call,
        "workspace " + hex(reinterpret_cast<uintptr_t>(workspace)) + " is not 256-byte aligned");

  // The algorithm may use vector loads as wide as the alignment it was
  // chosen for; a pointer aligned to less would fault on a GPU.
  constexpr const char* kAlignAttr[4] = {
      "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
      "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES"};
  for (int i = 0; i < 4; ++i) {
    const auto address = reinterpret_cast<uintptr_t>(ptrs[i]);
    if (ptrs[i] != nullptr && address % record.alignment[i] != 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                    std::string(kRoles[i]) + " = " + hex(address) + " is aligned to " +
                        std::to_string(alignment_of(address)) +
                        " bytes, but the algo was chosen for " + kAlignAttr[i] + " = " +
                        std::to_string(record.alignment[i]) +
                        " (ask the heuristic with the alignment the pointer really has)");
  }

  // In place (C == D): cuBLASLt requires C and D to be laid out alike.
  const Layout& c_layout = p.layout[2];
  const Layout& d_layout = p.layout[3];
  if (C != nullptr && C == D &&
      (c_layout.type != d_layout.type || c_layout.rows != d_layout.rows ||
       c_layout.cols != d_layout.cols || c_layout.ld != d_layout.ld))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "C and D are the same pointer but Cdesc (" + data_type_name(c_layout.type) + " " +
                      shape(c_layout) + ") differs from Ddesc (" + data_type_name(d_layout.type) +
                      " " + shape(d_layout) + "); in-place matmul needs identical layouts");

  // D written while A, B (and C, unless it is D itself) are read, and the
  // workspace scribbled on: on a GPU any shared byte makes the result
  // undefined, so it is reported as a fault of the calling code.
  const Footprint d_bytes = footprint(D, d_layout);
  struct Input {
    const char* role;
    Footprint bytes;
  };
  std::vector<Input> inputs = {{"A", footprint(A, p.layout[0])}, {"B", footprint(B, p.layout[1])}};
  if (reads_c && C != D) inputs.push_back({"C", footprint(C, c_layout)});
  std::vector<Input> written = {{"D", d_bytes}};
  if (workspace != nullptr && workspaceSizeInBytes > 0) {
    const auto w = static_cast<int64_t>(workspaceSizeInBytes);
    const Footprint ws{static_cast<int64_t>(reinterpret_cast<uintptr_t>(workspace)), w, w, 1};
    for (const Input& in : inputs)
      if (shares_bytes(ws, in.bytes))
        sdp::emu::fault(std::string(call) + ": the workspace [" +
                        hex(reinterpret_cast<uintptr_t>(workspace)) + ", +" +
                        std::to_string(workspaceSizeInBytes) + " bytes) shares memory with " +
                        in.role + ": the result would be undefined on a GPU");
    inputs.push_back({"the workspace", ws});
  }
  for (const Input& in : inputs)
    if (shares_bytes(d_bytes, in.bytes))
      sdp::emu::fault(std::string(call) + ": D (" + hex(reinterpret_cast<uintptr_t>(D)) + ", " +
                      shape(d_layout) + ") shares memory with " + in.role +
                      "; cuBLASLt writes D while reading its inputs, so the result would be "
                      "undefined on a GPU (only C == D with identical layouts is allowed)");

  // The work: everything by value (the caller may destroy the descriptors
  // and reuse alpha and beta as soon as this returns).
  sdp::emu::cublaslt::MatmulTask task;
  task.op_a = p.op_a;
  task.op_b = p.op_b;
  task.m = p.m;
  task.n = p.n;
  task.k = p.k;
  task.alpha = alpha_value;
  task.beta = beta_value;
  auto operand = [](const void* ptr, const Layout& l) {
    return Operand{ptr, l.type, static_cast<int64_t>(l.rows), static_cast<int64_t>(l.cols), l.ld};
  };
  task.a = operand(A, p.layout[0]);
  task.b = operand(B, p.layout[1]);
  task.c = operand(reads_c ? C : nullptr, c_layout);
  task.d = D;
  task.d_type = d_layout.type;
  task.ldd = d_layout.ld;

  sdp::emu::StreamWork work;
  work.name = call;
  using sdp::emu::AccessKind;
  work.accesses.push_back({A, extent_bytes(p.layout[0]), AccessKind::read, "A"});
  work.accesses.push_back({B, extent_bytes(p.layout[1]), AccessKind::read, "B"});
  if (reads_c) work.accesses.push_back({C, extent_bytes(c_layout), AccessKind::read, "C"});
  work.accesses.push_back({D, extent_bytes(d_layout), AccessKind::write, "D"});
  if (workspace != nullptr && workspaceSizeInBytes > 0)
    work.accesses.push_back({workspace, workspaceSizeInBytes, AccessKind::write, "workspace"});
  work.start = [task] { run_matmul(task); };

  const cudaError_t queued = sdp::emu::submit(stream, std::move(work));
  if (queued == cudaSuccess) return CUBLAS_STATUS_SUCCESS;
  // submit printed which pointer or stream was wrong.
  if (queued == cudaErrorInvalidValue)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "an operand or the workspace is not inside live device memory (see above)");
  return refuse(CUBLAS_STATUS_EXECUTION_FAILED, call,
                std::string("queueing the work failed: ") + cudaGetErrorName(queued));
}

}  // extern "C"
