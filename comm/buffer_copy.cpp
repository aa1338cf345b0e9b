#include "comm/buffer_copy.h"

#include <cstring>

#include "engine/core/error.h"
#if SDP_HAVE_NCCL
#include "comm/cuda/device_copy.h"
#endif

namespace sdp::comm {

void copy_bytes(void* dst, const void* src, size_t bytes, Device device) {
  if (bytes == 0 || dst == src) return;
  switch (device) {
    case Device::cpu: std::memmove(dst, src, bytes); return;
    case Device::meta: return;
    case Device::cuda:
#if SDP_HAVE_NCCL
      copy_device_bytes(dst, src, bytes);
      return;
#else
      fail("comm: this build has no CUDA communication support, so it cannot copy a cuda "
           "buffer (rebuild where the CUDA toolkit and NCCL are found)");
#endif
  }
}

}  // namespace sdp::comm
