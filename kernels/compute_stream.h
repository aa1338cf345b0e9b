#pragma once
// A compute stream of one's own: on CUDA, a non-blocking stream that the
// ops of this thread are queued on while a Scope is alive (so that work on
// other streams, the NCCL communicator's, can run beside it, ordered by
// events); on cpu and meta, nothing. The trainer owns one and activates it
// for each call, so trainers that live side by side never leave each
// other's stream current.
#include "engine/core/dtype.h"

namespace sdp::ops {

class ComputeStream {
 public:
  explicit ComputeStream(Device device);
  ~ComputeStream();
  ComputeStream(const ComputeStream&) = delete;
  ComputeStream& operator=(const ComputeStream&) = delete;

  // Makes the stream current for this thread; restores the previous one.
  class Scope {
   public:
    explicit Scope(const ComputeStream& stream);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool active_ = false;
    void* previous_ = nullptr;
  };

 private:
  void* stream_ = nullptr;  // cudaStream_t on cuda
  bool owns_ = false;
};

}  // namespace sdp::ops
