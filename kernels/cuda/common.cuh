// Launch helpers shared by the CUDA kernel families.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "mytorch/launch.h"

namespace mytorch::cuda {

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n, int per_thread = 1) {
  int64_t blocks = (n + int64_t(kThreads) * per_thread - 1) / (int64_t(kThreads) * per_thread);
  if (blocks < 1) blocks = 1;
  if (blocks > 65536) blocks = 65536; // kernels loop grid-stride past this
  return static_cast<unsigned>(blocks);
}

inline rt::Status check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return rt::Status::Success;
  std::string msg = std::string(what) + " launch failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  return rt::report(rt::Status::Unknown, msg.c_str());
}

// Beyond 48 KiB of dynamic shared memory a kernel must opt in (cudaFuncSetAttribute), on every device it runs
// on: function attributes are per device. Done once per (device, kernel); a failure is reported, not ignored.
inline rt::Status opt_in_shared_memory(const void* kernel, size_t bytes, const char* what) {
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> done;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return check_launch(what);
  std::lock_guard<std::mutex> lock(mu);
  if (done.count({device, kernel})) return rt::Status::Success;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    std::string msg = std::string(what) + ": cannot opt in to " + std::to_string(bytes) + " bytes of dynamic shared memory on device " +
                      std::to_string(device) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    return rt::report(rt::Status::InvalidValue, msg.c_str());
  }
  done.insert({device, kernel});
  return rt::Status::Success;
}

// Attribute and occupancy queries whose failure only loses a tuning value: the thread's last error is cleared
// so that the next launch check does not report it (Note [Clearing the last error] in runtime/cuda.cpp).
inline void ignore_error(cudaError_t err) {
  if (err != cudaSuccess) (void)cudaGetLastError();
}

inline cudaStream_t native(rt::Stream s) { return static_cast<cudaStream_t>(s); }

} // namespace mytorch::cuda
