// The part of the device API that kernel launchers see: statuses, stream handles, and which kernels run
// (cuda/ or their sim/ twins). Family headers include this, not runtime.h, so that a change to the device API
// rebuilds the code that calls it and not every kernel family.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

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

// Graph capture on sim (Note [Graph capture], kernels/runtime/graph.cpp): while a stream captures, a launcher
// given that stream records its sim twin instead of running it.
namespace detail {
bool any_capture();
bool recording(Stream stream);
Status record(Stream stream, const char* name, std::function<Status()> work);
// The stream a launcher's argument tuple carries (its rt::Stream, a void*; null when none).
inline void take_stream(Stream& s, Stream x) { s = x; }
template <typename T>
void take_stream(Stream&, const T&) {}
template <typename Tuple>
Stream stream_in(const Tuple& t) {
  Stream s = nullptr;
  std::apply([&](const auto&... x) { (take_stream(s, x), ...); }, t);
  return s;
}
// The Philox state of the graph replaying on this thread (Note [Random numbers in a captured graph]): a launch
// recorded with a captured offset (kCapturedOffset set; generator slot and the offset within the capture
// below it) reads its seed and base offset here at replay.
constexpr uint64_t kCapturedOffset = uint64_t(1) << 63;
constexpr int kCapturedSlotShift = 48;
bool replay_philox(int slot, uint64_t* seed, uint64_t* base);
inline void philox_replay_fix(uint64_t& seed, uint64_t& offset) {
  if (!(offset & kCapturedOffset)) return;
  const int slot = static_cast<int>((offset & ~kCapturedOffset) >> kCapturedSlotShift);
  uint64_t s = 0, base = 0;
  if (!replay_philox(slot, &s, &base)) return;
  seed = s;
  offset = base + (offset & ((uint64_t(1) << kCapturedSlotShift) - 1));
}
} // namespace detail

} // namespace mytorch::rt

namespace mytorch {
// Hooks of the capture path for a launcher argument type (found by argument-dependent lookup; a family overloads
// them next to its argument struct): capture_own copies what an argument points to in host memory into the
// record (the returned holder keeps it), capture_replay_fix adjusts the recorded copy before each replay,
// capture_is_query says the call only answers a question (a workspace size) and must run now.
template <typename T>
std::shared_ptr<void> capture_own(T&) {
  return nullptr;
}
template <typename T>
void capture_replay_fix(T&) {}
template <typename... T>
bool capture_is_query(const T&...) {
  return false;
}
} // namespace mytorch

namespace mytorch::rt::detail {
template <typename Tuple>
std::vector<std::shared_ptr<void>> capture_own_all(Tuple& t) {
  std::vector<std::shared_ptr<void>> held;
  std::apply([&](auto&... x) { (held.push_back(capture_own(x)), ...); }, t);
  return held;
}
template <typename Tuple>
void capture_replay_fix_all(Tuple& t) {
  std::apply([](auto&... x) { (capture_replay_fix(x), ...); }, t);
}
} // namespace mytorch::rt::detail

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
// The capture path of a launcher (Note [Graph capture]): the arguments copied into a record of the sim twin.
#define MT_LAUNCHER_RECORD(name, args)                                           \
  if (::mytorch::rt::detail::any_capture() && !capture_is_query args) {          \
    auto captured = std::make_tuple args;                                        \
    const ::mytorch::rt::Stream on = ::mytorch::rt::detail::stream_in(captured); \
    if (::mytorch::rt::detail::recording(on)) {                                  \
      auto held = ::mytorch::rt::detail::capture_own_all(captured);              \
      return ::mytorch::rt::detail::record(on, #name, [captured, held]() {       \
        auto call = captured;                                                    \
        ::mytorch::rt::detail::capture_replay_fix_all(call);                     \
        return std::apply([](auto&... x) { return sim::name(x...); }, call);     \
      });                                                                        \
    }                                                                            \
  }
#define MT_LAUNCHER(name, params, args)                      \
  namespace sim {                                            \
  ::mytorch::rt::Status name params;                         \
  }                                                          \
  MT_LAUNCHER_CUDA_DECL(::mytorch::rt::Status, name, params) \
  namespace kernels {                                        \
  inline ::mytorch::rt::Status name params {                 \
    MT_LAUNCHER_CUDA_CALL(name, args)                        \
    MT_LAUNCHER_RECORD(name, args)                           \
    return sim::name args;                                   \
  }                                                          \
  }
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
