// make_world("nccl") without MPI: a world of one rank on the current GPU.
// check.sh compiles this against the build's libsdp_comm.a / libsdp_core.a
// and runs it on the GPU machine (no MPI there): every collective on a
// device buffer must leave a one-rank world's data as it was, a host buffer
// goes through the local communicator, a split gives a group of one, the
// in-place forms of all_gather and reduce_scatter work, an asynchronous
// all-gather reads what the compute stream wrote before it was started and
// its result is there for the compute stream after wait(), and every call is
// counted. Without a GPU it must fail with its message (exit
// 3 for "no GPU", so check.sh can tell that from a wrong result).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/core/device_stream.h"
#include "engine/core/error.h"

namespace {

using sdp::DType;
using sdp::Device;
using sdp::Tensor;
using namespace sdp::comm;

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

void cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) sdp::fail(call, ": ", cudaGetErrorString(status));
}

// [n] floats on the device, freed on scope exit.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) : count(n) {
    cuda(cudaMalloc(&ptr, n * sizeof(float)), "cudaMalloc");
  }
  ~DeviceFloats() { cudaFree(ptr); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  void upload(const std::vector<float>& v) {
    cuda(cudaMemcpy(ptr, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<float> download() const {
    std::vector<float> v(count);
    cuda(cudaMemcpy(v.data(), ptr, count * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return v;
  }
  Tensor tensor() { return Tensor(ptr, {static_cast<int64_t>(count)}, DType::f32, Device::cuda); }
  void* ptr = nullptr;
  size_t count;
};

int run() {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 1e-3f, 7.0f, -0.5f, 42.0f, 0.0f};
  std::unique_ptr<Communicator> world = make_world("nccl");
  expect(world->backend() == "nccl", "backend is nccl");
  expect(world->size() == 1 && world->rank() == 0, "a world of one rank, rank 0");

  DeviceFloats buffer(values.size());
  buffer.upload(values);
  Tensor t = buffer.tensor();
  world->all_reduce(t, ReduceOp::sum);
  expect(buffer.download() == values, "all_reduce(sum) of one rank leaves the buffer as it was");
  world->all_reduce(t, ReduceOp::average);
  expect(buffer.download() == values, "all_reduce(average) of one rank leaves it as it was");
  world->broadcast(t, 0);
  expect(buffer.download() == values, "broadcast from rank 0 leaves it as it was");

  DeviceFloats gathered(values.size());
  gathered.upload(std::vector<float>(values.size(), -1.0f));
  Tensor g = gathered.tensor();
  world->all_gather(t, g);
  expect(gathered.download() == values, "all_gather copies the one rank's chunk");
  DeviceFloats scattered(values.size());
  scattered.upload(std::vector<float>(values.size(), -1.0f));
  Tensor s = scattered.tensor();
  world->reduce_scatter(t, s, ReduceOp::sum);
  expect(scattered.download() == values, "reduce_scatter copies the one rank's chunk");

  // In place: a one-rank world's chunk is the whole buffer.
  world->all_gather(t, t);
  expect(buffer.download() == values, "all_gather in place leaves the buffer as it was");
  world->reduce_scatter(t, t, ReduceOp::average);
  expect(buffer.download() == values, "reduce_scatter in place leaves the buffer as it was");

  {
    // The prefetch of a sharded model: the compute stream (a non-blocking
    // one, as the trainer's) writes the input, all_gather_async is started
    // at once and must read the new values (the communicator's stream waits
    // for the compute stream); after wait() the compute stream reads the
    // output. 64 MiB, so that an unordered read would see the old values.
    const size_t n = size_t{16} << 20;
    std::vector<float> fresh(n), stale(n, -3.0f);
    for (size_t i = 0; i < n; ++i) fresh[i] = static_cast<float>(i % 1000) * 0.25f;
    DeviceFloats source(n), in(n), out(n);
    source.upload(fresh);
    in.upload(stale);
    out.upload(std::vector<float>(n, -1.0f));
    cudaStream_t compute = nullptr;
    cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    void* previous = sdp::current_compute_stream();
    sdp::set_current_compute_stream(compute);
    // Device to device: queued, not finished, when all_gather_async starts.
    cuda(cudaMemcpyAsync(in.ptr, source.ptr, n * sizeof(float), cudaMemcpyDeviceToDevice,
                         compute),
         "cudaMemcpyAsync (write the input on the compute stream)");
    Tensor input = in.tensor(), output = out.tensor();
    std::unique_ptr<PendingCollective> pending = world->all_gather_async(input, output);
    pending->wait();
    std::vector<float> got(n, 0.0f);
    cuda(cudaMemcpyAsync(got.data(), out.ptr, n * sizeof(float), cudaMemcpyDeviceToHost, compute),
         "cudaMemcpyAsync (read the output on the compute stream)");
    cuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
    sdp::set_current_compute_stream(previous);
    cuda(cudaStreamDestroy(compute), "cudaStreamDestroy");
    expect(got == fresh, "all_gather_async reads what the compute stream wrote before it, and "
                         "the compute stream reads its result after wait()");
  }

  std::vector<float> host = values;
  Tensor h(host.data(), {static_cast<int64_t>(host.size())}, DType::f32, Device::cpu);
  world->all_reduce(h, ReduceOp::sum);
  expect(host == values, "a host buffer goes through the local communicator, unchanged");

  std::unique_ptr<Communicator> group = world->split(0, 0);
  expect(group && group->size() == 1 && group->backend() == "nccl", "split(0, 0): a group of one");
  if (group) {
    group->all_reduce(t, ReduceOp::sum);
    expect(buffer.download() == values, "the group's all_reduce leaves the buffer as it was");
  }
  expect(world->split(-1, 0) == nullptr, "split(-1, 0): no group");

  const auto calls = world->stats().total().calls;
  expect(calls >= 7, "the calls were counted (" + std::to_string(calls) + ")");
  cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  try {
    const int rc = run();
    std::printf("nccl smoke: %s\n", rc == 0 ? "passed" : "FAILED");
    return rc;
  } catch (const std::exception& e) {
    const bool no_gpu = std::strstr(e.what(), "none is visible") != nullptr;
    std::printf("nccl smoke: %s: %s\n", no_gpu ? "no GPU" : "error", e.what());
    return no_gpu ? 3 : 2;
  }
}
