// The sim runtime's execution model (Note [Sim parallelism]): parallel_for over an index range, on workers that
// the glue installs (torch's intra-op pool). kernels/ sees only this header: no thread library, no ATen.
#pragma once

#include <cstdint>

namespace mytorch::par {

// Note [Sim parallelism]
// The sim kernels run on the calling thread, as a CUDA launch runs on the device: synchronously, stream order is
// call order. Their loops split over worker threads through a runner the glue installs at start-up
// (csrc/core/SimParallel.cpp: at::parallel_for, so the workers are torch's own intra-op pool and an op of ours
// never runs beside an op of torch's on a second pool; without a runner, e.g. in kernels' own self-tests, every
// loop runs on the calling thread). Rules every sim kernel keeps:
// - a loop shorter than its grain (kGrain elements of work by default) stays on the calling thread, so a tiny op
//   costs what it cost before;
// - a body never reports an error (rt::report is per thread): a kernel validates before its parallel loop;
// - results do not depend on the thread count: an elementwise body writes disjoint outputs; a reduction splits
//   its input into chunks whose boundaries depend only on the sizes, computes one partial per chunk and combines
//   the partials in an order fixed by their count (kernels/sim/reduce.cpp), so 1, 2 or 64 threads give the same
//   bits (test/test_sim_parallel.py runs them at 1, 2 and 4).
// The number of workers: torch.get_num_threads(), capped by MYTORCH_SIM_THREADS when set.

// Work per task below which a loop stays on one thread: about 16K simple element operations (a few µs), the
// break-even of a task hand-off on torch's pool.
constexpr int64_t kGrain = 16384;

using Body = void (*)(const void* ctx, int64_t begin, int64_t end);
// Runs body over [0, n) in pieces of at least grain, on at most max_threads workers; returns when all are done.
using Runner = void (*)(int64_t n, int64_t grain, int max_threads, Body body, const void* ctx);

// Installed once by the glue; threads() is then max(1, min(torch's thread count, MYTORCH_SIM_THREADS)).
void install(Runner runner, int (*threads)());
int threads();
// Hands body over [0, n) to the runner, on at most max_threads workers (> 1).
void run(int64_t n, int64_t grain, int max_threads, Body body, const void* ctx);

// f(begin, end) over [0, n), split over the workers when n exceeds grain.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  const int t = n <= grain ? 1 : threads();
  if (t <= 1) {
    f(int64_t(0), n);
    return;
  }
  run(n, grain, t, [](const void* c, int64_t b, int64_t e) { (*static_cast<const F*>(c))(b, e); }, &f);
}

// The grain in loop iterations for a loop whose iterations each cost about `work` element operations.
inline int64_t grain_for(int64_t work) {
  const int64_t w = work < 1 ? 1 : work;
  return kGrain / w < 1 ? 1 : kGrain / w;
}

} // namespace mytorch::par
