// Fiber switching for the emulated CUDA threads (fiber.h). x86-64 System V only; the stacks come from a
// per-host-thread pool of mmap'ed regions with a guard page below each (a stack overflow faults cleanly).
#include "fiber.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if !defined(__x86_64__)
#error "the emulated CUDA build switches fibers with x86-64 code; port mt_emu_switch to this architecture"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define MT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MT_EMU_ASAN 1
#endif
#endif

#if MT_EMU_ASAN
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
extern "C" void __asan_unpoison_memory_region(void const volatile* addr, size_t size);
#endif

// mt_emu_switch(save, to): pushes the callee-saved state on the current stack, stores the stack pointer in
// *save, loads `to` and pops the state saved there. A new fiber's stack is laid out so that the pops land in
// mt_emu_start with the Fiber* in r12.
extern "C" void mt_emu_switch(void** save, void* to);
extern "C" void mt_emu_start();
asm(R"(
  .text
  .globl mt_emu_switch
  .type mt_emu_switch,@function
mt_emu_switch:
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
  .size mt_emu_switch, .-mt_emu_switch

  .globl mt_emu_start
  .type mt_emu_start,@function
mt_emu_start:
  movq %r12, %rdi
  call mt_emu_fiber_main
  ud2
  .size mt_emu_start, .-mt_emu_start
)");

namespace mytorch::emu {
namespace {

#if MT_EMU_ASAN
constexpr size_t kStackSize = 1 << 20;  // instrumented frames are several times larger
#else
constexpr size_t kStackSize = 256 << 10;
#endif
constexpr size_t kGuard = 4096;

struct Pool {
  std::vector<char*> free;
  ~Pool() {
    for (char* s : free) munmap(s - kGuard, kStackSize + kGuard);
  }
};
thread_local Pool t_pool;
thread_local HostContext* t_host = nullptr;  // the host context the running fiber returns to

char* take_stack() {
  if (!t_pool.free.empty()) {
    char* s = t_pool.free.back();
    t_pool.free.pop_back();
    return s;
  }
  void* p =
      mmap(nullptr, kStackSize + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) std::abort();
  mprotect(p, kGuard, PROT_NONE);
  return static_cast<char*>(p) + kGuard;
}

}  // namespace

extern "C" void mt_emu_fiber_main(Fiber* f) {
#if MT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &t_host->stack_bottom, &t_host->stack_size);
#endif
  f->entry(f);  // never returns: the entry ends with fiber_exit
  std::abort();
}

void fiber_prepare(Fiber* f) {
  if (f->stack == nullptr) {
    f->stack = take_stack();
    f->stack_size = kStackSize;
  }
#if MT_EMU_ASAN
  // A reused stack keeps the red zones of frames that never returned (fibers abandoned after a fault, or left
  // through fiber_exit): clear them, or the new fiber's frames would look like overflows.
  __asan_unpoison_memory_region(f->stack, f->stack_size);
#endif
  // From the top: 8 bytes of padding, the return address (mt_emu_start), rbp, rbx, r12 (= f), r13, r14, r15,
  // then MXCSR and the x87 control word. After the final `ret` the stack pointer is 16-byte aligned, as the
  // call in mt_emu_start needs.
  auto* top = reinterpret_cast<uint64_t*>(f->stack + f->stack_size);
  uint64_t* ret_slot = top - 3;
  ret_slot[0] = reinterpret_cast<uint64_t>(&mt_emu_start);
  ret_slot[-1] = 0;                                   // rbp
  ret_slot[-2] = 0;                                   // rbx
  ret_slot[-3] = reinterpret_cast<uint64_t>(f);       // r12
  ret_slot[-4] = 0;                                   // r13
  ret_slot[-5] = 0;                                   // r14
  ret_slot[-6] = 0;                                   // r15
  uint32_t csr[2] = {0x1F80u, 0x037Fu};               // default MXCSR, x87 control word
  __asm__ volatile("stmxcsr %0" : "=m"(csr[0]));
  __asm__ volatile("fnstcw %0" : "=m"(*reinterpret_cast<uint16_t*>(&csr[1])));
  std::memcpy(&ret_slot[-7], csr, 8);
  f->sp = &ret_slot[-7];
}

void fiber_release(Fiber* f) {
  if (f->stack) t_pool.free.push_back(f->stack);
  f->stack = nullptr;
}

void fiber_resume(HostContext* host, Fiber* f) {
  t_host = host;
#if MT_EMU_ASAN
  __sanitizer_start_switch_fiber(&host->fake_stack, f->stack, f->stack_size);
#endif
  mt_emu_switch(&host->sp, f->sp);
#if MT_EMU_ASAN
  __sanitizer_finish_switch_fiber(host->fake_stack, nullptr, nullptr);
#endif
}

void fiber_yield(Fiber* f, HostContext* host) {
#if MT_EMU_ASAN
  __sanitizer_start_switch_fiber(&f->fake_stack, host->stack_bottom, host->stack_size);
#endif
  mt_emu_switch(&f->sp, host->sp);
#if MT_EMU_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &t_host->stack_bottom, &t_host->stack_size);
#endif
}

void fiber_exit(Fiber*, HostContext* host) {
#if MT_EMU_ASAN
  __sanitizer_start_switch_fiber(nullptr, host->stack_bottom, host->stack_size);
#endif
  void* dead = nullptr;
  mt_emu_switch(&dead, host->sp);
  std::abort();
}

}  // namespace mytorch::emu
