#pragma once
// Internals of the emulated cuBLASLt: the state behind cuBLASLt's handle and
// descriptor pointers, the registry that tells a live object from a stale or
// foreign pointer, the algorithm encoding, and the one way a call reports a
// refusal.
//
// Only what kernels/cuda/gemm.cpp calls is emulated: CUBLAS_COMPUTE_32F with
// CUDA_R_32F scale and host pointer mode, TRANSA/TRANSB in {N, T},
// column-major layouts of CUDA_R_32F or CUDA_R_16BF, and the preference
// attributes MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_{A,B,C,D}_BYTES. Anything
// else is refused with the status cuBLASLt documents (NOT_SUPPORTED for what
// the emulator does not implement, INVALID_VALUE for what the real library
// rejects as wrong) and one line on stderr.
#include "cuda_emulator/runtime/live_objects.h"
#include <cublasLt.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

// cublasLtHandle_t points to this incomplete struct of cublasLt.h. The
// emulated library keeps nothing per handle: work goes to the stream each
// cublasLtMatmul names.
struct cublasLtContext {
  int unused = 0;
};

namespace sdp::emu::cublaslt {

// cublasLtMatmulDescCreate: what the operation does besides its operands.
struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};

// cublasLtMatrixLayoutCreate: a column-major matrix of `rows` x `cols`
// elements, column j starting `ld` elements after column j - 1.
struct Layout {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// cublasLtMatmulPreferenceCreate; the defaults are cuBLASLt's documented ones.
struct Preference {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D in bytes
};

// The opaque pointer types of cublasLt.h point to NVIDIA's fixed-size
// structs; the emulator hands out pointers to its own state instead, cast to
// and from the opaque type (a round trip the caller never dereferences).
inline MatmulDesc* state_of(cublasLtMatmulDesc_t p) { return reinterpret_cast<MatmulDesc*>(p); }
inline Layout* state_of(cublasLtMatrixLayout_t p) { return reinterpret_cast<Layout*>(p); }
inline Preference* state_of(cublasLtMatmulPreference_t p) {
  return reinterpret_cast<Preference*>(p);
}

// Live handles and descriptors (cuda_emulator/runtime/live_objects.h).
template <typename T>
using Registry = LiveObjects<T>;

Registry<cublasLtContext>& handles();
Registry<MatmulDesc>& matmul_descs();
Registry<Layout>& layouts();
Registry<Preference>& preferences();

// Writes "sdp cublasLt emulator: <call>: <what> (<status name>)" to stderr as
// one line and returns `status`, for `return refuse(...)` at the refusal.
cublasStatus_t refuse(cublasStatus_t status, const char* call, const std::string& what);

// Names for messages: "CUDA_R_16BF", "CUBLAS_COMPUTE_32F_FAST_TF32", "CUBLAS_OP_T",
// or the number when the value is outside what the emulator names.
std::string data_type_name(cudaDataType_t type);
std::string compute_type_name(cublasComputeType_t type);
std::string operation_name(cublasOperation_t op);

// The two element types the emulator supports.
inline bool supported_type(cudaDataType_t type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF;
}
inline uint64_t element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

// Live-object checks naming the argument (`role`, e.g. "Adesc") when it is
// NULL, destroyed or foreign. Handles: NOT_INITIALIZED, as cuBLASLt documents.
cublasStatus_t check_handle(const char* call, cublasLtHandle_t handle);
cublasStatus_t check_desc(const char* call, cublasLtMatmulDesc_t desc);
cublasStatus_t check_layout(const char* call, const char* role, cublasLtMatrixLayout_t layout);
cublasStatus_t check_preference(const char* call, cublasLtMatmulPreference_t preference);

// What cublasLtMatmulAlgoGetHeuristic chose an algorithm for, stored in the
// algo's data array so that cublasLtMatmul can hold a call to it: the real
// heuristic only offers kernels that work with the pointer alignments and
// workspace the preference promised, and such a kernel faults or computes
// garbage when handed less.
struct AlgoRecord {
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F, d_type = CUDA_R_32F;
  uint32_t alignment[4] = {256, 256, 256, 256};  // bytes, A B C D
  uint64_t workspace_bytes = 0;                  // what the algorithm needs
};

void encode_algo(const AlgoRecord& record, cublasLtMatmulAlgo_t* algo);
// False when the algo's data was not written by encode_algo (never returned
// by this emulator's heuristic, or overwritten).
bool decode_algo(const cublasLtMatmulAlgo_t& algo, AlgoRecord* record);

}  // namespace sdp::emu::cublaslt
