#include "engine/core/device_stream.h"

namespace sdp {

namespace {
thread_local void* current = nullptr;
}

void* current_compute_stream() { return current; }
void set_current_compute_stream(void* stream) { current = stream; }

}  // namespace sdp
