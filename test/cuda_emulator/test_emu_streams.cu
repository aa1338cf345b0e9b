// The emulated runtime's memory and stream semantics, and the stream-order
// checker: work on two streams that touches the same memory without an
// event wait or a synchronization between them is reported, naming both.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cuda_emulator/runtime/stream_work.h"
#include "kernels/cuda/launch.cuh"

namespace {

using sdp::cuda::launch;

__global__ void add_one(float* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.f;
}

__global__ void copy_values(const float* in, float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i];
}

std::string fault_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const sdp::emu::Fault& e) {
    return e.what();
  }
  return "";
}

struct Streams {
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t done = nullptr;
  Streams() {
    REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  }
  ~Streams() {
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaEventDestroy(done);
  }
};

}  // namespace

TEST_CASE("emulated runtime: memory, copies and capacity", "[emulated][runtime]") {
  float* p = nullptr;
  REQUIRE(cudaMalloc(&p, 100 * sizeof(float)) == cudaSuccess);
  std::vector<float> host(100, 2.f);
  REQUIRE(cudaMemcpy(p, host.data(), 400, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(p, 0, 40, nullptr) == cudaSuccess);
  std::vector<float> back(100, -1.f);
  REQUIRE(cudaMemcpy(back.data(), p, 400, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[0] == 0.f);
  CHECK(back[9] == 0.f);
  CHECK(back[10] == 2.f);
  // The kind must match the pointers; copies stay inside their allocation.
  CHECK(cudaMemcpy(back.data(), p, 400, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(back.data(), p, 404, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaFree(p + 1) == cudaErrorInvalidValue);
  CHECK(cudaFree(p) == cudaSuccess);

  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  void* too_big = nullptr;
  CHECK(cudaMalloc(&too_big, free_bytes + 1) == cudaErrorMemoryAllocation);
  CHECK(too_big == nullptr);
  cudaGetLastError();

  int major = 0;
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess);
  CHECK(major == 9);
}

TEST_CASE("emulated runtime: work on one stream runs in order; events order two streams",
          "[emulated][runtime]") {
  Streams s;
  const int n = 1000;
  float *x = nullptr, *y = nullptr;
  REQUIRE(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&y, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(x, 0, n * sizeof(float), s.a) == cudaSuccess);
  for (int i = 0; i < 3; ++i) launch<add_one>((n + 127) / 128, 128, 0, s.a, x, n);
  REQUIRE(cudaEventRecord(s.done, s.a) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s.b, s.done, 0) == cudaSuccess);
  launch<copy_values>((n + 127) / 128, 128, 0, s.b, x, y, n);
  REQUIRE(cudaStreamSynchronize(s.b) == cudaSuccess);
  std::vector<float> back(n);
  REQUIRE(cudaMemcpy(back.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back.front() == 3.f);
  CHECK(back.back() == 3.f);
  CHECK(cudaStreamQuery(s.a) == cudaSuccess);
  CHECK(cudaEventQuery(s.done) == cudaSuccess);
  cudaFree(x);
  cudaFree(y);
}

TEST_CASE("emulated runtime: a missing event wait between streams is a reported race",
          "[emulated][runtime][race]") {
  Streams s;
  const int n = 256;
  float *x = nullptr, *y = nullptr;
  REQUIRE(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMalloc(&y, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(x, 0, n * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(y, 0, n * sizeof(float)) == cudaSuccess);

  // Read after write on another stream, no wait: reported, naming both.
  launch<add_one>(2, 128, 0, s.a, x, n);
  std::string report = fault_text([&] { launch<copy_values>(2, 128, 0, s.b, x, y, n); });
  CHECK_THAT(report, Catch::Contains("stream-order race"));
  CHECK_THAT(report, Catch::Contains("kernel copy_values"));
  CHECK_THAT(report, Catch::Contains("kernel add_one"));
  CHECK_THAT(report, Catch::Contains("(non-blocking)"));

  // Write after read on another stream: reported as well.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  launch<copy_values>(2, 128, 0, s.a, x, y, n);
  report = fault_text([&] { launch<add_one>(2, 128, 0, s.b, x, n); });
  CHECK_THAT(report, Catch::Contains("argument 0, write"));

  // Reads on two streams do not conflict; a host synchronization orders.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  float* z = nullptr;
  REQUIRE(cudaMalloc(&z, n * sizeof(float)) == cudaSuccess);
  launch<copy_values>(2, 128, 0, s.a, x, y, n);
  launch<copy_values>(2, 128, 0, s.b, x, z, n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(s.a) == cudaSuccess);
  launch<add_one>(2, 128, 0, s.b, y, n);  // after the host waited for stream a
  REQUIRE(cudaGetLastError() == cudaSuccess);

  // A copy on the legacy stream is ordered with blocking streams only.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  launch<add_one>(2, 128, 0, blocking, z, n);
  std::vector<float> back(n);
  REQUIRE(cudaMemcpyAsync(z, back.data(), n * sizeof(float), cudaMemcpyHostToDevice, nullptr) ==
          cudaSuccess);
  launch<add_one>(2, 128, 0, s.a, y, n);
  report = fault_text([&] {
    cudaMemcpyAsync(y, back.data(), n * sizeof(float), cudaMemcpyHostToDevice, nullptr);
  });
  CHECK_THAT(report, Catch::Contains("cudaMemcpyAsync (dst, write) on the legacy default stream"));
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaStreamDestroy(blocking);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
}

TEST_CASE("emulated runtime: library work in flight holds back what follows it",
          "[emulated][runtime]") {
  Streams s;
  float* x = nullptr;
  REQUIRE(cudaMalloc(&x, 128 * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemset(x, 0, 128 * sizeof(float)) == cudaSuccess);
  // Work that stays in flight until released, like a collective waiting for
  // a peer: what follows on its stream, and on a stream waiting for it,
  // does not start, and queries say not ready.
  bool released = false, started = false;
  sdp::emu::StreamWork work;
  work.name = "test collective";
  work.accesses.push_back({x, 128 * sizeof(float), sdp::emu::AccessKind::write, "buffer"});
  work.start = [&] { started = true; };
  work.finished = [&] { return released; };
  REQUIRE(sdp::emu::submit(s.a, work) == cudaSuccess);
  CHECK(started);
  launch<add_one>(1, 128, 0, s.a, x, 128);
  REQUIRE(cudaEventRecord(s.done, s.a) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s.b, s.done, 0) == cudaSuccess);
  launch<add_one>(1, 128, 0, s.b, x, 128);
  CHECK(cudaStreamQuery(s.a) == cudaErrorNotReady);
  CHECK(cudaEventQuery(s.done) == cudaErrorNotReady);
  CHECK(cudaStreamQuery(s.b) == cudaErrorNotReady);
  released = true;
  CHECK(cudaStreamQuery(s.b) == cudaSuccess);
  std::vector<float> back(128);
  REQUIRE(cudaMemcpy(back.data(), x, 128 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back[5] == 2.f);
  cudaFree(x);
}
