// The runner of the sim loops (Note [Sim parallelism] in parallel.h): whatever the glue installed, else the
// calling thread.
#include "mytorch/parallel.h"

#include <atomic>

namespace mytorch::par {
namespace {

std::atomic<Runner> g_runner{nullptr};
std::atomic<int (*)()> g_threads{nullptr};

} // namespace

void install(Runner runner, int (*threads)()) {
  g_threads.store(threads);
  g_runner.store(runner);
}

int threads() {
  int (*t)() = g_threads.load(std::memory_order_relaxed);
  const int n = t ? t() : 1;
  return n < 1 ? 1 : n;
}

void run(int64_t n, int64_t grain, int max_threads, Body body, const void* ctx) {
  Runner r = g_runner.load(std::memory_order_acquire);
  if (r == nullptr) body(ctx, 0, n);
  else r(n, grain, max_threads, body, ctx);
}

} // namespace mytorch::par
