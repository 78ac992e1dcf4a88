// Shared between the emulator's grid executor (scheduler.cpp) and its runtime API (runtime_api.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "mytorch_emu/cuda.h"

namespace mytorch::emu {

struct LaunchRec {
  const void* func = nullptr;
  LaunchSite site{};
  dim3 grid, block;
  size_t shm = 0;
  std::shared_ptr<void> closure;
  ThreadBody body = nullptr;
};

// A fault inside a kernel: the CUDA error the hardware would raise and what the emulator saw.
struct Fault {
  cudaError_t error = cudaSuccess;
  std::string what;
};

// Runs every block of the grid on the calling host thread (a stream's worker). Returns the first fault.
Fault run_grid(const LaunchRec& launch);

// MYTORCH_EMU_FUZZ=<seed>: fibers resumed, plain-call threads and blocks run in seeded random orders, so a
// shared-memory race changes the result between seeds. 0 (the default) keeps the natural order.
unsigned long long fuzz_seed();

// Host work in stream order (the emulated libraries' kernels): fails with cudaErrorInvalidResourceHandle when the
// stream belongs to another device than the current one, like a kernel launch.
cudaError_t submit(cudaStream_t stream, std::function<void()> task);
int current_device();
// The device whose live allocation holds `p` and the `bytes` after it; -1 when none does.
int device_of_range(const void* p, size_t bytes);

}  // namespace mytorch::emu
