// Fibers for the emulated CUDA threads (Note [CUDA emulation]): a stack and a saved stack pointer, switched
// by a hand-written x86-64 routine (callee-saved registers, MXCSR and the x87 control word), not ucontext,
// whose signal-mask system calls would dominate the cost of a barrier.
#pragma once

#include <cstddef>
#include <vector>

namespace mytorch::emu {

struct Fiber {
  void* sp = nullptr;       // saved stack pointer while switched out
  char* stack = nullptr;    // lowest usable address
  size_t stack_size = 0;
  void (*entry)(Fiber*) = nullptr;
  void* fake_stack = nullptr;  // AddressSanitizer's bookkeeping across switches
};

// The host thread's own context, to which fibers switch back.
struct HostContext {
  void* sp = nullptr;
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;
};

// Prepares `f` to start at f->entry(f) on its stack (taken from this host thread's pool).
void fiber_prepare(Fiber* f);
// Releases the fibers' stacks back to this host thread's pool.
void fiber_release(Fiber* f);
// Host thread -> fiber; returns when the fiber switches back.
void fiber_resume(HostContext* host, Fiber* f);
// Fiber -> host thread; returns when the host resumes the fiber again.
void fiber_yield(Fiber* f, HostContext* host);
// Fiber -> host thread for the last time (the fiber has finished).
[[noreturn]] void fiber_exit(Fiber* f, HostContext* host);

}  // namespace mytorch::emu
