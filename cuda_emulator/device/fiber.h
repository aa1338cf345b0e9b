#pragma once
// Fibers: the threads of one emulated thread block, each with its own stack,
// switched cooperatively on one host thread. A switch saves only what the
// calling convention says a callee keeps (x86-64: rbx, rbp, r12-r15, the
// stack pointer, MXCSR and the x87 control word), so it costs a few
// nanoseconds; other architectures use ucontext. Under AddressSanitizer every
// switch is announced, so ASan tracks which stack is live.
#include <cstddef>
#include <memory>

namespace sdp::emu {

// A stack for a fiber: mapped lazily by the kernel (only touched pages cost
// memory), with an inaccessible guard page below it so an overflow faults.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* bottom() const { return usable_; }
  size_t size() const { return usable_bytes_; }

 private:
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  void* usable_ = nullptr;
  size_t usable_bytes_ = 0;
};

// A saved execution context. The scheduler's own context is one too.
struct FiberContext {
  void* stack_pointer = nullptr;  // x86-64 switch
  void* ucontext = nullptr;       // elsewhere (a ucontext_t it owns)
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  FiberContext() = default;
  ~FiberContext();
  FiberContext(const FiberContext&) = delete;
  FiberContext& operator=(const FiberContext&) = delete;
};

using FiberEntry = void (*)(void* argument);

// Prepares `context` to run entry(argument) on `stack` at its first switch.
// The entry must never return: it switches away for the last time instead.
void make_fiber(FiberContext& context, FiberStack& stack, FiberEntry entry, void* argument);

// Saves the running context in `from` and resumes `to`.
void switch_fiber(FiberContext& from, FiberContext& to);

// The first thing a fiber's entry calls: completes the switch into it (under
// ASan) and records the stack of `host`, the context it came from.
void fiber_entered(FiberContext& host);

}  // namespace sdp::emu
