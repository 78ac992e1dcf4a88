// The one CPU fallback for operators without a native mytorch kernel: policy and counters.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mytorch {

enum class FallbackMode { Warn, Silent, Error };

struct FallbackCounter {
  int64_t calls = 0;
  int64_t bytes_to_cpu = 0;    // device bytes copied to the host for the call (0 for sim's zero-copy views)
  int64_t bytes_to_device = 0; // host results copied back to the device
};

void setFallbackMode(const std::string& mode); // "warn" | "silent" | "error"
std::string fallbackMode();
std::map<std::string, FallbackCounter> fallbackStats();
void resetFallbackStats();

} // namespace mytorch
