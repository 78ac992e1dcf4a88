// The part of the device API that kernel launchers see: statuses, stream handles, and which kernels run
// (cuda/ or their sim/ twins). Family headers include this, not runtime.h, so that a change to the device API
// rebuilds the code that calls it and not every kernel family.
#pragma once

namespace mytorch::rt {

enum class Status : int {
  Success = 0,
  InvalidValue,
  OutOfMemory,
  InvalidDevice,
  InvalidPointer, // double free, free of an unknown pointer, out-of-bounds copy
  NotReady,       // stream/event query: work still pending
  Unavailable,    // the requested runtime cannot run here
  Forked,         // used in a child process after the parent initialised the runtime
  Unknown,
};

// Emu: the CUDA kernels and the cuda runtime on the CPU emulator (the MYTORCH_EMU build, kernels/emu/).
enum class Kind : int { Sim = 0, Cuda = 1, Emu = 2 };

// Opaque handles. A null Stream is the default stream of the device it is used on.
using Stream = void*;
using Event = void*;

Kind kind();                   // initialises on first use; Sim when init failed
const char* kind_name();       // "cuda", "sim", "emu", or "unavailable" when the requested runtime could not start
// Whether the launchers of kernels/cuda run (the cuda runtime, or its emulation); else the sim twins do.
inline bool cuda_kernels() {
  const Kind k = kind();
  return k == Kind::Cuda || k == Kind::Emu;
}
const char* status_name(Status s);
const char* last_error();      // message of the calling thread's last failed call
Status report(Status s, const char* message); // lets kernel launchers set the thread's error text

} // namespace mytorch::rt

// MT_LAUNCHER(name, (params), (args)): a kernel family's launcher, declared once for its three homes:
// sim::name (the CPU twin, kernels/sim/<family>.cpp), cuda::name (kernels/cuda/<family>.cu, in builds with the
// CUDA kernels or their emulation) and kernels::name, which the glue calls and which picks cuda:: when the
// cuda or emu runtime is live (rt::cuda_kernels()), else sim::. MT_LAUNCHER_RETURNING is the same for a launcher
// that returns R instead of a status (a workspace size).
//
// Note [One glue for every flavour]
// Nothing here depends on the flavour (sim, cuda, emu): the glue and the sim kernels that include this header
// compile to the same objects in every build, so the test command's three builds share them through ccache
// (CMakeLists.txt) instead of compiling csrc/ and kernels/sim/ three times. The sim build, which has no CUDA
// kernels, links generated/cuda_absent.cpp in its build folder instead (CMakeLists.txt writes it: every header
// that declares a launcher, included with MT_LAUNCHER_DEFINE_ABSENT_CUDA), which turns every cuda::name
// declaration into a definition that reports Unavailable (never reached there: rt::cuda_kernels() is false on
// the sim runtime).
#ifdef MT_LAUNCHER_DEFINE_ABSENT_CUDA
#include <type_traits>
namespace mytorch::rt::detail {
template <typename R>
R absent_cuda_kernel() {
  if constexpr (std::is_same_v<R, Status>) {
    return report(Status::Unavailable, "this build of mytorch has no CUDA kernels");
  } else {
    return R{};
  }
}
} // namespace mytorch::rt::detail
#define MT_LAUNCHER_CUDA_DECL(R, name, params)                             \
  namespace cuda {                                                         \
  R name params { return ::mytorch::rt::detail::absent_cuda_kernel<R>(); } \
  }
#else
#define MT_LAUNCHER_CUDA_DECL(R, name, params) \
  namespace cuda {                             \
  R name params;                               \
  }
#endif
#define MT_LAUNCHER_CUDA_CALL(name, args) \
  if (::mytorch::rt::cuda_kernels()) return cuda::name args;
#define MT_LAUNCHER_RETURNING(R, name, params, args) \
  namespace sim {                                    \
  R name params;                                     \
  }                                                  \
  MT_LAUNCHER_CUDA_DECL(R, name, params)             \
  namespace kernels {                                \
  inline R name params {                             \
    MT_LAUNCHER_CUDA_CALL(name, args)                \
    return sim::name args;                           \
  }                                                  \
  }
#define MT_LAUNCHER(name, params, args) MT_LAUNCHER_RETURNING(::mytorch::rt::Status, name, params, args)
// A family only the CUDA side has (its sim glue computes with ATen on host views, as the grouped GEMM and the FFTs):
// kernels::name reports InvalidValue with `why` on sim.
#define MT_CUDA_ONLY_LAUNCHER(name, params, args, why)                      \
  MT_LAUNCHER_CUDA_DECL(::mytorch::rt::Status, name, params)                \
  namespace kernels {                                                       \
  inline ::mytorch::rt::Status name params {                                \
    MT_LAUNCHER_CUDA_CALL(name, args)                                       \
    return ::mytorch::rt::report(::mytorch::rt::Status::InvalidValue, why); \
  }                                                                         \
  }
