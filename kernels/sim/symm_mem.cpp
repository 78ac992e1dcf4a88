// Sim twin of cuda/symm_mem.cu (Note [Symmetric memory kernels]). Sim work runs at submission, so a kernel here
// is the calling thread: it signals and waits on the peers' pads (shared memory files mapped into this process)
// with host atomics, and moves the data with plain loads and stores. One "block": channel 0 for the kernels'
// own synchronisation, as block 0 of the CUDA kernels.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <type_traits>
#include <vector>

#include "mytorch/symm_mem.h"

namespace mytorch::sim {
namespace {

using Clock = std::chrono::steady_clock;

// Spins until *slot moves from `from` to `to` (compare-and-swap), or the deadline passes. Waiting processes may
// outnumber the cores (4 ranks on 2): after a short spin the waiter yields, and after ~2 ms it sleeps in 20 us
// steps, so the ranks it waits for get the CPU. A peer process that no longer exists ends the wait early.
bool swap_when(uint32_t* slot, uint32_t from, uint32_t to, const SymmSync& s, int32_t peer_pid) {
  const auto start = Clock::now();
  for (uint64_t i = 0;; ++i) {
    uint32_t expected = from;
    if (__atomic_compare_exchange_n(slot, &expected, to, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return true;
    if (i < 128) continue;
    if ((i & 63) == 0) {
      const auto waited = Clock::now() - start;
      if (s.timeout_ms > 0 && waited > std::chrono::milliseconds(s.timeout_ms)) return false;
      if (peer_pid > 0 && s.exited && (i & 1023) == 0 && s.exited(peer_pid)) return false;
      if (waited > std::chrono::milliseconds(2)) {
        const timespec nap{0, 20000};
        nanosleep(&nap, nullptr);
        continue;
      }
    }
    sched_yield();
  }
}

uint32_t* slot_of(const SymmSync& s, int owner, int channel, int src) {
  return s.pads[owner] + static_cast<int64_t>(channel) * s.world + src;
}

bool put(const SymmSync& s, int dst, int channel) {
  if (swap_when(slot_of(s, dst, channel, s.rank), 0u, 1u, s, s.pids ? s.pids[dst] : 0)) return true;
  symm::timed_out(s, channel, dst);
  return false;
}

bool wait(const SymmSync& s, int src, int channel) {
  if (swap_when(slot_of(s, s.rank, channel, src), 1u, 0u, s, s.pids ? s.pids[src] : 0)) return true;
  symm::timed_out(s, channel, src);
  return false;
}

bool barrier(const SymmSync& s, int channel) {
  for (int p = 0; p < s.world; ++p)
    if (!put(s, p, channel)) return false;
  for (int p = 0; p < s.world; ++p)
    if (!wait(s, p, channel)) return false;
  return true;
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// out[i] = sum over ranks (in rank order) of bufs[r][first + i], for i in [0, n); with nl > 0 the
// split-last-dim reduce-scatter's index map (row i / nl of last_dim elements, column first + i % nl). Serial, in
// blocks the compiler vectorises: the ranks are processes already, one per core, and a thread pool per rank
// would only take the cores from the others (and spin in them).
template <typename T>
void reduce_range(const SymmReduceArgs& a, int64_t first, int64_t n, T* out, int64_t nl) {
  constexpr int64_t kBlock = 2048;
  Acc<T> acc[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    for (int r = 0; r < a.sync.world; ++r) {
      const T* src = static_cast<const T*>(a.bufs[r]) + a.offset;
      if (nl > 0) {
        for (int64_t i = 0; i < m; ++i) {
          const int64_t k = b + i;
          const Acc<T> v = static_cast<Acc<T>>(src[(k / nl) * a.last_dim + first + k % nl]);
          acc[i] = r == 0 ? v : acc[i] + v;
        }
      } else if (r == 0) {
        for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<Acc<T>>(src[first + b + i]);
      } else {
        for (int64_t i = 0; i < m; ++i) acc[i] += static_cast<Acc<T>>(src[first + b + i]);
      }
    }
    for (int64_t i = 0; i < m; ++i) out[b + i] = static_cast<T>(acc[i]);
  }
}

template <typename T>
rt::Status reduce(const SymmReduceArgs& a) {
  const SymmSync& s = a.sync;
  T* mine = static_cast<T*>(a.bufs[s.rank]) + a.offset;
  if (a.mode == SymmReduceMode::OneShot) {
    if (a.local_in != nullptr) std::memcpy(mine, a.local_in, static_cast<size_t>(a.numel) * sizeof(T));
    if (!barrier(s, 0)) return rt::Status::Success;
    reduce_range<T>(a, 0, a.numel, static_cast<T*>(a.out), 0);
    barrier(s, 0);
    return rt::Status::Success;
  }
  if (a.mode == SymmReduceMode::ReduceScatter) {
    const int64_t per = a.numel / s.world;
    const int64_t nl = a.last_dim > 0 ? a.last_dim / s.world : 0;
    if (!barrier(s, 0)) return rt::Status::Success;
    reduce_range<T>(a, nl > 0 ? nl * s.rank : per * s.rank, per, static_cast<T*>(a.out), nl);
    barrier(s, 0);
    return rt::Status::Success;
  }
  const int64_t c = symm::chunk(a.numel, s.world);
  const int64_t first = c * s.rank, n = std::max<int64_t>(0, std::min(c, a.numel - first));
  std::vector<T> part(static_cast<size_t>(n));
  if (!barrier(s, 0)) return rt::Status::Success;
  reduce_range<T>(a, first, n, part.data(), 0);
  if (a.mode == SymmReduceMode::TwoShot) {
    for (int step = 0; step < s.world; ++step) {
      const int r = (s.rank + step) % s.world;
      std::memcpy(static_cast<T*>(a.bufs[r]) + a.offset + first, part.data(), static_cast<size_t>(n) * sizeof(T));
    }
    barrier(s, 0);
    return rt::Status::Success;
  }
  std::memcpy(mine + first, part.data(), static_cast<size_t>(n) * sizeof(T));
  if (!barrier(s, 0)) return rt::Status::Success;
  for (int step = 0; step < s.world; ++step) {
    const int r = (s.rank + step) % s.world;
    const int64_t f = c * r, m = std::max<int64_t>(0, std::min(c, a.numel - f));
    std::memcpy(static_cast<T*>(a.out) + f, static_cast<const T*>(a.bufs[r]) + a.offset + f,
                static_cast<size_t>(m) * sizeof(T));
  }
  barrier(s, 0);
  return rt::Status::Success;
}

}  // namespace

rt::Status symm_signal(const SymmSignalArgs& a, rt::Stream) {
  if (a.channel < 0 || a.channel >= a.sync.channels)
    return rt::report(rt::Status::InvalidValue, "symm_signal: channel outside the signal pad");
  switch (a.op) {
    case SymmSignalOp::Barrier: barrier(a.sync, a.channel); break;
    case SymmSignalOp::Put: put(a.sync, a.peer, a.channel); break;
    case SymmSignalOp::Wait: wait(a.sync, a.peer, a.channel); break;
  }
  return rt::Status::Success;
}

rt::Status symm_reduce(const SymmReduceArgs& a, rt::Stream) {
  if (a.numel == 0) return rt::Status::Success;
  rt::Status st = rt::Status::Success;
  if (!dispatch_floating(a.dtype, [&](auto tag) { st = reduce<decltype(tag)>(a); }))
    return rt::report(rt::Status::InvalidValue, "symm_reduce: expected a floating dtype");
  return st;
}

rt::Status symm_all_to_all(const SymmAllToAllArgs& a, rt::Stream) {
  const SymmSync& s = a.sync;
  const int n = s.world * a.experts;
  if (n > kSymmMaxSplits) return rt::report(rt::Status::InvalidValue, "symm_all_to_all: too many splits");
  if (!barrier(s, 0)) return rt::Status::Success;
  std::vector<int64_t> split(static_cast<size_t>(n)), source(static_cast<size_t>(n)), dest(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) symm::plan_segment(a, j, &split[j], &source[j]);
  symm::plan_destinations(a, split.data(), dest.data());
  for (int j = 0; j < n; ++j) {
    int peer = 0, index = 0;
    symm::source_of(a.mode, j, s.rank, s.world, a.experts, &peer, &index);
    if (!symm::segment_ok(a, split[j], source[j], dest[j])) continue;
    std::memcpy(static_cast<char*>(a.out) + dest[j] * a.row_bytes, symm::input_of(a, peer) + source[j] * a.row_bytes,
                static_cast<size_t>(split[j] * a.row_bytes));
  }
  for (int j = 0; j < n; ++j) {
    a.out_splits_offsets[j] = split[j];
    a.out_splits_offsets[n + j] = dest[j];
  }
  barrier(s, 0);
  return rt::Status::Success;
}

}  // namespace mytorch::sim
