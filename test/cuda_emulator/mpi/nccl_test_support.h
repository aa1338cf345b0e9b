#pragma once
// Helpers of the emulated-NCCL tests: the MPI rank, communicators over the
// whole job, device buffers and streams that free themselves, and bf16
// conversions written independently of the library's (a reference must not
// share the code it checks).
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace nccl_test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// "ncclSuccess", or the status and the library's message, so that a failed
// check says what the library said.
inline std::string status_text(ncclResult_t r) {
  if (r == ncclSuccess) return "ncclSuccess";
  const char* last = ncclGetLastError(nullptr);
  return std::string(ncclGetErrorString(r)) + ": " + (last ? last : "");
}

#define NCCL_OK(call) REQUIRE(::nccl_test::status_text(call) == "ncclSuccess")
#define CUDA_OK(call) REQUIRE(cudaGetErrorName(call) == std::string("cudaSuccess"))

// Empty when the vectors are equal; else the first differing element and
// how many differ (printing a whole 256K-element vector on failure would
// take minutes under mpiexec).
template <typename T>
std::string differences(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + ", expected " + std::to_string(want.size());
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i])) {
      if (count++ == 0) first = i;
    }
  if (count == 0) return "";
  std::ostringstream out;
  out.precision(9);
  out << count << " of " << got.size() << " elements differ; the first, [" << first << "], is "
      << +got[first] << ", expected " << +want[first];
  return out.str();
}

#define CHECK_SAME(got, want) CHECK(::nccl_test::differences(got, want) == "")

// A communicator of every rank of the job: rank 0 makes the id, MPI carries
// it to the others, as the engine's bootstrap does.
struct Comm {
  ncclComm_t comm = nullptr;
  Comm() = default;
  explicit Comm(ncclComm_t c) : comm(c) {}
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() {
    if (comm) ncclCommDestroy(comm);
  }
  operator ncclComm_t() const { return comm; }
};

inline ncclUniqueId shared_id() {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (world_rank() == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  return id;
}

inline ncclComm_t world_comm() {
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, world_size(), shared_id(), world_rank()));
  REQUIRE(comm != nullptr);
  return comm;
}

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, count * sizeof(T)));
    ptr = static_cast<T*>(p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  void upload(const std::vector<T>& v) {
    REQUIRE(v.size() == n);
    CUDA_OK(cudaMemcpy(ptr, v.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    CUDA_OK(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// A non-blocking stream, as the engine's communicator streams are not
// ordered with the legacy default stream.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s); }
  operator cudaStream_t() const { return s; }
  void sync() const { CUDA_OK(cudaStreamSynchronize(s)); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e); }
  operator cudaEvent_t() const { return e; }
};

// bf16 as the upper half of an f32; rounding to nearest even done by
// testing the dropped half against exactly one half ulp.
inline float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t kept = u >> 16;
  const uint32_t dropped = u & 0xffffu;
  if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u))) ++kept;
  return static_cast<uint16_t>(kept);
}

// The ranks' values of the f32 tests: multiples of 1/4 below 100, so that
// any order of summing them over up to 8 ranks is exact, and so is the
// average over a power-of-two number of ranks.
inline float value(int rank, size_t i) {
  return static_cast<float>((rank + 1) * (static_cast<int>(i % 13) - 6)) * 0.25f +
         static_cast<float>(i % 5);
}

inline std::vector<float> values(int rank, size_t n, size_t offset = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(rank, offset + i);
  return v;
}

}  // namespace nccl_test
