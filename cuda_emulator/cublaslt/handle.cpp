// The emulated cuBLASLt's handle, the registries of live objects, status
// names (cuBLASLt's and the two cuBLAS ones cuda_check.h uses), the shared
// refusal report and the algorithm encoding.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "cuda_emulator/cublaslt/cublaslt_emu.h"

namespace sdp::emu::cublaslt {

// Never destroyed: gemm.cpp keeps its handle and plans for the life of the
// process, and a static destructor may still run after ours.
Registry<cublasLtContext>& handles() {
  static auto* registry = new Registry<cublasLtContext>();
  return *registry;
}
Registry<MatmulDesc>& matmul_descs() {
  static auto* registry = new Registry<MatmulDesc>();
  return *registry;
}
Registry<Layout>& layouts() {
  static auto* registry = new Registry<Layout>();
  return *registry;
}
Registry<Preference>& preferences() {
  static auto* registry = new Registry<Preference>();
  return *registry;
}

cublasStatus_t refuse(cublasStatus_t status, const char* call, const std::string& what) {
  std::fprintf(stderr, "sdp cublasLt emulator: %s: %s (%s)\n", call, what.c_str(),
               cublasGetStatusName(status));
  return status;
}

std::string data_type_name(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
    case CUDA_C_32F: return "CUDA_C_32F";
    default: return "cudaDataType " + std::to_string(static_cast<int>(type));
  }
}

std::string compute_type_name(cublasComputeType_t type) {
  switch (type) {
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_16F_PEDANTIC: return "CUBLAS_COMPUTE_16F_PEDANTIC";
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    case CUBLAS_COMPUTE_64F_PEDANTIC: return "CUBLAS_COMPUTE_64F_PEDANTIC";
    case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
    case CUBLAS_COMPUTE_32I_PEDANTIC: return "CUBLAS_COMPUTE_32I_PEDANTIC";
    default: return "cublasComputeType " + std::to_string(static_cast<int>(type));
  }
}

std::string operation_name(cublasOperation_t op) {
  switch (op) {
    case CUBLAS_OP_N: return "CUBLAS_OP_N";
    case CUBLAS_OP_T: return "CUBLAS_OP_T";
    case CUBLAS_OP_C: return "CUBLAS_OP_C";
    case CUBLAS_OP_CONJG: return "CUBLAS_OP_CONJG";
    default: return "cublasOperation " + std::to_string(static_cast<int>(op));
  }
}

cublasStatus_t check_handle(const char* call, cublasLtHandle_t handle) {
  if (handle == nullptr) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, call, "the handle is NULL");
  if (!handles().contains(handle))
    return refuse(CUBLAS_STATUS_NOT_INITIALIZED, call,
                  "the handle was not created by cublasLtCreate or was already destroyed");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_desc(const char* call, cublasLtMatmulDesc_t desc) {
  if (desc == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, "the matmul descriptor is NULL");
  if (!matmul_descs().contains(state_of(desc)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "the matmul descriptor was not created by cublasLtMatmulDescCreate or was "
                  "already destroyed");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_layout(const char* call, const char* role, cublasLtMatrixLayout_t layout) {
  if (layout == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, std::string(role) + " is NULL");
  if (!layouts().contains(state_of(layout)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  std::string(role) +
                      " was not created by cublasLtMatrixLayoutCreate or was already destroyed");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t check_preference(const char* call, cublasLtMatmulPreference_t preference) {
  if (preference == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "the preference is NULL (the emulator needs one from "
                  "cublasLtMatmulPreferenceCreate)");
  if (!preferences().contains(state_of(preference)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  "the preference was not created by cublasLtMatmulPreferenceCreate or was "
                  "already destroyed");
  return CUBLAS_STATUS_SUCCESS;
}

namespace {
// "SDPEMUGM": marks an algo this emulator's heuristic filled in, so that a
// zeroed or foreign cublasLtMatmulAlgo_t is refused rather than trusted.
constexpr uint64_t kAlgoMagic = 0x53445045'4d55474dULL;
}  // namespace

// data[0] magic, data[1] the four data types (16 bits each), data[2] and
// data[3] the alignments of A, B and C, D (32 bits each), data[4] workspace.
void encode_algo(const AlgoRecord& record, cublasLtMatmulAlgo_t* algo) {
  std::memset(algo, 0, sizeof(*algo));
  auto type_bits = [](cudaDataType_t t) { return static_cast<uint64_t>(t) & 0xffffu; };
  algo->data[0] = kAlgoMagic;
  algo->data[1] = type_bits(record.a_type) | type_bits(record.b_type) << 16 |
                  type_bits(record.c_type) << 32 | type_bits(record.d_type) << 48;
  algo->data[2] = uint64_t{record.alignment[0]} | uint64_t{record.alignment[1]} << 32;
  algo->data[3] = uint64_t{record.alignment[2]} | uint64_t{record.alignment[3]} << 32;
  algo->data[4] = record.workspace_bytes;
}

bool decode_algo(const cublasLtMatmulAlgo_t& algo, AlgoRecord* record) {
  if (algo.data[0] != kAlgoMagic) return false;
  for (int i = 5; i < 8; ++i)
    if (algo.data[i] != 0) return false;
  auto type_at = [&algo](int shift) {
    return static_cast<cudaDataType_t>((algo.data[1] >> shift) & 0xffffu);
  };
  record->a_type = type_at(0);
  record->b_type = type_at(16);
  record->c_type = type_at(32);
  record->d_type = type_at(48);
  record->alignment[0] = static_cast<uint32_t>(algo.data[2]);
  record->alignment[1] = static_cast<uint32_t>(algo.data[2] >> 32);
  record->alignment[2] = static_cast<uint32_t>(algo.data[3]);
  record->alignment[3] = static_cast<uint32_t>(algo.data[3] >> 32);
  record->workspace_bytes = algo.data[4];
  return true;
}

}  // namespace sdp::emu::cublaslt

using sdp::emu::cublaslt::check_handle;
using sdp::emu::cublaslt::handles;
using sdp::emu::cublaslt::refuse;

namespace {

// The enumerator's own name, or NULL outside the enum.
const char* status_name_or_null(cublasStatus_t status) {
  switch (status) {
#define SDP_CUBLAS_STATUS_NAME(name) \
  case name: return #name;
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_SUCCESS)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_NOT_INITIALIZED)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_ALLOC_FAILED)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_INVALID_VALUE)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_ARCH_MISMATCH)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_MAPPING_ERROR)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_EXECUTION_FAILED)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_INTERNAL_ERROR)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_NOT_SUPPORTED)
    SDP_CUBLAS_STATUS_NAME(CUBLAS_STATUS_LICENSE_ERROR)
#undef SDP_CUBLAS_STATUS_NAME
  }
  return nullptr;
}

// The name and what it means, so that CUBLAS_CHECK's message is greppable
// and readable; the emulator's stderr line says which argument was wrong.
const char* status_string(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS: the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED: the library or handle was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED: a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE: an invalid value or a conflicting combination of "
             "arguments was passed";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH: the device lacks a required architectural feature";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR: an access to GPU memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED: the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR: an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED: the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR: the requested functionality needs a license";
  }
  return "CUBLAS_STATUS_UNKNOWN: unknown cuBLAS status";
}

}  // namespace

extern "C" {

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  const char* name = status_name_or_null(status);
  return name != nullptr ? name : "CUBLAS_STATUS_UNKNOWN";
}

const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  return status_string(status);
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  return cublasGetStatusName(status);
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  return status_string(status);
}

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "the handle pointer is NULL");
  auto* created = new (std::nothrow) cublasLtContext();
  if (created == nullptr)
    return refuse(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtCreate", "out of host memory");
  handles().add(created);
  *lightHandle = created;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (const cublasStatus_t status = check_handle("cublasLtDestroy", lightHandle);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  // Work already queued keeps running: it holds copies, never the handle.
  handles().remove(lightHandle);
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
