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
