#pragma once
// Gradient reduction that overlaps backward. Each storage group's flat
// gradient buffer is reduced in buckets: as backward finishes parameters
// (LlamaModel's GradsReady), the finished tail of the buffer grows from its
// end downwards (blocks finish from last to first, and parameters are laid
// out in model order), and once a tail of at least `bucket_bytes` is final
// its owner-set all-reduce (average) starts without waiting. On CUDA that
// runs on the NCCL communicator's stream while the compute stream goes on
// with earlier layers; on MPI it is a non-blocking MPI_Iallreduce. finish()
// starts what is left and waits for everything before the optimizer reads
// the gradients. The bytes sent equal one all-reduce per group (the ring
// formula is linear in the buffer size); only the number of calls grows.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "engine/parallel/owner_groups.h"
#include "models/common/parameter_set.h"

namespace sdp {

class GradientBuckets {
 public:
  // `wire`: the dtype buckets travel in (bf16: each bucket goes through a
  // bf16 copy, category comm, allocated from `staging` while in flight).
  GradientBuckets(ParameterSet& params, OwnerGroups& groups, size_t bucket_bytes,
                  DType wire = DType::f32, Allocator* staging = nullptr);

  // Forgets the previous step's progress; from now on each parameter's
  // gradient is final at its `reports`-th report: a step of M micro-batches
  // reports each parameter M times, once per micro-batch, in whichever
  // order its schedule runs their backwards (a pipeline's two-stage
  // backward reports the input and output stages in I, the blocks in W).
  void start(int reports = 1);
  // One more contribution to these parameters' gradients is in.
  void ready(std::span<const int> param_ids);
  // Starts every bucket not yet started and waits for all of them.
  void finish();

 private:
  struct GroupState {
    comm::Communicator* comm = nullptr;  // nullptr: nothing to reduce here
    std::vector<int> params_by_offset;   // trained parameters, ascending offset
    std::vector<char> done;              // parallel to params_by_offset
    size_t next_pending = 0;             // params_by_offset[< this] are not yet final ... from the end
    int64_t launched_from = 0;           // elements [launched_from, numel) are started
  };
  void launch_ready(int g, bool force);

  ParameterSet& params_;
  OwnerGroups& groups_;
  int64_t bucket_elems_ = 0;
  std::vector<GroupState> state_;
  std::vector<int> position_;  // param id -> index in its group's params_by_offset (-1: none)
  std::vector<int> reports_;   // param id -> reports this step
  int reports_needed_ = 1;     // the report that makes a gradient final
  struct Pending {
    std::unique_ptr<comm::PendingCollective> reduction;
    OwnedTensor wire_copy;  // the bf16 copy on the wire, if any
    Tensor target;          // the gradients it returns to
  };
  DType wire_;
  Allocator* staging_;
  std::vector<Pending> pending_;
};

}  // namespace sdp
