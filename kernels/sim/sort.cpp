// Sim twin of cuda/sort.cu (Note [Sort engine]).
#include "mytorch/sort.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "mytorch/ops_math.h"

namespace mytorch::sim {

rt::Status sort(const SortArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      const T* in = static_cast<const T*>(a.in);
      T* vals = static_cast<T*>(a.values);
      std::vector<int64_t> order(static_cast<size_t>(a.length));
      for (int64_t s = 0; s < a.slices; ++s) {
        const T* row = in + s * a.length;
        std::iota(order.begin(), order.end(), int64_t(0));
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
          return sort_before<O>(static_cast<O>(row[x]), x, static_cast<O>(row[y]), y, a.descending);
        });
        for (int64_t i = 0; i < a.length; ++i) {
          vals[s * a.length + i] = row[order[static_cast<size_t>(i)]];
          a.indices[s * a.length + i] = order[static_cast<size_t>(i)];
        }
      }
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "sort: unsupported dtype");
}

rt::Status isin(const IsinArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      using O = ew::opmath_t<T>;
      const T* el = static_cast<const T*>(a.elements);
      const T* sorted = static_cast<const T*>(a.sorted);
      for (int64_t i = 0; i < a.n; ++i) a.out[i] = sorted_contains<O>(sorted, a.m, static_cast<O>(el[i])) != a.invert;
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "isin: unsupported dtype");
}

} // namespace mytorch::sim
