// Indexing of strided operands in the CUDA kernels that walk arbitrary layouts (copy, elementwise): linear element
// index -> per-dimension indices -> byte offsets, with 32-bit fast division (Note [Fast divmod]).
#pragma once

#include <cstdint>

#include "mytorch/macros.h"
#include "mytorch/strided.h"

namespace mytorch {

// Note [Fast divmod]
// The strided kernels turn a linear element index into per-dimension indices. A 64-bit division and remainder per
// dimension per element costs tens of instructions on a GPU; below 2^31 elements they divide in 32 bits by a
// multiply-high and a shift instead (the round-up method of Granlund and Montgomery, as ATen's IntDivider): for
// 1 <= d < 2^31 take s with 2^(s-1) < d <= 2^s and m = floor(2^32 (2^s - d) / d) + 1; then for 0 <= n < 2^31,
// n / d = (umulhi(n, m) + n) >> s (the sum stays below 2^32). The launcher computes the divisors once
// (strided_divs) and passes them by value.
struct FastDiv {
  uint32_t d = 1, m = 1;
  uint32_t s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << s) < d) ++s;
    m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << s) - d)) / d + 1);
  }
  MT_HOST_DEVICE uint32_t div(uint32_t n) const {
    const uint32_t t = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
    return (t + n) >> s;
  }
};

// n / d and n % d for one divisor d of an index range below `limit`: FastDiv when the range fits 2^31, else 64-bit
// division (the flat index -> (row, column) split of the row kernels).
struct DivMod {
  FastDiv fast;
  int64_t d = 1;
  bool use32 = false;
  DivMod() = default;
  DivMod(int64_t divisor, int64_t limit) : d(divisor > 0 ? divisor : 1), use32(limit < (int64_t(1) << 31)) {
    if (use32) fast = FastDiv(static_cast<uint32_t>(d));
  }
  MT_HOST_DEVICE int64_t div(int64_t n, int64_t* rem) const {
    if (use32) {
      const uint32_t q = fast.div(static_cast<uint32_t>(n));
      *rem = static_cast<int64_t>(static_cast<uint32_t>(n) - q * static_cast<uint32_t>(d));
      return q;
    }
    *rem = n % d;
    return n / d;
  }
};

struct StridedDivs {
  bool use32 = false;  // numel < 2^31: 32-bit indices with the divisors below
  FastDiv div[kMaxDims];
};

inline StridedDivs strided_divs(const StridedShape& s) {
  StridedDivs v;
  v.use32 = s.numel < (int64_t(1) << 31);
  if (v.use32) {
    for (int d = 0; d < s.ndim; ++d) v.div[d] = FastDiv(static_cast<uint32_t>(s.sizes[d] > 0 ? s.sizes[d] : 1));
  }
  return v;
}

// f(d, index along d) for each dimension of linear element `idx` (dimension 0 fastest).
template <typename F>
MT_HOST_DEVICE inline void strided_visit(const StridedShape& s, const StridedDivs& v, int64_t idx, F&& f) {
  if (v.use32) {
    uint32_t rem = static_cast<uint32_t>(idx);
    for (int d = 0; d + 1 < s.ndim; ++d) {
      const uint32_t q = v.div[d].div(rem);
      f(d, static_cast<int64_t>(rem - q * static_cast<uint32_t>(s.sizes[d])));
      rem = q;
    }
    if (s.ndim > 0) f(s.ndim - 1, static_cast<int64_t>(rem));
    return;
  }
  for (int d = 0; d < s.ndim; ++d) {
    f(d, idx % s.sizes[d]);
    idx /= s.sizes[d];
  }
}

// Byte offsets of linear element `idx` in two operands (st1 may be null): strided.h's strided_offsets, in 32 bits
// when the divisors allow.
MT_HOST_DEVICE inline void strided_offsets(const StridedShape& s, const StridedDivs& v, const int64_t* st0,
                                           const int64_t* st1, int64_t idx, int64_t* o0, int64_t* o1) {
  if (!v.use32) {
    strided_offsets(s, st0, st1, idx, o0, o1);
    return;
  }
  int64_t a = 0, b = 0;
  strided_visit(s, v, idx, [&](int d, int64_t i) {
    a += i * st0[d];
    if (st1) b += i * st1[d];
  });
  *o0 = a;
  *o1 = b;
}

} // namespace mytorch
