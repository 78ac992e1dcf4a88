// The one CPU fallback for operators without a native mytorch kernel: policy and counters.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <map>
#include <string>

namespace mytorch {

// The boxed CPU fallback itself: native wrappers call it (through at::native::call_fallback_fn) for the
// inputs their kernels do not cover, e.g. complex dtypes.
void cpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

enum class FallbackMode { Warn, Silent, Error };

struct FallbackCounter {
  int64_t calls = 0;
  int64_t bytes_to_cpu = 0;    // device bytes copied to the host for the call (0 for sim's zero-copy views)
  int64_t bytes_to_device = 0; // host results copied back to the device
};

void setFallbackMode(const std::string& mode); // "warn" | "silent" | "error"

// For glue that runs an op on the CPU itself because the boxed fallback cannot reach it (ops that ATen
// routes to *_overrideable kernels): the same policy (throws in error mode, warns once in warn mode) and
// the same counters as the boxed fallback.
void beginFallback(const std::string& name);
void countFallback(const std::string& name, int64_t bytes_to_cpu, int64_t bytes_to_device);
std::string fallbackMode();
std::map<std::string, FallbackCounter> fallbackStats();
FallbackCounter fallbackTotals(); // all operators together (cheap: for per-op audits)
void resetFallbackStats();

} // namespace mytorch
