// The emulated cuBLASLt's descriptors: matmul descriptor, matrix layout and
// heuristic preference. Creating and setting them validates what can be
// judged alone (a data type, an attribute and its size); what depends on the
// whole product (shapes, leading dimensions, type combinations) is judged by
// cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul (matmul.cpp).
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "cuda_emulator/cublaslt/cublaslt_emu.h"

using namespace sdp::emu::cublaslt;

namespace {

// A set call's buffer: present and exactly the size of the attribute's type,
// as cuBLASLt requires (INVALID_VALUE otherwise).
cublasStatus_t check_buffer(const char* call, const std::string& attr, const void* buf, size_t size,
                            size_t expected, const char* type) {
  if (buf == nullptr) return refuse(CUBLAS_STATUS_INVALID_VALUE, call, attr + ": buf is NULL");
  if (size != expected)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  attr + ": sizeInBytes is " + std::to_string(size) + ", the attribute is " + type +
                      " (" + std::to_string(expected) + " bytes)");
  return CUBLAS_STATUS_SUCCESS;
}

std::string desc_attribute_name(cublasLtMatmulDescAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return "CUBLASLT_MATMUL_DESC_COMPUTE_TYPE";
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return "CUBLASLT_MATMUL_DESC_SCALE_TYPE";
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return "CUBLASLT_MATMUL_DESC_POINTER_MODE";
    case CUBLASLT_MATMUL_DESC_TRANSA: return "CUBLASLT_MATMUL_DESC_TRANSA";
    case CUBLASLT_MATMUL_DESC_TRANSB: return "CUBLASLT_MATMUL_DESC_TRANSB";
    case CUBLASLT_MATMUL_DESC_TRANSC: return "CUBLASLT_MATMUL_DESC_TRANSC";
    case CUBLASLT_MATMUL_DESC_FILL_MODE: return "CUBLASLT_MATMUL_DESC_FILL_MODE";
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return "CUBLASLT_MATMUL_DESC_EPILOGUE";
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return "CUBLASLT_MATMUL_DESC_BIAS_POINTER";
    default: return "matmul descriptor attribute " + std::to_string(static_cast<int>(attr));
  }
}

std::string preference_attribute_name(cublasLtMatmulPreferenceAttributes_t attr) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return "CUBLASLT_MATMUL_PREF_SEARCH_MODE";
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES";
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      return "CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK";
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES";
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES";
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES";
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES";
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return "CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT";
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return "CUBLASLT_MATMUL_PREF_IMPL_MASK";
    default: return "preference attribute " + std::to_string(static_cast<int>(attr));
  }
}

}  // namespace

extern "C" {

// ---- matmul descriptor ----

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  const char* call = "cublasLtMatmulDescCreate";
  if (matmulDesc == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, "the descriptor pointer is NULL");
  // f32 accumulation only: TF32/BF16 "fast" modes would change results, and
  // the engine's f32 mode exists for exact comparisons with the CPU.
  if (computeType != CUBLAS_COMPUTE_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  "compute type " + compute_type_name(computeType) +
                      " (the emulator supports CUBLAS_COMPUTE_32F only)");
  if (scaleType != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  "scale type " + data_type_name(scaleType) +
                      " (the emulator supports CUDA_R_32F with CUBLAS_COMPUTE_32F only)");
  auto* desc = new (std::nothrow) MatmulDesc();
  if (desc == nullptr) return refuse(CUBLAS_STATUS_ALLOC_FAILED, call, "out of host memory");
  desc->compute = computeType;
  desc->scale = scaleType;
  matmul_descs().add(desc);
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  if (matmulDesc == nullptr) return CUBLAS_STATUS_SUCCESS;  // like free(NULL)
  MatmulDesc* desc = state_of(matmulDesc);
  if (!matmul_descs().remove(desc))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy",
                  "the descriptor was not created by cublasLtMatmulDescCreate or was already "
                  "destroyed");
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  const char* call = "cublasLtMatmulDescSetAttribute";
  if (const cublasStatus_t status = check_desc(call, matmulDesc); status != CUBLAS_STATUS_SUCCESS)
    return status;
  const std::string name = desc_attribute_name(attr);
  if (attr != CUBLASLT_MATMUL_DESC_TRANSA && attr != CUBLASLT_MATMUL_DESC_TRANSB)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  name +
                      " (the emulator supports CUBLASLT_MATMUL_DESC_TRANSA and "
                      "CUBLASLT_MATMUL_DESC_TRANSB only)");
  if (const cublasStatus_t status =
          check_buffer(call, name, buf, sizeInBytes, sizeof(int32_t), "int32_t");
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  int32_t value = 0;
  std::memcpy(&value, buf, sizeof(value));
  const auto op = static_cast<cublasOperation_t>(value);
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C && op != CUBLAS_OP_CONJG)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call,
                  name + " = " + std::to_string(value) + " is not a cublasOperation_t");
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  name + " = " + operation_name(op) +
                      " (the emulator supports CUBLAS_OP_N and CUBLAS_OP_T only)");
  MatmulDesc* desc = state_of(matmulDesc);
  (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) = op;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- matrix layout ----

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  const char* call = "cublasLtMatrixLayoutCreate";
  if (matLayout == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, "the layout pointer is NULL");
  if (!supported_type(type))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                  "data type " + data_type_name(type) +
                      " (the emulator supports CUDA_R_32F and CUDA_R_16BF only)");
  // Rows, columns and ld are judged against each other and the product by
  // the heuristic and the matmul, where cuBLASLt itself judges them.
  auto* layout = new (std::nothrow) Layout();
  if (layout == nullptr) return refuse(CUBLAS_STATUS_ALLOC_FAILED, call, "out of host memory");
  layout->type = type;
  layout->rows = rows;
  layout->cols = cols;
  layout->ld = ld;
  layouts().add(layout);
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (matLayout == nullptr) return CUBLAS_STATUS_SUCCESS;  // like free(NULL)
  Layout* layout = state_of(matLayout);
  if (!layouts().remove(layout))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy",
                  "the layout was not created by cublasLtMatrixLayoutCreate or was already "
                  "destroyed");
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

// ---- heuristic preference ----

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  const char* call = "cublasLtMatmulPreferenceCreate";
  if (pref == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, call, "the preference pointer is NULL");
  auto* preference = new (std::nothrow) Preference();
  if (preference == nullptr) return refuse(CUBLAS_STATUS_ALLOC_FAILED, call, "out of host memory");
  preferences().add(preference);
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (pref == nullptr) return CUBLAS_STATUS_SUCCESS;  // like free(NULL)
  Preference* preference = state_of(pref);
  if (!preferences().remove(preference))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy",
                  "the preference was not created by cublasLtMatmulPreferenceCreate or was "
                  "already destroyed");
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  const char* call = "cublasLtMatmulPreferenceSetAttribute";
  if (const cublasStatus_t status = check_preference(call, pref); status != CUBLAS_STATUS_SUCCESS)
    return status;
  Preference* preference = state_of(pref);
  const std::string name = preference_attribute_name(attr);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: {
      if (const cublasStatus_t status =
              check_buffer(call, name, buf, sizeInBytes, sizeof(uint64_t), "uint64_t");
          status != CUBLAS_STATUS_SUCCESS)
        return status;
      std::memcpy(&preference->max_workspace_bytes, buf, sizeof(uint64_t));
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
      if (const cublasStatus_t status =
              check_buffer(call, name, buf, sizeInBytes, sizeof(uint32_t), "uint32_t");
          status != CUBLAS_STATUS_SUCCESS)
        return status;
      uint32_t value = 0;
      std::memcpy(&value, buf, sizeof(value));
      // The engine passes the largest power of two (up to cuBLASLt's default
      // 256) dividing the address; other values are not emulated.
      if (value == 0 || value > 256 || (value & (value - 1)) != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                      name + " = " + std::to_string(value) +
                          " (the emulator supports powers of two from 1 to 256)");
      const int index = static_cast<int>(attr) - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
      preference->min_alignment[index] = value;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, call,
                    name +
                        " (the emulator supports CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES and "
                        "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES only)");
  }
}

}  // extern "C"
