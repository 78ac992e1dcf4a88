// Sim twin of cuda/index.cu's nonzero (Note [Nonzero by prefix sums]), in a file of its own: added to index.cpp, it
// tipped GCC's inlining there: index_at stopped inlining into the scatter loop (a 1024 x 512 scatter_add along dim 1
// took 2.0 ms, 1.0 ms with this file apart).
#include <algorithm>

#include "mytorch/index.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {

// The blocks counted in parallel, their offsets in order, then each block's rows.
namespace {
template <typename T>
bool nonzero_at(const T* x, int64_t i) {
  return mt_cast<bool, T>(mt_load(x + i));
}
} // namespace

rt::Status nonzero_count(const NonzeroArgs& a, rt::Stream) {
  const int64_t nb = nonzero_blocks(a.n);
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.in);
    par::parallel_for(nb, par::grain_for(kNonzeroBlock), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t end = std::min(a.n, (b + 1) * kNonzeroBlock);
        int64_t c = 0;
        for (int64_t i = b * kNonzeroBlock; i < end; ++i) c += nonzero_at(x, i);
        a.counts[b] = c;
      }
    });
  });
  int64_t total = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t c = a.counts[b];
    a.counts[b] = total;
    total += c;
  }
  a.counts[nb] = total;
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "nonzero: unsupported dtype");
}

rt::Status nonzero_write(const NonzeroArgs& a, rt::Stream) {
  const int64_t nb = nonzero_blocks(a.n);
  const int nd = a.ndim;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a.in);
    par::parallel_for(nb, par::grain_for(kNonzeroBlock), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * kNonzeroBlock, end = std::min(a.n, begin + kNonzeroBlock);
        const int64_t total = a.counts[nb];
        int64_t r = a.counts[b];  // the next row
        if (nd == 1) {  // without a branch per element (a random mask mispredicts half of them): every position
                        // staged, the count advanced by the test, the block's rows copied out once
          int64_t staged[kNonzeroBlock];
          int64_t k = 0;
          for (int64_t i = begin; i < end; ++i) {
            staged[k] = i;
            k += nonzero_at(x, i) ? 1 : 0;
          }
          std::copy(staged, staged + k, a.out + r);
          continue;
        }
        int64_t at[kMaxDims];  // the coordinates of element i, advanced as an odometer
        for (int64_t d = nd - 1, rem = begin; d >= 0; --d) at[d] = rem % a.sizes[d], rem /= a.sizes[d];
        const int64_t last = a.sizes[nd - 1];
        for (int64_t i = begin; i < end;) {
          const int64_t run = std::min(end - i, last - at[nd - 1]);  // the rest of this innermost row
          for (int64_t j = 0; j < run; ++j) {
            if (!nonzero_at(x, i + j)) continue;
            for (int d = 0; d < nd - 1; ++d) a.out[d * total + r] = at[d];
            a.out[(nd - 1) * total + r] = at[nd - 1] + j;
            ++r;
          }
          i += run;
          at[nd - 1] += run;
          for (int d = nd - 1; d > 0 && at[d] == a.sizes[d]; --d) at[d] = 0, ++at[d - 1];
        }
      }
    });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "nonzero: unsupported dtype");
}

} // namespace mytorch::sim
