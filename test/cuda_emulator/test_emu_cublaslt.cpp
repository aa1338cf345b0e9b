// The emulated cuBLASLt (cuda_emulator/cublaslt) against a triple-loop
// reference in double, called through the C API exactly as
// kernels/cuda/gemm.cpp calls it: every transpose combination, f32 and bf16
// operands with the output types the engine uses, ld > rows, beta 0 (over a
// D full of NaN) and beta 1 in place, odd sizes; the three linear-layer GEMMs
// as gemm.cpp derives them; stream order and the declared accesses; then each
// refusal with its status and its message.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"

namespace {

// ---- device memory and host values -------------------------------------------

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    REQUIRE(cudaMalloc(&ptr_, bytes) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

size_t type_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }
const char* type_label(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : "f32"; }
const char* op_label(cublasOperation_t op) { return op == CUBLAS_OP_T ? "T" : "N"; }

// `values` (doubles exactly representable in `type`) stored at `device`.
void upload(void* device, cudaDataType_t type, const std::vector<double>& values) {
  std::vector<unsigned char> bytes(values.size() * type_bytes(type));
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == CUDA_R_16BF) {
      const __nv_bfloat16 v = __float2bfloat16_rn(static_cast<float>(values[i]));
      std::memcpy(bytes.data() + 2 * i, &v, 2);
    } else {
      const float v = static_cast<float>(values[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
  REQUIRE(cudaMemcpy(device, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess);
}

std::vector<double> download(const void* device, cudaDataType_t type, size_t count) {
  std::vector<unsigned char> bytes(count * type_bytes(type));
  REQUIRE(cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  std::vector<double> values(count);
  for (size_t i = 0; i < count; ++i) {
    if (type == CUDA_R_16BF) {
      __nv_bfloat16 v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      values[i] = __bfloat162float(v);
    } else {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      values[i] = v;
    }
  }
  return values;
}

// Random values exactly representable in `type`: for bf16 multiples of 1/64
// in [-2, 2] (at most 8 significant bits), for f32 any float in [-1, 1].
std::vector<double> random_values(size_t count, cudaDataType_t type, std::mt19937& rng) {
  std::vector<double> v(count);
  std::uniform_int_distribution<int> steps(-128, 128);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (double& e : v) e = type == CUDA_R_16BF ? steps(rng) / 64.0 : double(real(rng));
  return v;
}

// ---- one GEMM, set up as gemm.cpp's GemmPlan does ---------------------------

// Column-major D [m, n] = alpha op(A) op(B) + beta C with C = D (as the
// engine always calls it) unless `separate_c`.
struct GemmSpec {
  cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int64_t m = 1, n = 1, k = 1, lda = 1, ldb = 1, ldc = 1;
  uint32_t align[4] = {256, 256, 256, 256};  // preference MIN_ALIGNMENT A, B, C, D
  uint64_t workspace = 0;                    // preference MAX_WORKSPACE_BYTES

  // Stored shapes: A [m, k] for op N, [k, m] for op T; B [k, n] or [n, k].
  int64_t a_rows() const { return op_a == CUBLAS_OP_N ? m : k; }
  int64_t a_cols() const { return op_a == CUBLAS_OP_N ? k : m; }
  int64_t b_rows() const { return op_b == CUBLAS_OP_N ? k : n; }
  int64_t b_cols() const { return op_b == CUBLAS_OP_N ? n : k; }
  size_t a_count() const { return size_t(lda * a_cols()); }
  size_t b_count() const { return size_t(ldb * b_cols()); }
  size_t c_count() const { return size_t(ldc * n); }
};

// The descriptors and the heuristic's first algorithm; destroyed with it.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // C and D share c
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    cublasLtMatmulPreferenceDestroy(preference);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatmulDescDestroy(desc);
  }
};

// Every call as gemm.cpp makes it; the status of the heuristic (the calls
// before it must succeed).
cublasStatus_t build_plan(cublasLtHandle_t handle, const GemmSpec& s, Plan& plan) {
  REQUIRE(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ==
          CUBLAS_STATUS_SUCCESS);
  const int32_t op_a = s.op_a, op_b = s.op_b;
  REQUIRE(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a,
                                         sizeof(op_a)) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b,
                                         sizeof(op_b)) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&plan.a, s.ab, uint64_t(s.a_rows()), uint64_t(s.a_cols()),
                                     s.lda) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&plan.b, s.ab, uint64_t(s.b_rows()), uint64_t(s.b_cols()),
                                     s.ldb) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&plan.c, s.cd, uint64_t(s.m), uint64_t(s.n), s.ldc) ==
          CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulPreferenceCreate(&plan.preference) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatmulPreferenceSetAttribute(
              plan.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s.workspace,
              sizeof(s.workspace)) == CUBLAS_STATUS_SUCCESS);
  const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    REQUIRE(cublasLtMatmulPreferenceSetAttribute(plan.preference, attrs[i], &s.align[i],
                                                 sizeof(s.align[i])) == CUBLAS_STATUS_SUCCESS);
  return cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                        plan.preference, 1, &plan.result, &plan.found);
}

// The handle every test case shares (gemm.cpp keeps one per device too).
cublasLtHandle_t shared_handle() {
  static cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS);
    return h;
  }();
  return handle;
}

// alpha op(A) op(B) + beta C in double, column-major [m, n] with ld m; C is
// not read when beta == 0.
std::vector<double> reference(const GemmSpec& s, const std::vector<double>& a,
                              const std::vector<double>& b, const std::vector<double>& c,
                              double alpha, double beta, std::vector<double>* magnitude) {
  std::vector<double> d(size_t(s.m * s.n));
  magnitude->assign(d.size(), 0.0);
  for (int64_t j = 0; j < s.n; ++j)
    for (int64_t i = 0; i < s.m; ++i) {
      double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double av =
            s.op_a == CUBLAS_OP_N ? a[size_t(p * s.lda + i)] : a[size_t(i * s.lda + p)];
        const double bv =
            s.op_b == CUBLAS_OP_N ? b[size_t(j * s.ldb + p)] : b[size_t(p * s.ldb + j)];
        sum += av * bv;
        abs_sum += std::fabs(av * bv);
      }
      double value = alpha * sum, size = std::fabs(alpha) * abs_sum;
      if (beta != 0) {
        value += beta * c[size_t(j * s.ldc + i)];
        size += std::fabs(beta * c[size_t(j * s.ldc + i)]);
      }
      d[size_t(j * s.m + i)] = value;
      (*magnitude)[size_t(j * s.m + i)] = size;
    }
  return d;
}

// f32 sums of up to 33 terms stay within 1e-5 of the sum of magnitudes; a bf16
// D adds one rounding, at most 2^-8 of the value (8 significant bits).
double tolerance(cudaDataType_t d_type, double expected, double magnitude) {
  return 1e-5 * magnitude + (d_type == CUDA_R_16BF ? std::ldexp(std::fabs(expected), -8) : 0.0) +
         1e-30;
}

// Runs one GEMM end to end: random operands (ld padding holds NaN, which no
// correct GEMM reads), D prefilled with `initial` values (NaN when beta = 0:
// C must then not be read), and compares every element of D with the
// reference. Elements between rows and ld of D must be untouched.
void check_gemm(const GemmSpec& s, float alpha, float beta, uint32_t seed) {
  std::mt19937 rng(seed);
  cublasLtHandle_t handle = shared_handle();
  Plan plan;
  REQUIRE(build_plan(handle, s, plan) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(plan.found == 1);

  const double nan = std::nan("");
  auto padded = [&](int64_t rows, int64_t cols, int64_t ld, cudaDataType_t type) {
    std::vector<double> v = random_values(size_t(ld * cols), type, rng);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = rows; i < ld; ++i) v[size_t(j * ld + i)] = nan;
    return v;
  };
  const std::vector<double> a = padded(s.a_rows(), s.a_cols(), s.lda, s.ab);
  const std::vector<double> b = padded(s.b_rows(), s.b_cols(), s.ldb, s.ab);
  std::vector<double> c = padded(s.m, s.n, s.ldc, s.cd);
  if (beta == 0)
    for (double& e : c) e = nan;

  DeviceBuffer da(s.a_count() * type_bytes(s.ab)), db(s.b_count() * type_bytes(s.ab)),
      dd(s.c_count() * type_bytes(s.cd)), workspace(s.workspace > 0 ? s.workspace : 256);
  upload(da.get(), s.ab, a);
  upload(db.get(), s.ab, b);
  upload(dd.get(), s.cd, c);

  const float alpha_h = alpha, beta_h = beta;
  REQUIRE(cublasLtMatmul(handle, plan.desc, &alpha_h, da.get(), plan.a, db.get(), plan.b, &beta_h,
                         dd.get(), plan.c, dd.get(), plan.c, &plan.result.algo,
                         s.workspace > 0 ? workspace.get() : nullptr, s.workspace,
                         nullptr) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);

  std::vector<double> magnitude;
  const std::vector<double> expected = reference(s, a, b, c, alpha, beta, &magnitude);
  const std::vector<double> got = download(dd.get(), s.cd, s.c_count());
  int64_t bad = 0;
  for (int64_t j = 0; j < s.n; ++j) {
    for (int64_t i = 0; i < s.m; ++i) {
      const double e = expected[size_t(j * s.m + i)], g = got[size_t(j * s.ldc + i)];
      if (!(std::fabs(g - e) <= tolerance(s.cd, e, magnitude[size_t(j * s.m + i)]))) {
        if (bad++ < 3) FAIL_CHECK("D(" << i << ", " << j << ") = " << g << ", expected " << e);
      }
    }
    for (int64_t i = s.m; i < s.ldc; ++i)
      if (!std::isnan(got[size_t(j * s.ldc + i)]))
        FAIL_CHECK("D's ld padding (" << i << ", " << j << ") was written");
  }
  CHECK(bad == 0);
}

// Captures what the calls inside write to stderr (the refusal lines).
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    REQUIRE(file_ != nullptr);
    saved_ = dup(fileno(stderr));
    dup2(fileno(file_), fileno(stderr));
  }
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[512];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), file_)) > 0) out.append(buf, got);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, fileno(stderr));
    close(saved_);
    saved_ = -1;
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

}  // namespace

// ---- results -------------------------------------------------------------------

TEST_CASE("cublasLt: the heuristic returns one algorithm within the preference",
          "[emulated][cublaslt]") {
  GemmSpec s;
  s.m = 7, s.n = 5, s.k = 3, s.lda = 7, s.ldb = 3, s.ldc = 7;
  s.workspace = 4096;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(plan.found == 1);
  CHECK(plan.result.state == CUBLAS_STATUS_SUCCESS);
  CHECK(plan.result.workspaceSize <= s.workspace);
  CHECK(plan.result.wavesCount > 0.0f);
}

TEST_CASE("cublasLt: f32 GEMM, every transpose combination, odd sizes, ld > rows",
          "[emulated][cublaslt]") {
  const int64_t sizes[] = {1, 7, 33};
  uint32_t seed = 1;
  for (cublasOperation_t op_a : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t op_b : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (int64_t m : sizes)
        for (int64_t n : sizes)
          for (int64_t k : sizes)
            for (int64_t pad : {0, 3}) {
              GemmSpec s;
              s.op_a = op_a, s.op_b = op_b, s.m = m, s.n = n, s.k = k;
              s.lda = s.a_rows() + pad, s.ldb = s.b_rows() + 2 * pad, s.ldc = m + pad;
              INFO(op_label(op_a) << op_label(op_b) << " m " << m << " n " << n << " k " << k
                                  << " ld padding " << pad);
              check_gemm(s, 1.0f, 0.0f, seed++);
            }
}

TEST_CASE("cublasLt: bf16 operands with bf16 and f32 outputs, every transpose combination",
          "[emulated][cublaslt]") {
  const int64_t sizes[] = {1, 7, 33};
  uint32_t seed = 100;
  for (cudaDataType_t cd : {CUDA_R_16BF, CUDA_R_32F})
    for (cublasOperation_t op_a : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (cublasOperation_t op_b : {CUBLAS_OP_N, CUBLAS_OP_T})
        for (int64_t m : sizes)
          for (int64_t n : sizes)
            for (int64_t k : sizes) {
              const int64_t pad = (m + n + k) % 2 == 0 ? 0 : 5;
              GemmSpec s;
              s.ab = CUDA_R_16BF, s.cd = cd;
              s.op_a = op_a, s.op_b = op_b, s.m = m, s.n = n, s.k = k;
              s.lda = s.a_rows() + pad, s.ldb = s.b_rows() + pad, s.ldc = m + pad;
              s.align[0] = s.align[1] = 2;  // as alignment_of gives for odd bf16 views
              INFO("bf16 -> " << type_label(cd) << " " << op_label(op_a) << op_label(op_b) << " m "
                              << m << " n " << n << " k " << k);
              check_gemm(s, 1.0f, 0.0f, seed++);
            }
}

TEST_CASE("cublasLt: beta = 1 accumulates into D in place (C == D)", "[emulated][cublaslt]") {
  uint32_t seed = 500;
  // f32 mode, and mixed precision's weight gradient (bf16 operands, f32 D).
  for (cudaDataType_t ab : {CUDA_R_32F, CUDA_R_16BF})
    for (cublasOperation_t op_b : {CUBLAS_OP_N, CUBLAS_OP_T})
      for (int64_t size : {1, 7, 33}) {
        GemmSpec s;
        s.ab = ab, s.cd = CUDA_R_32F, s.op_b = op_b;
        s.m = size, s.n = size + 2, s.k = 2 * size + 1;
        s.lda = s.a_rows() + 1, s.ldb = s.b_rows(), s.ldc = s.m + 2;
        s.workspace = 1 << 16;
        INFO(type_label(ab) << " operands, op_b " << op_label(op_b) << ", size " << size);
        check_gemm(s, 1.0f, 1.0f, seed++);
        check_gemm(s, 0.5f, -2.0f, seed++);  // general alpha and beta
      }
  // A bf16 D accumulated in place.
  GemmSpec s;
  s.ab = s.cd = CUDA_R_16BF;
  s.m = 7, s.n = 33, s.k = 7, s.lda = 7, s.ldb = 7, s.ldc = 9;
  check_gemm(s, 1.0f, 1.0f, seed++);
}

TEST_CASE("cublasLt: bf16 D is rounded to nearest, ties to even", "[emulated][cublaslt]") {
  // D = A B with A [2, 2] = [[1, 1], [1, 3]], B [2, 1] = [256, 1]: exact sums
  // 257 and 259, halfway between bf16 neighbours (spacing 2 above 256).
  // Ties to even give 256 and 260; truncation would give 256 and 258,
  // rounding half up 258 and 260.
  GemmSpec s;
  s.ab = s.cd = CUDA_R_16BF;
  s.m = 2, s.n = 1, s.k = 2, s.lda = 2, s.ldb = 2, s.ldc = 2;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
  DeviceBuffer a(8), b(4), d(4);
  upload(a.get(), CUDA_R_16BF, {1, 1, 1, 3});  // column-major
  upload(b.get(), CUDA_R_16BF, {256, 1});
  const float alpha = 1, beta = 0;
  REQUIRE(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a.get(), plan.a, b.get(), plan.b,
                         &beta, d.get(), plan.c, d.get(), plan.c, &plan.result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_SUCCESS);
  const std::vector<double> got = download(d.get(), CUDA_R_16BF, 2);
  CHECK(got[0] == 256.0);
  CHECK(got[1] == 260.0);
}

// The three products of kernels/cuda/gemm.cpp on row-major tensors, with the
// exact GemmCall arguments it passes, against the row-major definitions:
// this checks gemm.cpp's derivation as much as the emulator.
TEST_CASE("cublasLt: the linear layer's three GEMMs as gemm.cpp issues them",
          "[emulated][cublaslt]") {
  struct Mode {
    cudaDataType_t act, grad_w;  // x, w, y, dy, dx; dw
  };
  uint32_t seed = 900;
  for (Mode mode : {Mode{CUDA_R_32F, CUDA_R_32F}, Mode{CUDA_R_16BF, CUDA_R_32F}})
    for (int64_t rows : {1, 7, 33}) {
      const int64_t in = 33, out = 7;
      INFO(type_label(mode.act) << " activations, N = " << rows);
      std::mt19937 rng(seed++);
      // Row-major: x [N, in], w [out, in], dy [N, out], dw [out, in].
      const auto x = random_values(size_t(rows * in), mode.act, rng);
      const auto w = random_values(size_t(out * in), mode.act, rng);
      const auto dy = random_values(size_t(rows * out), mode.act, rng);
      const auto dw0 = random_values(size_t(out * in), mode.grad_w, rng);

      auto run = [&](cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n,
                     int64_t k, int64_t lda, int64_t ldb, int64_t ldc, cudaDataType_t cd,
                     bool accumulate, const std::vector<double>& a, const std::vector<double>& b,
                     const std::vector<double>& d0) {
        GemmSpec s;
        s.ab = mode.act, s.cd = cd, s.op_a = op_a, s.op_b = op_b;
        s.m = m, s.n = n, s.k = k, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
        s.workspace = 1 << 20;
        Plan plan;
        REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
        DeviceBuffer da(a.size() * type_bytes(s.ab)), db(b.size() * type_bytes(s.ab)),
            dd(size_t(m * n) * type_bytes(cd)), ws(s.workspace);
        upload(da.get(), s.ab, a);
        upload(db.get(), s.ab, b);
        upload(dd.get(), cd, d0);
        const float alpha = 1, beta = accumulate ? 1.0f : 0.0f;
        REQUIRE(cublasLtMatmul(shared_handle(), plan.desc, &alpha, da.get(), plan.a, db.get(),
                               plan.b, &beta, dd.get(), plan.c, dd.get(), plan.c, &plan.result.algo,
                               ws.get(), s.workspace, nullptr) == CUBLAS_STATUS_SUCCESS);
        return download(dd.get(), cd, size_t(m * n));
      };
      auto expect_close = [&](const std::vector<double>& got, const std::vector<double>& want,
                              const std::vector<double>& size, cudaDataType_t type) {
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i)
          if (!(std::fabs(got[i] - want[i]) <= tolerance(type, want[i], size[i]))) {
            FAIL_CHECK("element " << i << ": " << got[i] << ", expected " << want[i]);
            return;
          }
      };

      // forward: y [N, out] = x w^T.
      std::vector<double> y(size_t(rows * out)), y_size(y.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o)
          for (int64_t i = 0; i < in; ++i) {
            y[size_t(r * out + o)] += x[size_t(r * in + i)] * w[size_t(o * in + i)];
            y_size[size_t(r * out + o)] += std::fabs(x[size_t(r * in + i)] * w[size_t(o * in + i)]);
          }
      expect_close(run(CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, in, in, out, mode.act, false, w, x,
                       std::vector<double>(y.size(), std::nan(""))),
                   y, y_size, mode.act);

      // backward input: dx [N, in] = dy w.
      std::vector<double> dx(size_t(rows * in)), dx_size(dx.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < in; ++i)
          for (int64_t o = 0; o < out; ++o) {
            dx[size_t(r * in + i)] += dy[size_t(r * out + o)] * w[size_t(o * in + i)];
            dx_size[size_t(r * in + i)] +=
                std::fabs(dy[size_t(r * out + o)] * w[size_t(o * in + i)]);
          }
      expect_close(run(CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, in, out, in, mode.act, false, w, dy,
                       std::vector<double>(dx.size(), std::nan(""))),
                   dx, dx_size, mode.act);

      // backward weight: dw [out, in] += dy^T x.
      std::vector<double> dw = dw0, dw_size(dw.size());
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
          dw_size[size_t(o * in + i)] = std::fabs(dw0[size_t(o * in + i)]);
          for (int64_t r = 0; r < rows; ++r) {
            dw[size_t(o * in + i)] += dy[size_t(r * out + o)] * x[size_t(r * in + i)];
            dw_size[size_t(o * in + i)] +=
                std::fabs(dy[size_t(r * out + o)] * x[size_t(r * in + i)]);
          }
        }
      expect_close(
          run(CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, in, out, in, mode.grad_w, true, x, dy, dw0),
          dw, dw_size, mode.grad_w);
    }
}

// ---- stream order ------------------------------------------------------------

TEST_CASE("cublasLt: the product runs in stream order from values captured at the call",
          "[emulated][cublaslt]") {
  GemmSpec s;
  s.m = 3, s.n = 2, s.k = 2, s.lda = 3, s.ldb = 2, s.ldc = 3;
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  DeviceBuffer a(6 * 4), b(4 * 4), d(6 * 4);
  upload(a.get(), CUDA_R_32F, {1, 2, 3, 4, 5, 6});  // A [3, 2]
  upload(b.get(), CUDA_R_32F, {1, 0, 0, 1});        // B = I
  upload(d.get(), CUDA_R_32F, {-1, -1, -1, -1, -1, -1});

  // Earlier work on the stream that has not finished: the matmul must wait.
  auto gate_open = std::make_shared<std::atomic<bool>>(false);
  sdp::emu::StreamWork gate;
  gate.name = "test gate";
  gate.start = [] {};
  gate.finished = [gate_open] { return gate_open->load(); };
  REQUIRE(sdp::emu::submit(stream, std::move(gate)) == cudaSuccess);

  float alpha = 2, beta = 0;
  {
    auto plan = std::make_unique<Plan>();
    REQUIRE(build_plan(shared_handle(), s, *plan) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmul(shared_handle(), plan->desc, &alpha, a.get(), plan->a, b.get(), plan->b,
                           &beta, d.get(), plan->c, d.get(), plan->c, &plan->result.algo, nullptr,
                           0, stream) == CUBLAS_STATUS_SUCCESS);
    // Descriptors destroyed and scalars changed before the work runs.
    alpha = 100;
  }
  CHECK(cudaStreamQuery(stream) == cudaErrorNotReady);
  // D read directly (the emulator's device memory is host memory), without
  // synchronizing: still what the upload wrote.
  std::vector<double> before(6);
  const float* raw = reinterpret_cast<const float*>(d.get());
  for (int i = 0; i < 6; ++i) before[size_t(i)] = raw[i];
  CHECK(before == std::vector<double>(6, -1.0));  // not computed yet

  gate_open->store(true);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  CHECK(download(d.get(), CUDA_R_32F, 6) == std::vector<double>{2, 4, 6, 8, 10, 12});
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

TEST_CASE("cublasLt: the matmul declares its accesses, so stream races are caught",
          "[emulated][cublaslt]") {
  GemmSpec s;
  s.m = 4, s.n = 4, s.k = 4, s.lda = 4, s.ldb = 4, s.ldc = 4;
  s.workspace = 1024;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
  cudaStream_t s1 = nullptr, s2 = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t released = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&released, cudaEventDisableTiming) == cudaSuccess);
  DeviceBuffer a(64), b(64), d1(64), d2(64), ws(1024);
  upload(a.get(), CUDA_R_32F, std::vector<double>(16, 1.0));
  upload(b.get(), CUDA_R_32F, std::vector<double>(16, 1.0));
  const float alpha = 1, beta = 0;
  auto matmul = [&](void* d, cudaStream_t stream) {
    return cublasLtMatmul(shared_handle(), plan.desc, &alpha, a.get(), plan.a, b.get(), plan.b,
                          &beta, d, plan.c, d, plan.c, &plan.result.algo, ws.get(), s.workspace,
                          stream);
  };

  SECTION("two streams sharing the workspace without an event wait race") {
    REQUIRE(matmul(d1.get(), s1) == CUBLAS_STATUS_SUCCESS);
    CHECK_THROWS_AS(matmul(d2.get(), s2), sdp::emu::Fault);
  }
  SECTION("with gemm.cpp's event wait they do not") {
    REQUIRE(matmul(d1.get(), s1) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cudaEventRecord(released, s1) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(s2, released, 0) == cudaSuccess);
    CHECK(matmul(d2.get(), s2) == CUBLAS_STATUS_SUCCESS);
  }
  SECTION("reading D on another stream before the matmul is ordered races") {
    REQUIRE(matmul(d1.get(), s1) == CUBLAS_STATUS_SUCCESS);
    sdp::emu::StreamWork reader;
    reader.name = "test reader";
    reader.accesses.push_back({d1.get() + 60, 4, sdp::emu::AccessKind::read, "last element"});
    reader.start = [] {};
    CHECK_THROWS_AS(sdp::emu::submit(s2, std::move(reader)), sdp::emu::Fault);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaEventDestroy(released);
  cudaStreamDestroy(s2);
  cudaStreamDestroy(s1);
}

// ---- refusals ------------------------------------------------------------------

TEST_CASE("cublasLt: ld < rows is INVALID_VALUE at the heuristic and the matmul",
          "[emulated][cublaslt]") {
  GemmSpec good;
  good.m = 7, good.n = 3, good.k = 5, good.lda = 7, good.ldb = 5, good.ldc = 7;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), good, plan) == CUBLAS_STATUS_SUCCESS);

  SECTION("A") {
    GemmSpec bad = good;
    bad.lda = 5;  // a wrong leading dimension: A is [7, 5]
    Plan bad_plan;
    StderrCapture err;
    CHECK(build_plan(shared_handle(), bad, bad_plan) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(bad_plan.found == 0);
    // The matmul with an algo from a good plan, handed the bad layout.
    DeviceBuffer a(7 * 5 * 4), b(5 * 3 * 4), d(7 * 3 * 4);
    const float alpha = 1, beta = 0;
    CHECK(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a.get(), bad_plan.a, b.get(), plan.b,
                         &beta, d.get(), plan.c, d.get(), plan.c, &plan.result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    const std::string text = err.text();
    CHECK_THAT(text, Catch::Contains("cublasLtMatmulAlgoGetHeuristic") &&
                         Catch::Contains("Adesc is 7 x 5 (ld 5)") &&
                         Catch::Contains("ld >= rows") && Catch::Contains("cublasLtMatmul:"));
  }
  SECTION("C and D") {
    GemmSpec bad = good;
    bad.ldc = 6;
    Plan bad_plan;
    CHECK(build_plan(shared_handle(), bad, bad_plan) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SECTION("B, transposed") {
    GemmSpec bad = good;
    bad.op_b = CUBLAS_OP_T;
    bad.ldb = 2;  // B stored [3, 5]
    Plan bad_plan;
    CHECK(build_plan(shared_handle(), bad, bad_plan) == CUBLAS_STATUS_INVALID_VALUE);
  }
}

TEST_CASE("cublasLt: shape mismatches are INVALID_VALUE", "[emulated][cublaslt]") {
  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, b_wrong = nullptr, c = nullptr,
                         c_wrong = nullptr;
  REQUIRE(cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 7, 5, 7) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 5, 3, 5) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&b_wrong, CUDA_R_32F, 6, 3, 6) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 7, 3, 7) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(cublasLtMatrixLayoutCreate(&c_wrong, CUDA_R_32F, 7, 4, 7) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasLtHandle_t h = shared_handle();
  REQUIRE(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 1, &result, &found) ==
          CUBLAS_STATUS_SUCCESS);

  // k differs between op(A) [7, 5] and op(B) [6, 3].
  CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b_wrong, c, c, pref, 1, &result, &found) ==
        CUBLAS_STATUS_INVALID_VALUE);
  // C or D is not [m, n].
  CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c_wrong, c_wrong, pref, 1, &result, &found) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c_wrong, pref, 1, &result, &found) ==
        CUBLAS_STATUS_INVALID_VALUE);
  // A transposed is [5, 7]: its k no longer matches B's 5 rows.
  const int32_t t = CUBLAS_OP_T;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)) ==
          CUBLAS_STATUS_SUCCESS);
  DeviceBuffer da(7 * 5 * 4), db(6 * 3 * 4), dd(7 * 4 * 4);
  const float alpha = 1, beta = 0;
  {
    StderrCapture err;
    CHECK(cublasLtMatmul(h, desc, &alpha, da.get(), a, db.get(), b, &beta, dd.get(), c, dd.get(), c,
                         &result.algo, nullptr, 0, nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_THAT(err.text(),
               Catch::Contains("shapes do not match") && Catch::Contains("is 5 x 7, op(B)"));
  }

  cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {a, b, b_wrong, c, c_wrong}) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
}

TEST_CASE("cublasLt: what the engine does not use is NOT_SUPPORTED", "[emulated][cublaslt]") {
  cublasLtMatmulDesc_t desc = nullptr;
  SECTION("compute types other than CUBLAS_COMPUTE_32F") {
    StderrCapture err;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_16F, CUDA_R_16F) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_64F, CUDA_R_64F) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(desc == nullptr);
    CHECK_THAT(err.text(), Catch::Contains("CUBLAS_COMPUTE_32F_FAST_TF32") &&
                               Catch::Contains("supports CUBLAS_COMPUTE_32F only") &&
                               Catch::Contains("CUBLAS_STATUS_NOT_SUPPORTED"));
  }
  SECTION("a scale type other than CUDA_R_32F") {
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_16BF) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
  }
  SECTION("descriptor attributes other than TRANSA and TRANSB, and op C") {
    REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) ==
            CUBLAS_STATUS_SUCCESS);
    const uint32_t epilogue = CUBLASLT_EPILOGUE_GELU;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue)) == CUBLAS_STATUS_NOT_SUPPORTED);
    const int32_t pointer_mode = CUBLASLT_POINTER_MODE_DEVICE;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pointer_mode,
                                         sizeof(pointer_mode)) == CUBLAS_STATUS_NOT_SUPPORTED);
    const int32_t op_c = CUBLAS_OP_C;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_c, sizeof(op_c)) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    // Wrong attribute size and a value outside the enum: INVALID_VALUE.
    const int64_t wide = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    const int32_t bogus = 42;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &bogus,
                                         sizeof(bogus)) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulDescDestroy(desc);
  }
  SECTION("layout types other than CUDA_R_32F and CUDA_R_16BF") {
    cublasLtMatrixLayout_t layout = nullptr;
    CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16F, 4, 4, 4) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_8F_E4M3, 4, 4, 4) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(layout == nullptr);
  }
  SECTION("preference attributes other than workspace and alignments, odd alignments") {
    cublasLtMatmulPreference_t pref = nullptr;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    const uint32_t mode = CUBLASLT_SEARCH_BEST_FIT;
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &mode,
                                               sizeof(mode)) == CUBLAS_STATUS_NOT_SUPPORTED);
    const uint32_t three = 3;
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                               &three,
                                               sizeof(three)) == CUBLAS_STATUS_NOT_SUPPORTED);
    const uint32_t workspace32 = 1024;  // the attribute is uint64_t
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace32,
                                               sizeof(workspace32)) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulPreferenceDestroy(pref);
  }
  SECTION("type combinations outside CUBLAS_COMPUTE_32F's table") {
    // f32 A and B with bf16 C and D.
    GemmSpec s;
    s.ab = CUDA_R_32F, s.cd = CUDA_R_16BF, s.m = 4, s.n = 4, s.k = 4, s.lda = s.ldb = s.ldc = 4;
    Plan f32_to_bf16;
    CHECK(build_plan(shared_handle(), s, f32_to_bf16) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(f32_to_bf16.found == 0);
    // bf16 A with f32 B.
    s.cd = CUDA_R_32F;
    Plan plan;
    REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatrixLayout_t a_bf16 = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&a_bf16, CUDA_R_16BF, 4, 4, 4) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(shared_handle(), plan.desc, a_bf16, plan.b, plan.c, plan.c,
                                         plan.preference, 1, &result,
                                         &found) == CUBLAS_STATUS_NOT_SUPPORTED);
    cublasLtMatrixLayoutDestroy(a_bf16);
  }
  SECTION("an empty matrix") {
    GemmSpec s;
    s.m = 4, s.n = 4, s.k = 0, s.lda = s.ldb = s.ldc = 4;
    Plan plan;
    CHECK(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_NOT_SUPPORTED);
  }
}

TEST_CASE("cublasLt: pointers less aligned than the algo was chosen for are INVALID_VALUE",
          "[emulated][cublaslt]") {
  GemmSpec s;
  s.m = 4, s.n = 4, s.k = 4, s.lda = s.ldb = s.ldc = 4;
  DeviceBuffer a(256 + 64), b(64), d(64);
  upload(b.get(), CUDA_R_32F, std::vector<double>(16, 1.0));
  // A 4 bytes past a 256-byte boundary: aligned to 4 bytes only.
  char* a_ptr = a.get() + 4;
  upload(a_ptr, CUDA_R_32F, std::vector<double>(16, 2.0));
  const float alpha = 1, beta = 0;

  SECTION("the algo was chosen for 16-byte aligned A") {
    s.align[0] = 16;
    Plan plan;
    REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
    StderrCapture err;
    CHECK(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a_ptr, plan.a, b.get(), plan.b, &beta,
                         d.get(), plan.c, d.get(), plan.c, &plan.result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_THAT(err.text(), Catch::Contains("is aligned to 4 bytes") &&
                               Catch::Contains("CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 16"));
  }
  SECTION("the default preference (256 bytes) and D misaligned") {
    Plan plan;
    REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
    DeviceBuffer a256(64), d_big(256 + 64);
    upload(a256.get(), CUDA_R_32F, std::vector<double>(16, 2.0));
    CHECK(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a256.get(), plan.a, b.get(), plan.b,
                         &beta, d_big.get() + 128, plan.c, d_big.get() + 128, plan.c,
                         &plan.result.algo, nullptr, 0, nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a256.get(), plan.a, b.get(), plan.b,
                         &beta, d_big.get(), plan.c, d_big.get(), plan.c, &plan.result.algo,
                         nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS);
  }
  SECTION("an algo chosen for the alignment A really has runs") {
    s.align[0] = 4;
    Plan plan;
    REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmul(shared_handle(), plan.desc, &alpha, a_ptr, plan.a, b.get(), plan.b, &beta,
                         d.get(), plan.c, d.get(), plan.c, &plan.result.algo, nullptr, 0,
                         nullptr) == CUBLAS_STATUS_SUCCESS);
    CHECK(download(d.get(), CUDA_R_32F, 16) == std::vector<double>(16, 8.0));
  }
  SECTION("no algorithm for an alignment below the element size") {
    s.align[1] = 2;  // B is f32
    Plan plan;
    CHECK(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(plan.found == 0);
  }
}

TEST_CASE("cublasLt: other argument conflicts are refused", "[emulated][cublaslt]") {
  GemmSpec s;
  s.m = 4, s.n = 4, s.k = 4, s.lda = s.ldb = s.ldc = 4;
  s.workspace = 1024;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
  DeviceBuffer a(64), b(64), d(64), ws(1024);
  const float alpha = 1, beta = 0, one = 1;
  cublasLtHandle_t h = shared_handle();
  auto matmul = [&](const void* c, cublasLtMatrixLayout_t c_desc, const float* beta_ptr,
                    const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes) {
    return cublasLtMatmul(h, plan.desc, &alpha, a.get(), plan.a, b.get(), plan.b, beta_ptr, c,
                          c_desc, d.get(), plan.c, algo, workspace, workspace_bytes, nullptr);
  };
  // The baseline the refusals differ from by one argument.
  REQUIRE(matmul(d.get(), plan.c, &beta, &plan.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_SUCCESS);

  SECTION("a workspace smaller than the algo needs") {
    REQUIRE(plan.result.workspaceSize == 1024);
    CHECK(matmul(d.get(), plan.c, &beta, &plan.result.algo, ws.get(), 512) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(matmul(d.get(), plan.c, &beta, &plan.result.algo, nullptr, 1024) ==
          CUBLAS_STATUS_INVALID_VALUE);
  }
  SECTION("C == D with a different layout") {
    cublasLtMatrixLayout_t other = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&other, CUDA_R_32F, 4, 3, 5) == CUBLAS_STATUS_SUCCESS);
    // Shapes differ: caught as a mismatch; same shape, other ld: in-place rule.
    CHECK(matmul(d.get(), other, &one, &plan.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatrixLayoutDestroy(other);
    REQUIRE(cublasLtMatrixLayoutCreate(&other, CUDA_R_32F, 4, 4, 5) == CUBLAS_STATUS_SUCCESS);
    {
      StderrCapture err;
      CHECK(matmul(d.get(), other, &one, &plan.result.algo, ws.get(), 1024) ==
            CUBLAS_STATUS_INVALID_VALUE);
      CHECK_THAT(err.text(), Catch::Contains("in-place matmul needs identical layouts"));
    }
    cublasLtMatrixLayoutDestroy(other);
  }
  SECTION("C NULL while beta != 0") {
    CHECK(matmul(nullptr, plan.c, &one, &plan.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(matmul(nullptr, plan.c, &beta, &plan.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_SUCCESS);
  }
  SECTION("no algo, or one this emulator did not return") {
    CHECK(matmul(d.get(), plan.c, &beta, nullptr, ws.get(), 1024) == CUBLAS_STATUS_NOT_SUPPORTED);
    const cublasLtMatmulAlgo_t zeroed{};
    CHECK(matmul(d.get(), plan.c, &beta, &zeroed, ws.get(), 1024) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SECTION("an algo chosen for other data types") {
    GemmSpec bf16 = s;
    bf16.ab = CUDA_R_16BF;
    Plan other;
    REQUIRE(build_plan(h, bf16, other) == CUBLAS_STATUS_SUCCESS);
    CHECK(matmul(d.get(), plan.c, &beta, &other.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_INVALID_VALUE);
  }
  SECTION("requestedAlgoCount 0") {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(h, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                         plan.preference, 0, &result,
                                         &found) == CUBLAS_STATUS_INVALID_VALUE);
  }
  SECTION("destroyed objects") {
    cublasLtMatrixLayout_t gone = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&gone, CUDA_R_32F, 4, 4, 4) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatrixLayoutDestroy(gone) == CUBLAS_STATUS_SUCCESS);
    CHECK(matmul(d.get(), gone, &beta, &plan.result.algo, ws.get(), 1024) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasLtMatrixLayoutDestroy(gone) == CUBLAS_STATUS_INVALID_VALUE);
    cublasLtHandle_t dead = nullptr;
    REQUIRE(cublasLtCreate(&dead) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtDestroy(dead) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmul(dead, plan.desc, &alpha, a.get(), plan.a, b.get(), plan.b, &beta, d.get(),
                         plan.c, d.get(), plan.c, &plan.result.algo, ws.get(), 1024,
                         nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
  }
  SECTION("operands outside device memory") {
    // An algo for 4-byte alignment, so that only the memory check can refuse.
    GemmSpec any_alignment = s;
    for (uint32_t& align : any_alignment.align) align = 4;
    Plan p4;
    REQUIRE(build_plan(h, any_alignment, p4) == CUBLAS_STATUS_SUCCESS);
    std::vector<float> host(16, 1.0f);
    StderrCapture err;
    CHECK(cublasLtMatmul(h, p4.desc, &alpha, host.data(), p4.a, b.get(), p4.b, &beta, d.get(), p4.c,
                         d.get(), p4.c, &p4.result.algo, ws.get(), 1024,
                         nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    DeviceBuffer small(32);  // D needs 64 bytes
    CHECK(cublasLtMatmul(h, p4.desc, &alpha, a.get(), p4.a, b.get(), p4.b, &beta, small.get(), p4.c,
                         small.get(), p4.c, &p4.result.algo, ws.get(), 1024,
                         nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK_THAT(err.text(), Catch::Contains("is not device memory") &&
                               Catch::Contains("past the end of its allocation"));
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cublasLt: D sharing memory with an input is a fault, interleaved columns are not",
          "[emulated][cublaslt]") {
  // Two [4, 4] f32 matrices interleaved in one buffer with ld 8: X in rows
  // 0-3 of each 8-element column, Y in rows 4-7. They share no byte.
  GemmSpec s;
  s.m = 4, s.n = 4, s.k = 4, s.lda = 8, s.ldb = 4, s.ldc = 8;
  Plan plan;
  REQUIRE(build_plan(shared_handle(), s, plan) == CUBLAS_STATUS_SUCCESS);
  DeviceBuffer buffer(8 * 4 * 4 + 256), b(64);
  char* x = buffer.get();
  char* y = buffer.get() + 16;  // 16 bytes: aligned to 16 only
  std::vector<double> values(32);
  for (size_t i = 0; i < 32; ++i) values[i] = i % 8 < 4 ? 1.0 : -7.0;  // A = 1 in X, Y = -7
  upload(x, CUDA_R_32F, values);
  upload(b.get(), CUDA_R_32F, std::vector<double>(16, 1.0));
  const float alpha = 1, beta = 0;

  s.align[3] = s.align[2] = 16;
  Plan plan16;
  REQUIRE(build_plan(shared_handle(), s, plan16) == CUBLAS_STATUS_SUCCESS);
  SECTION("D = Y while A = X: no shared byte, computed") {
    REQUIRE(cublasLtMatmul(shared_handle(), plan16.desc, &alpha, x, plan16.a, b.get(), plan16.b,
                           &beta, y, plan16.c, y, plan16.c, &plan16.result.algo, nullptr, 0,
                           nullptr) == CUBLAS_STATUS_SUCCESS);
    const std::vector<double> got = download(x, CUDA_R_32F, 32);
    for (size_t i = 0; i < 32; ++i) CHECK(got[i] == (i % 8 < 4 ? 1.0 : 4.0));
  }
  SECTION("D = A: a fault") {
    CHECK_THROWS_AS(
        cublasLtMatmul(shared_handle(), plan.desc, &alpha, x, plan.a, b.get(), plan.b, &beta, x,
                       plan.c, x, plan.c, &plan.result.algo, nullptr, 0, nullptr),
        sdp::emu::Fault);
  }
  SECTION("D overlapping B by one element: a fault") {
    GemmSpec packed;
    packed.m = 4, packed.n = 4, packed.k = 4, packed.lda = packed.ldb = packed.ldc = 4;
    packed.align[1] = packed.align[2] = packed.align[3] = 4;
    Plan p;
    REQUIRE(build_plan(shared_handle(), packed, p) == CUBLAS_STATUS_SUCCESS);
    DeviceBuffer both(31 * 4);
    char* b_ptr = both.get();       // B: floats 0-15
    char* d_ptr = both.get() + 60;  // D: floats 15-30
    CHECK_THROWS_AS(cublasLtMatmul(shared_handle(), p.desc, &alpha, b.get(), p.a, b_ptr, p.b, &beta,
                                   d_ptr, p.c, d_ptr, p.c, &p.result.algo, nullptr, 0, nullptr),
                    sdp::emu::Fault);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
}

TEST_CASE("cublasLt: status names and strings", "[emulated][cublaslt]") {
  CHECK(std::string(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE)) ==
        "CUBLAS_STATUS_INVALID_VALUE");
  CHECK_THAT(std::string(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)),
             Catch::StartsWith("CUBLAS_STATUS_NOT_SUPPORTED"));
  CHECK_THAT(std::string(cublasGetStatusString(static_cast<cublasStatus_t>(12345))),
             Catch::Contains("unknown"));
}
