// Installs the sim kernels' runner (Note [Sim parallelism] in kernels/include/mytorch/parallel.h): torch's
// intra-op pool through at::parallel_for, capped by MYTORCH_SIM_THREADS.
//
// With torch's OpenMP backend (the Linux wheels) at::parallel_for expands, inline, to an OpenMP parallel region,
// so this file is compiled with -fopenmp (CMakeLists.txt); the extension then needs libgomp.so.1, which the
// dynamic linker resolves to the copy torch loaded before us (torch/lib/libgomp.so.1, same soname): one OpenMP
// runtime, one pool, torch's and ours taking turns on it. Compiled without -fopenmp the region would run on one
// thread, silently; test/test_sim_parallel.py checks that a large op does use two threads.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "mytorch/parallel.h"

namespace mytorch {
namespace {

int capFromEnv() {
  const char* v = std::getenv("MYTORCH_SIM_THREADS");
  if (v == nullptr || *v == '\0') return 0;
  const int n = std::atoi(v);
  return n > 0 ? n : 0;
}

const int kCap = capFromEnv();

int simThreads() {
  const int t = at::get_num_threads();
  return kCap > 0 ? std::min(t, kCap) : t;
}

void runOnTorchPool(int64_t n, int64_t grain, int maxThreads, par::Body body, const void* ctx) {
  // at::parallel_for gives each worker one contiguous piece of at least `grain`; raising the grain to
  // n / maxThreads caps the workers used below torch's count.
  const int64_t perThread = (n + maxThreads - 1) / maxThreads;
  at::parallel_for(0, n, std::max(grain, perThread), [&](int64_t b, int64_t e) { body(ctx, b, e); });
}

const bool kInstalled = [] {
  par::install(runOnTorchPool, simThreads);
  return true;
}();

} // namespace

// How many distinct threads ran the pieces of a parallel_for over n iterations (test/test_sim_parallel.py).
int simParallelProbe(int64_t n) {
  std::mutex m;
  std::set<std::thread::id> ids;
  par::parallel_for(n, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> g(m);
    ids.insert(std::this_thread::get_id());
  });
  return static_cast<int>(ids.size());
}

} // namespace mytorch
