// The grid executor of the emulated CUDA build (Note [CUDA emulation]): blocks one after another, a block's
// threads as fibers between barriers, warp collectives through a per-warp scratchpad, and the faults a GPU
// would raise (partial barriers, misaligned accesses) reported with the block and thread.
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "fiber.h"
#include "internal.h"
#include "trace.h"

namespace mytorch::emu {
namespace {

struct KernelFault {
  cudaError_t error;
  std::string what;
};

enum class State { Runnable, AtBarrier, AtWarp, Done };

struct EmuThread {
  Fiber fiber;
  ThreadState ts;
  State state = State::Runnable;
  unsigned warp_seq = 0;  // collectives this thread has entered (selects the scratch buffer)
  const char* waiting_in = "";
};

struct WarpScratch { unsigned char slots[2][32][kSlotBytes]; };

struct Block {
  const LaunchRec* launch = nullptr;
  uint3 idx{};
  int nthreads = 0;
  bool fiber_mode = false;
  std::vector<EmuThread> threads;
  std::vector<WarpScratch> warps;
  std::unique_ptr<unsigned char[]> dynamic_smem;  // exactly the launch's bytes: an overrun reaches a red zone
  std::vector<std::pair<const void*, void*>> statics;
  std::string fault;
  cudaError_t fault_error = cudaSuccess;
  HostContext host;
  EmuThread* running = nullptr;  // the fiber being run, null in plain mode
  const EmuThread* lead = nullptr;  // in plain mode: the warp's first thread, which finished without waiting
  ThreadState plain;             // the thread state of plain-mode calls
};

thread_local Block* t_block = nullptr;
thread_local ThreadState* t_state = nullptr;

std::string dims(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

std::string where(const Block& b, const ThreadState& t) {
  return std::string(b.launch->site.name) + " (launched at " + b.launch->site.file + ":" +
         std::to_string(b.launch->site.line) + "), block " + dims(b.idx) + ", thread " + dims(t.thread_idx);
}

// One text for a barrier or full-mask collective that part of the block or warp never reached (on a GPU: a
// hang or undefined results), whichever path of the scheduler finds it.
std::string partial_text(const char* what, const char* scope, const Block& b, const ThreadState& reached,
                         const ThreadState& exited) {
  return std::string(what) + " reached by part of the " + scope + " in " + where(b, reached) + "; thread " +
         dims(exited.thread_idx) + " had exited without reaching it";
}

void record(Block& b, cudaError_t e, std::string what) {
  if (b.fault.empty()) {
    b.fault = std::move(what);
    b.fault_error = e;
  }
}

ThreadState make_state(const Block& b, int linear) {
  const dim3 bd = b.launch->block;
  ThreadState t;
  t.thread_idx = uint3{linear % bd.x, (linear / bd.x) % bd.y, linear / (bd.x * bd.y)};
  t.block_idx = b.idx;
  t.block_dim = bd;
  t.grid_dim = b.launch->grid;
  t.linear = linear;
  return t;
}

void thread_entry(Fiber* f) {
  Block& b = *t_block;
  EmuThread* th = b.running;
  try {
    b.launch->body(b.launch->closure.get());
  } catch (const KernelFault& e) {
    record(b, e.error, e.what);
  } catch (const std::exception& e) {
    record(b, cudaErrorLaunchFailure, where(b, th->ts) + ": exception in the kernel: " + e.what());
  }
  th->state = State::Done;
  fiber_exit(f, &b.host);
}

void resume(Block& b, EmuThread& th) {
  b.running = &th;
  t_state = &th.ts;
  fiber_resume(&b.host, &th.fiber);
  b.running = nullptr;
}

std::vector<int> order(int n, std::mt19937_64* rng) {
  std::vector<int> o(static_cast<size_t>(n));
  std::iota(o.begin(), o.end(), 0);
  if (rng) std::shuffle(o.begin(), o.end(), *rng);
  return o;
}

// Runs the block's fibers to completion; releases barriers once every thread of the block (or warp) arrived.
void run_fibers(Block& b, std::mt19937_64* rng) {
  for (;;) {
    bool ran = false;
    for (int i : order(b.nthreads, rng)) {
      EmuThread& th = b.threads[static_cast<size_t>(i)];
      if (th.state != State::Runnable) continue;
      if (th.fiber.sp == nullptr) fiber_prepare(&th.fiber);
      resume(b, th);
      ran = true;
      if (!b.fault.empty()) return;
    }
    int alive = 0, at_barrier = 0;
    for (const auto& th : b.threads) {
      alive += th.state != State::Done;
      at_barrier += th.state == State::AtBarrier;
    }
    if (alive == 0) return;
    bool released = false;
    if (at_barrier == alive) {
      if (alive < b.nthreads) {
        int gone = 0;
        while (b.threads[static_cast<size_t>(gone)].state != State::Done) ++gone;
        const EmuThread& first = *std::find_if(b.threads.begin(), b.threads.end(),
                                               [](const EmuThread& t) { return t.state == State::AtBarrier; });
        record(b, cudaErrorLaunchFailure,
               partial_text("__syncthreads", "block", b, first.ts, b.threads[size_t(gone)].ts));
        return;
      }
      for (auto& th : b.threads) th.state = State::Runnable;
      continue;
    }
    for (size_t w = 0; w < b.warps.size(); ++w) {
      const int lo = static_cast<int>(w) * 32, hi = std::min(b.nthreads, lo + 32);
      int at = 0, done = 0;
      for (int i = lo; i < hi; ++i) {
        at += b.threads[size_t(i)].state == State::AtWarp;
        done += b.threads[size_t(i)].state == State::Done;
      }
      if (at == 0 || at + done != hi - lo) continue;
      if (done > 0) {
        int gone = lo, waiting = lo;
        while (b.threads[size_t(gone)].state != State::Done) ++gone;
        while (b.threads[size_t(waiting)].state != State::AtWarp) ++waiting;
        record(b, cudaErrorLaunchFailure,
               partial_text(b.threads[size_t(waiting)].waiting_in, "warp", b, b.threads[size_t(waiting)].ts,
                            b.threads[size_t(gone)].ts));
        return;
      }
      for (int i = lo; i < hi; ++i) b.threads[size_t(i)].state = State::Runnable;
      released = true;
    }
    if (!released && !ran) {
      std::string waits;
      for (const auto& th : b.threads) {
        if (th.state == State::AtBarrier || th.state == State::AtWarp) {
          waits =
              std::string(th.state == State::AtBarrier ? "__syncthreads" : th.waiting_in) + " in " + where(b, th.ts);
          break;
        }
      }
      record(b, cudaErrorLaunchFailure,
             "barrier divergence: the block cannot make progress (first waiting: " + waits +
                 "); threads of the block or warp wait at different barriers");
      return;
    }
  }
}

void run_block(Block& b, std::mt19937_64* rng) {
  const LaunchRec& L = *b.launch;
  b.nthreads = static_cast<int>(L.block.x * L.block.y * L.block.z);
  b.fiber_mode = false;
  b.fault.clear();
  b.fault_error = cudaSuccess;
  // Shared memory starts as garbage on a GPU: a kernel that reads before writing must not see zeros.
  b.dynamic_smem.reset(L.shm ? new unsigned char[L.shm] : nullptr);
  if (L.shm) std::memset(b.dynamic_smem.get(), 0xA5, L.shm);
  for (auto& s : b.statics) std::free(s.second);
  b.statics.clear();
  trace::block_begin(static_cast<int>(L.block.x * L.block.y * L.block.z), b.dynamic_smem.get(), L.shm);
  b.warps.resize(static_cast<size_t>((b.nthreads + 31) / 32));
  b.threads.resize(static_cast<size_t>(b.nthreads));
  for (int i = 0; i < b.nthreads; ++i) {
    EmuThread& th = b.threads[size_t(i)];
    th.ts = make_state(b, i);
    th.state = State::Runnable;
    th.warp_seq = 0;
    th.fiber.sp = nullptr;
    th.fiber.entry = &thread_entry;
  }
  // Fast path, warp by warp: the warp's first thread runs as a fiber; if it finishes without waiting anywhere,
  // the warp's other threads run as plain calls (a barrier or collective one of them reaches then was not
  // reached by that first thread: a partial barrier). A warp whose first thread waits turns the block to fibers.
  const int nwarps = (b.nthreads + 31) / 32;
  for (int w : order(nwarps, rng)) {
    const int lo = w * 32, hi = std::min(b.nthreads, lo + 32);
    const int first = lo + (rng ? static_cast<int>((*rng)() % static_cast<unsigned>(hi - lo)) : 0);
    EmuThread& lead = b.threads[size_t(first)];
    fiber_prepare(&lead.fiber);
    resume(b, lead);
    if (!b.fault.empty()) break;
    if (lead.state != State::Done) {
      b.fiber_mode = true;
      break;
    }
    b.lead = &lead;
    for (int k : order(hi - lo, rng)) {
      EmuThread& th = b.threads[size_t(lo + k)];
      if (&th == &lead) continue;
      b.plain = th.ts;
      t_state = &b.plain;
      try {
        L.body(L.closure.get());
      } catch (const KernelFault& e) {
        record(b, e.error, e.what);
      } catch (const std::exception& e) {
        record(b, cudaErrorLaunchFailure, where(b, b.plain) + ": exception in the kernel: " + e.what());
      }
      th.state = State::Done;
      if (!b.fault.empty()) break;
    }
    b.lead = nullptr;
    if (!b.fault.empty()) break;
  }
  if (b.fault.empty() && b.fiber_mode) run_fibers(b, rng);
  for (auto& th : b.threads) fiber_release(&th.fiber);
  trace::block_end();
}

[[noreturn]] void partial(const char* what) {
  Block& b = *t_block;
  const bool block = std::string(what) == "__syncthreads";
  throw KernelFault{cudaErrorLaunchFailure,
                    partial_text(what, block ? "block" : "warp", b, *t_state, b.lead ? b.lead->ts : *t_state)};
}

}  // namespace

ThreadState& self() { return *t_state; }

unsigned long long fuzz_seed() {
  static const unsigned long long seed = [] {
    const char* s = std::getenv("MYTORCH_EMU_FUZZ");
    return s ? std::strtoull(s, nullptr, 10) : 0ull;
  }();
  return seed;
}

void syncthreads() {
  Block& b = *t_block;
  if (b.running == nullptr) partial("__syncthreads");
  EmuThread& th = *b.running;
  th.state = State::AtBarrier;
  fiber_yield(&th.fiber, &b.host);
}

const unsigned char* warp_exchange(unsigned mask, const void* in, size_t bytes, const char* what) {
  Block& b = *t_block;
  if (b.running == nullptr) partial(what);
  EmuThread& th = *b.running;
  const int w = th.ts.linear / 32, lane = th.ts.linear % 32;
  const int lanes = std::min(32, b.nthreads - w * 32);
  const unsigned full = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  if (mask != 0xffffffffu && mask != full) {
    throw KernelFault{cudaErrorLaunchFailure, std::string(what) + " with mask " + std::to_string(mask) + " in " +
                                                  where(b, th.ts) +
                                                  ": the emulator implements full-mask collectives only"};
  }
  WarpScratch& ws = b.warps[size_t(w)];
  unsigned char* buf = &ws.slots[th.warp_seq & 1][0][0];
  std::memcpy(buf + lane * kSlotBytes, in, bytes);
  th.state = State::AtWarp;
  th.waiting_in = what;
  fiber_yield(&th.fiber, &b.host);
  return buf;
}

void warp_leave() {
  Block& b = *t_block;
  if (b.running) b.running->warp_seq++;
}

unsigned char* dynamic_shared_base() { return t_block->dynamic_smem.get(); }

void* block_static_shared(const void* key, size_t bytes, size_t align) {
  Block& b = *t_block;
  for (const auto& s : b.statics)
    if (s.first == key) return s.second;
  // Exact size (rounded up to the alignment only), so that an overrun reaches the allocator's red zone;
  // posix_memalign because aligned_alloc may refuse a size that is not a multiple of the alignment (ASan's does).
  void* p = nullptr;
  if (posix_memalign(&p, align < 16 ? 16 : align, (bytes + align - 1) / align * align) != 0 || p == nullptr) {
    std::fprintf(stderr, "mytorch emu: cannot allocate %zu bytes of static shared memory\n", bytes);
    std::abort();
  }
  std::memset(p, 0xA5, bytes);
  b.statics.emplace_back(key, p);
  trace::static_shared(p, bytes);
  return p;
}

Fault run_grid(const LaunchRec& L) {
  Block b;
  b.launch = &L;
  Block* saved_block = t_block;
  ThreadState* saved_state = t_state;
  t_block = &b;
  std::mt19937_64 rng(fuzz_seed());
  std::mt19937_64* r = fuzz_seed() ? &rng : nullptr;
  const unsigned long long n = static_cast<unsigned long long>(L.grid.x) * L.grid.y * L.grid.z;
  std::vector<unsigned long long> ids;
  if (r) {
    ids.resize(n);
    std::iota(ids.begin(), ids.end(), 0ull);
    std::shuffle(ids.begin(), ids.end(), *r);
  }
  Fault out;
  trace::launch_begin(L);
  for (unsigned long long k = 0; k < n; ++k) {
    const unsigned long long id = r ? ids[k] : k;
    b.idx = uint3{static_cast<unsigned>(id % L.grid.x), static_cast<unsigned>((id / L.grid.x) % L.grid.y),
                  static_cast<unsigned>(id / (static_cast<unsigned long long>(L.grid.x) * L.grid.y))};
    run_block(b, r);
    if (!b.fault.empty()) {
      out.error = b.fault_error;
      out.what = b.fault;
      break;
    }
  }
  trace::launch_end(L, !out.what.empty());
  for (auto& s : b.statics) std::free(s.second);
  t_block = saved_block;
  t_state = saved_state;
  return out;
}

// ---- ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 as a warp collective -----------------------------------
// From the PTX ISA (Warp-level matrix load instruction: ldmatrix): lanes 8i..8i+7 name the rows of matrix i; lane
// l receives in register i, from matrix i, the two 16-bit elements (row l/4, cols 2(l%4), 2(l%4)+1), or with .trans
// (rows 2(l%4), 2(l%4)+1, col l/4), the lower-numbered element in the lower half. MYTORCH_EMU_MMA_LAYOUT=ldmatrix
// swaps .trans and its absence: the negative control of the tests that use it.
namespace {
bool wrong_ldmatrix() {
  static const bool w = [] {
    const char* s = std::getenv("MYTORCH_EMU_MMA_LAYOUT");
    return s && std::string(s) == "ldmatrix";
  }();
  return w;
}
}  // namespace

void ldmatrix_x4(uint32_t* regs, const uint4& row, bool trans) {
  const unsigned char* slots = warp_exchange(0xffffffffu, &row, sizeof(row), trans ? "ldmatrix.trans" : "ldmatrix");
  auto elem = [&](int matrix, int r, int c) {
    uint16_t v;
    std::memcpy(&v, slots + (matrix * 8 + r) * kSlotBytes + c * 2, 2);
    return static_cast<uint32_t>(v);
  };
  const int lane = self().linear % 32, g = lane / 4, t = lane % 4;
  if (wrong_ldmatrix()) trans = !trans;
  uint32_t out[4];
  for (int i = 0; i < 4; ++i)
    out[i] =
        trans ? elem(i, 2 * t, g) | (elem(i, 2 * t + 1, g) << 16) : elem(i, g, 2 * t) | (elem(i, g, 2 * t + 1) << 16);
  warp_leave();
  for (int i = 0; i < 4; ++i) regs[i] = out[i];
}

bool cp_async_never_lands() {
  static const bool never = [] {
    const char* s = std::getenv("MYTORCH_EMU_CP_ASYNC");
    return s && std::string(s) == "never";
  }();
  return never;
}

// ---- mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulate) as a warp collective --------------------------------
// Fragment layouts from the PTX ISA (Matrix fragments for mma.m16n8k16 with floating point type), with
// g = lane / 4 and t = lane % 4:
//   A (16x16, row): register r holds (row g + 8*(r&1), cols 2t + 8*(r>>1) + {0,1});
//   B (16x8, col):  register r holds (rows 2t + 8*r + {0,1}, col g);
//   C/D (16x8):     element i holds (row g + 8*(i>>1), col 2t + (i&1)).
// MYTORCH_EMU_MMA_LAYOUT=wrong swaps A's second and third registers: the negative control of the tests.
namespace {
bool wrong_layout() {
  static const bool w = [] {
    const char* s = std::getenv("MYTORCH_EMU_MMA_LAYOUT");
    return s && std::string(s) == "wrong";
  }();
  return w;
}
float half_bits(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // IEEE binary16 -> float
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
struct MmaFrag {
  uint32_t a[4];
  uint32_t b[2];
};
}  // namespace

void mma_m16n8k16(float* c, const uint32_t* a, const uint32_t* b, bool bf16) {
  MmaFrag mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
  const unsigned char* slots = warp_exchange(0xffffffffu, &mine, sizeof(mine), "mma.sync.m16n8k16");
  auto frag = [&](int lane) {
    MmaFrag f;
    std::memcpy(&f, slots + lane * kSlotBytes, sizeof(f));
    return f;
  };
  auto elem_a = [&](int row, int col) {
    int reg = (row >= 8 ? 1 : 0) + (col >= 8 ? 2 : 0);
    if (wrong_layout()) reg = (row >= 8 ? 2 : 0) + (col >= 8 ? 1 : 0);
    const uint32_t word = frag((row % 8) * 4 + (col % 8) / 2).a[reg];
    return half_bits(static_cast<uint16_t>(col % 2 ? word >> 16 : word & 0xFFFFu), bf16);
  };
  auto elem_b = [&](int row, int col) {
    const uint32_t word = frag(col * 4 + (row % 8) / 2).b[row >= 8 ? 1 : 0];
    return half_bits(static_cast<uint16_t>(row % 2 ? word >> 16 : word & 0xFFFFu), bf16);
  };
  const int lane = self().linear % 32, g = lane / 4, t = lane % 4;
  trace::mma();
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float acc = c[i];
    for (int k = 0; k < 16; ++k) acc = std::fma(elem_a(row, k), elem_b(k, col), acc);
    out[i] = acc;
  }
  warp_leave();
  for (int i = 0; i < 4; ++i) c[i] = out[i];
}

}  // namespace mytorch::emu

// ---- misaligned accesses: the kernels are compiled with -fsanitize=alignment, and a misaligned load or store
// is the fault a GPU raises (cudaErrorMisalignedAddress), not a report on stderr. The handler signatures are
// those of the UBSan runtime's type-mismatch check (GCC and Clang), which this build does not link.
namespace {
struct SourceLocation {
  const char* file;
  unsigned line;
  unsigned column;
};
struct TypeDescriptor {
  unsigned short kind;
  unsigned short info;
  char name[1];
};
struct TypeMismatchData {
  SourceLocation loc;
  const TypeDescriptor* type;
  unsigned char log_alignment;
  unsigned char type_check_kind;
};
void misaligned(TypeMismatchData* d, unsigned long ptr) {
  using namespace mytorch::emu;
  const unsigned long align = 1ul << d->log_alignment;
  if (ptr == 0 || (ptr & (align - 1)) == 0) return;  // only alignment is checked in this build
  static const char* kinds[] = {"load of",
                                "store to",
                                "reference binding to",
                                "member access within",
                                "member call on",
                                "constructor call on",
                                "downcast of",
                                "downcast of",
                                "upcast of",
                                "cast to virtual base of",
                                "_Nonnull binding to",
                                "dynamic operation on"};
  char buf[512];
  std::snprintf(buf, sizeof(buf), "misaligned address: %s %p of type %s, which requires %lu-byte alignment (%s:%u)",
                d->type_check_kind < 12 ? kinds[d->type_check_kind] : "access to", reinterpret_cast<void*>(ptr),
                d->type ? d->type->name : "?", align, d->loc.file ? d->loc.file : "?", d->loc.line);
  if (t_block == nullptr) {  // host code of a launcher: report it as the sanitizer would
    std::fprintf(stderr, "mytorch emu: %s\n", buf);
    return;
  }
  record(*t_block, cudaErrorMisalignedAddress, where(*t_block, *t_state) + ": " + buf);
}
}  // namespace

extern "C" {
// (void*, void*): the compiler's own declaration of these builtins when a sanitizer is on.
void __ubsan_handle_type_mismatch_v1(void* d, void* ptr) {
  misaligned(static_cast<TypeMismatchData*>(d), reinterpret_cast<unsigned long>(ptr));
}
// The non-recoverable form (-fno-sanitize-recover, which this build does not use) must not return.
[[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(void* d, void* ptr) {
  misaligned(static_cast<TypeMismatchData*>(d), reinterpret_cast<unsigned long>(ptr));
  std::fprintf(stderr, "mytorch emu: %s\n",
               mytorch::emu::t_block ? mytorch::emu::t_block->fault.c_str() : "misaligned access");
  std::abort();
}
}
