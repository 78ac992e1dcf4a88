// The GPU performance model of the emulated build (Note [GPU performance model], trace.cpp): what the grid
// executor tells the tracer. Internal to kernels/emu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "internal.h"

namespace mytorch::emu::trace {

// Whether launches are traced (MYTORCH_EMU_TRACE=<file>, or set_file at run time).
bool enabled();
// Appends to `path` from the next launch on; an empty path stops tracing. False when the file cannot be opened.
bool set_file(const char* path);

// The grid executor's calls, on the host thread running the grid (no-ops unless enabled()).
void launch_begin(const LaunchRec& launch);
void launch_end(const LaunchRec& launch, bool faulted);
void block_begin(int nthreads, const void* dynamic_smem, size_t dynamic_bytes);
void block_end();
void static_shared(const void* p, size_t bytes);
// One lane's part of a warp-wide mma.sync.m16n8k16 (a warp's 32 calls are one instruction).
void mma();

}  // namespace mytorch::emu::trace
