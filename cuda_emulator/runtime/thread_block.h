#pragma once
// Runs a kernel's grid on the calling host thread, block after block, each
// block's threads as fibers (cuda_emulator/device/fiber.h) scheduled in
// turn: a thread runs until it finishes or waits at a barrier or a warp
// collective, which completes when every thread it needs has arrived. When
// no thread can run and some have not finished, the block can never finish
// on a GPU either: that is reported as a fault naming the kernel, the block,
// the threads that wait (and where) and the ones that never come.
#include "cuda_emulator/device/launch.h"

namespace sdp::emu {

void run_grid(const KernelLaunch& launch);

}  // namespace sdp::emu
