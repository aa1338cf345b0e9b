#include "cuda_emulator/device/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "cuda_emulator/runtime/address_sanitizer.h"

namespace sdp::emu {
namespace {
// A reused stack still carries the poisoned redzones of the frames its last
// fiber left behind (a finished fiber never unwinds): clear them.
void forget_old_frames(FiberStack& stack) {
#ifdef SDP_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack.bottom(), stack.size());
#else
  (void)stack;
#endif
}
}  // namespace
}  // namespace sdp::emu

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace sdp::emu {

namespace {

size_t page_bytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "sdp emulated CUDA device: %s\n", what);
  std::abort();
}

}  // namespace

FiberStack::FiberStack(size_t bytes) {
  const size_t page = page_bytes();
  usable_bytes_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = usable_bytes_ + page;  // the guard page below the stack
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping_ == MAP_FAILED) throw std::bad_alloc();
  if (mprotect(mapping_, page, PROT_NONE) != 0) die("cannot protect a fiber stack's guard page");
  usable_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() { munmap(mapping_, mapping_bytes_); }

#if defined(__x86_64__)

// sdp_emu_fiber_switch(void** save, void* load): pushes the callee-saved
// registers and the floating-point control words on the running stack, saves
// the stack pointer in *save, loads `load` and pops the same frame from it.
// sdp_emu_fiber_start: the first "return address" of a new fiber; calls
// entry (r13) with the argument (r12) on a 16-byte aligned stack.
asm(R"(
  .text
  .globl sdp_emu_fiber_switch
  .type sdp_emu_fiber_switch, @function
sdp_emu_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sdp_emu_fiber_switch, .-sdp_emu_fiber_switch

  .globl sdp_emu_fiber_start
  .type sdp_emu_fiber_start, @function
sdp_emu_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size sdp_emu_fiber_start, .-sdp_emu_fiber_start
)");

extern "C" void sdp_emu_fiber_switch(void** save, void* load);
extern "C" void sdp_emu_fiber_start();

FiberContext::~FiberContext() = default;

void make_fiber(FiberContext& context, FiberStack& stack, FiberEntry entry, void* argument) {
  forget_old_frames(stack);
  auto top = reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size();
  top &= ~uintptr_t{15};
  // The frame sdp_emu_fiber_switch pops, lowest address first: control
  // words, r15, r14, r13, r12, rbx, rbp, return address. After `ret` the
  // stack pointer is top - 16, 16-byte aligned as a call site needs.
  auto* frame = reinterpret_cast<uint64_t*>(top - 16 - 8 * 8);
  const uint32_t mxcsr = 0x1F80;  // all exceptions masked, round to nearest
  const uint16_t x87_control = 0x037F;
  frame[0] = mxcsr | (static_cast<uint64_t>(x87_control) << 32);
  frame[1] = 0;                                         // r15
  frame[2] = 0;                                         // r14
  frame[3] = reinterpret_cast<uint64_t>(entry);         // r13
  frame[4] = reinterpret_cast<uint64_t>(argument);      // r12
  frame[5] = 0;                                         // rbx
  frame[6] = 0;                                         // rbp
  frame[7] = reinterpret_cast<uint64_t>(&sdp_emu_fiber_start);
  context.stack_pointer = frame;
  context.stack_bottom = stack.bottom();
  context.stack_size = stack.size();
}

static void raw_switch(FiberContext& from, FiberContext& to) {
  sdp_emu_fiber_switch(&from.stack_pointer, to.stack_pointer);
}

#else  // ucontext elsewhere: slower (a signal-mask system call per switch), same semantics

FiberContext::~FiberContext() { delete static_cast<ucontext_t*>(ucontext); }

namespace {
ucontext_t& ucontext_of(FiberContext& context) {
  if (!context.ucontext) context.ucontext = new ucontext_t{};
  return *static_cast<ucontext_t*>(context.ucontext);
}
}  // namespace

void make_fiber(FiberContext& context, FiberStack& stack, FiberEntry entry, void* argument) {
  forget_old_frames(stack);
  ucontext_t& uc = ucontext_of(context);
  if (getcontext(&uc) != 0) die("getcontext failed");
  uc.uc_stack.ss_sp = stack.bottom();
  uc.uc_stack.ss_size = stack.size();
  uc.uc_link = nullptr;
  // makecontext passes int arguments: the pointer travels as two halves.
  const auto bits = reinterpret_cast<uintptr_t>(argument);
  static thread_local FiberEntry pending_entry;
  pending_entry = entry;
  auto start = +[](unsigned high, unsigned low) {
    const auto arg = reinterpret_cast<void*>((static_cast<uintptr_t>(high) << 32) | low);
    pending_entry(arg);
  };
  makecontext(&uc, reinterpret_cast<void (*)()>(start), 2,
              static_cast<unsigned>(bits >> 32), static_cast<unsigned>(bits & 0xffffffffu));
  context.stack_bottom = stack.bottom();
  context.stack_size = stack.size();
}

static void raw_switch(FiberContext& from, FiberContext& to) {
  if (swapcontext(&ucontext_of(from), &ucontext_of(to)) != 0) die("swapcontext failed");
}

#endif

void switch_fiber(FiberContext& from, FiberContext& to) {
#ifdef SDP_EMU_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.stack_bottom, to.stack_size);
  raw_switch(from, to);
  const void* old_bottom = nullptr;
  size_t old_size = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &old_bottom, &old_size);
  // Back in `from`: whoever switched here came from old_bottom. The first
  // switch into a host thread's scheduler context learns its stack this way.
  (void)old_bottom;
  (void)old_size;
#else
  raw_switch(from, to);
#endif
}

void fiber_entered(FiberContext& host) {
#ifdef SDP_EMU_ASAN
  const void* bottom = nullptr;
  size_t size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  host.stack_bottom = bottom;
  host.stack_size = size;
#else
  (void)host;
#endif
}

}  // namespace sdp::emu
