// Sim twin of cuda/index.cu (Note [Index engine]).
#include "mytorch/index.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim {
namespace {

rt::Status out_of_bounds(const IndexArgs& a, int64_t v) {
  record_error(a.error, v);
  return rt::Status::Success;  // the glue raises IndexError with the value (Note [Device-side errors])
}

template <ScatterOp op, typename T>
inline void combine_as(T* dst, T v) {
  using O = ew::opmath_t<T>;
  if constexpr (op == ScatterOp::Assign) *dst = v;
  else if constexpr (op == ScatterOp::Add) *dst = static_cast<T>(static_cast<O>(mt_load(dst)) + static_cast<O>(v));
  else if constexpr (op == ScatterOp::Mul) *dst = static_cast<T>(static_cast<O>(mt_load(dst)) * static_cast<O>(v));
  else if constexpr (op == ScatterOp::Max)
    *dst = ew::apply<EwOp::Maximum, T>(static_cast<O>(mt_load(dst)), static_cast<O>(v), O(0), EwParams{});
  else *dst = ew::apply<EwOp::Minimum, T>(static_cast<O>(mt_load(dst)), static_cast<O>(v), O(0), EwParams{});
}

// f(std::integral_constant<ScatterOp, op>) for the runtime op: a loop inside f has its op fixed at compile time
// (a combine call with the switch per element was half of a scatter_add's time).
template <typename F>
void with_op(ScatterOp op, const F& f) {
  switch (op) {
    case ScatterOp::Assign: return f(std::integral_constant<ScatterOp, ScatterOp::Assign>{});
    case ScatterOp::Add: return f(std::integral_constant<ScatterOp, ScatterOp::Add>{});
    case ScatterOp::Mul: return f(std::integral_constant<ScatterOp, ScatterOp::Mul>{});
    case ScatterOp::Max: return f(std::integral_constant<ScatterOp, ScatterOp::Max>{});
    case ScatterOp::Min: return f(std::integral_constant<ScatterOp, ScatterOp::Min>{});
  }
}

} // namespace

// In rows along the last dimension (Note [Sim parallelism]: each row writes its own outputs). Where no index
// varies along that dimension (index_select, embedding: one index per row), a row is one bounds check and one
// copy of consecutive elements (memcpy when both sides are contiguous); otherwise each element looks its index up.
// An index out of bounds is reported by the lowest position that has one, whatever the thread count.
struct Elem16 { unsigned char b[16]; };

rt::Status gather(const IndexArgs& a, rt::Stream) {
  if (a.numel == 0) return rt::Status::Success;
  const char* src = static_cast<const char*>(a.target);
  char* out = static_cast<char*>(a.other);
  const int64_t es = a.elem_size;
  const int last = a.ndim - 1;
  const int64_t row = a.ndim ? a.sizes[last] : 1;
  const int64_t rows = row ? a.numel / row : 0;
  bool row_const = true;
  for (int k = 0; k < a.nidx && a.ndim; ++k) row_const = row_const && a.idx_strides[k][last] == 0;
  const int64_t ts = a.ndim ? a.target_strides[last] : 0, os = a.ndim ? a.other_strides[last] : 0;
  std::atomic<int64_t> bad_pos{INT64_MAX};
  std::mutex bad_mutex;
  int64_t bad_value = 0;
  auto fail = [&](int64_t pos, int64_t v) {
    std::lock_guard<std::mutex> g(bad_mutex);
    if (pos < bad_pos.load()) {
      bad_pos.store(pos);
      bad_value = v;
    }
  };
  // Rows of one index: the offsets of row r + kAhead are computed (and its source prefetched) while row r copies,
  // so the random reads of an embedding or index_select overlap instead of waiting one after another.
  constexpr int64_t kAhead = 8;
  struct Next {
    int64_t t = 0, u = 0, bad = 0;
    bool ok = true;
  };
  auto look = [&](int64_t r, Next& n) {
    n.ok = index_offsets(a, r * row, &n.t, &n.u, &n.bad);
    if (n.ok && ts == 1)
      for (int64_t b = 0; b < std::min<int64_t>(row * es, 4096); b += 64) __builtin_prefetch(src + n.t * es + b);
  };
  if (!row_const) {
    // An index that varies along the row (gather along the last dimension, take, advanced indexing with positions):
    // the elements split over the threads whatever the row count, each row's piece decoded once (index_pos), then
    // every element looks its indices up; one index tensor (the common case) in a loop of its own.
    par::parallel_for(a.numel, par::grain_for(4), [&](int64_t b, int64_t e) {
      const auto walk = [&](auto elem) {
        using E = decltype(elem);
        for (int64_t o = b; o < e;) {
          if (o > bad_pos.load(std::memory_order_relaxed)) return;
          const int64_t j0 = row ? o % row : 0, j1 = std::min(row, j0 + (e - o));
          const IndexPos p = index_pos(a, o - j0);
          int64_t t = 0, u = 0, bad = 0;
          if (a.nidx == 1) {
            const OneIndexRow ir(a, p);
            if (ir.in_bounds(j0, j1)) {  // then the copies without a branch out of the loop
              E* o_e = reinterpret_cast<E*>(out) + p.u;
              const E* s_e = reinterpret_cast<const E*>(src) + p.t;
              for (int64_t j = j0; j < j1; ++j) o_e[j * os] = s_e[j * ts + ir.offset(j)];
              o += j1 - j0;
              continue;
            }
            for (int64_t j = j0; j < j1; ++j) {
              if (!ir.in_bounds(j, j + 1)) return fail(o + j - j0, ir.ip[j * ir.is]);
              std::memcpy(out + (p.u + j * os) * es, src + (p.t + j * ts + ir.offset(j)) * es, sizeof(E));
            }
          } else {
            for (int64_t j = j0; j < j1; ++j) {
              if (!index_at(a, p, j, &t, &u, &bad)) return fail(o + j - j0, bad);
              std::memcpy(out + u * es, src + t * es, sizeof(E));  // one typed load and store
            }
          }
          o += j1 - j0;
        }
      };
      if (es == 1) walk(uint8_t{});
      else if (es == 2) walk(uint16_t{});
      else if (es == 4) walk(uint32_t{});
      else if (es == 8) walk(uint64_t{});
      else walk(Elem16{});
    });
    if (bad_pos.load() != INT64_MAX) out_of_bounds(a, bad_value);
    return rt::Status::Success;
  }
  par::parallel_for(rows, par::grain_for(row), [&](int64_t rb, int64_t re) {
    Next ring[kAhead];
    for (int64_t r = rb; r < std::min(re, rb + kAhead); ++r) look(r, ring[r % kAhead]);
    for (int64_t r = rb; r < re; ++r) {
      if (r * row > bad_pos.load(std::memory_order_relaxed)) return;
      const Next n = ring[r % kAhead];
      if (r + kAhead < re) look(r + kAhead, ring[r % kAhead]);
      if (!n.ok) return fail(r * row, n.bad);
      MT_SIM_ISA_NS::vec::copy_elems(out + n.u * es, os * es, src + n.t * es, ts * es, row, es);
    }
  });
  if (bad_pos.load() != INT64_MAX) out_of_bounds(a, bad_value);
  return rt::Status::Success;
}

namespace {

// Note [Sim scatter]
// A scatter's positions may share targets, and their order is the result's (a sum's roundings, the last assignment),
// so the serial loop over positions is the definition. Where no index varies along the last dimension (index_add,
// index_copy, index_put_ over rows, embedding's backward), a row of positions has one index lookup and consecutive
// targets, and the rows are split by *target memory* instead: the offsets of every row are found first (in parallel),
// then each worker owns a slice of the target's offsets and applies, in row order, the part of every row that lands in
// its slice. Every target element is then written by one worker, with its contributions in the serial order: the same
// bits at any thread count, for any strides (rows that overlap included). An index out of bounds stops the serial loop
// at its row; the rows before it are applied here too, and the lowest bad position is the one reported.
template <typename T>
void scatter_rows(const IndexArgs& a, T* dst, const T* src, T scalar) {
  const int last = a.ndim - 1;
  const int64_t row = a.sizes[last], rows = a.numel / row;
  const int64_t ts = a.target_strides[last], us = a.other_strides[last];
  std::vector<int64_t> t(static_cast<size_t>(rows)), u(static_cast<size_t>(rows));
  std::atomic<int64_t> first_bad{rows};
  std::mutex bad_mutex;
  int64_t bad_value = 0;
  par::parallel_for(rows, par::grain_for(64), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      int64_t bad = 0;
      if (!index_offsets(a, r * row, &t[r], &u[r], &bad)) {
        std::lock_guard<std::mutex> g(bad_mutex);
        if (r < first_bad.load()) {
          first_bad.store(r);
          bad_value = bad;
        }
        return;
      }
    }
  });
  const int64_t valid = first_bad.load();
  int64_t lo = INT64_MAX, hi = INT64_MIN;  // the targets' span
  for (int64_t r = 0; r < valid; ++r) {
    lo = std::min({lo, t[r], t[r] + (row - 1) * ts});
    hi = std::max({hi, t[r], t[r] + (row - 1) * ts});
  }
  const int64_t parts = valid > 0 ? std::min<int64_t>(par::threads(), hi - lo + 1) : 0;
  const bool dense_add_or_copy =
      ts == 1 && us == 1 && !a.src_is_scalar && (a.op == ScatterOp::Add || a.op == ScatterOp::Assign);
  par::parallel_for(parts, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t plo = lo + (hi - lo + 1) * p / parts, phi = lo + (hi - lo + 1) * (p + 1) / parts;  // [plo, phi)
      for (int64_t r = 0; r < valid; ++r) {
        int64_t k0 = 0, k1 = row;  // the row's positions k whose target t[r] + k*ts lies in [plo, phi)
        if (ts > 0) {
          k0 = std::max<int64_t>(0, (plo - t[r] + ts - 1) / ts * (plo > t[r]));
          k1 = std::min<int64_t>(row, phi > t[r] ? (phi - t[r] + ts - 1) / ts : 0);
        } else if (ts < 0) {
          k0 = std::max<int64_t>(0, t[r] >= phi ? (t[r] - phi) / -ts + 1 : 0);
          k1 = std::min<int64_t>(row, t[r] >= plo ? (t[r] - plo) / -ts + 1 : 0);
        } else if (t[r] < plo || t[r] >= phi) {
          k1 = 0;
        }
        if constexpr (!std::is_same_v<T, bool>) {
          if (dense_add_or_copy) {  // combine's Add and Assign on consecutive elements: a loop that vectorises
            using O = ew::opmath_t<T>;
            T* d = dst + t[r];
            const T* v = src + u[r];
            if (a.op == ScatterOp::Add)
              for (int64_t k = k0; k < k1; ++k) d[k] = static_cast<T>(static_cast<O>(d[k]) + static_cast<O>(v[k]));
            else
              for (int64_t k = k0; k < k1; ++k) d[k] = v[k];
            continue;
          }
        }
        with_op(a.op, [&](auto c) {
          constexpr ScatterOp op = decltype(c)::value;
          if (a.src_is_scalar)
            for (int64_t k = k0; k < k1; ++k) combine_as<op>(dst + t[r] + k * ts, scalar);
          else
            for (int64_t k = k0; k < k1; ++k)
              combine_as<op>(dst + t[r] + k * ts, static_cast<T>(mt_load(src + u[r] + k * us)));
        });
      }
    }
  });
  if (valid < rows) out_of_bounds(a, bad_value);
}

} // namespace

namespace {

// Note [Sim scatter], split by a coordinate: a scatter whose positions with different coordinates along a.split_dim
// write disjoint targets runs over that coordinate in parallel. A worker takes a range of coordinates and applies its
// positions in position order, so each target element gets its contributions in the serial order: the same bits at
// any thread count. The indices are checked first (in parallel): only the positions before the first bad one are
// applied, as the serial loop would.
template <typename T>
void scatter_split(const IndexArgs& a, T* dst, const T* src, T scalar) {
  const int sd = a.split_dim, last = a.ndim - 1;
  const int64_t row = a.sizes[last], rows = a.numel / row;
  std::atomic<int64_t> first_bad{a.numel};
  std::mutex bad_mutex;
  int64_t bad_value = 0;
  par::parallel_for(rows, par::grain_for(2 * row), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      if (r * row > first_bad.load(std::memory_order_relaxed)) return;
      const IndexPos p = index_pos(a, r * row);
      if (a.nidx == 1 && OneIndexRow(a, p).in_bounds(0, row)) continue;  // a bounds check that vectorises first
      for (int64_t j = 0; j < row; ++j) {
        int64_t t = 0, u = 0, bad = 0;
        if (index_at(a, p, j, &t, &u, &bad)) continue;
        std::lock_guard<std::mutex> g(bad_mutex);
        if (r * row + j < first_bad.load()) first_bad.store(r * row + j), bad_value = bad;
        return;
      }
    }
  });
  const int64_t limit = first_bad.load();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < sd; ++d) outer *= a.sizes[d];
  for (int d = sd + 1; d < a.ndim; ++d) inner *= a.sizes[d];
  const int64_t n_sd = a.sizes[sd];
  // the positions [pos, pos + n) of one row, decoded once
  auto apply = [&](int64_t pos, int64_t n) {
    const IndexPos p = index_pos(a, pos);
    if (a.nidx == 1) {  // the indices were checked
      const OneIndexRow ir(a, p);
      const int64_t ts = a.target_strides[last], us = a.other_strides[last];
      with_op(a.op, [&](auto k) {
        constexpr ScatterOp op = decltype(k)::value;
        if (a.src_is_scalar)
          for (int64_t j = 0; j < n; ++j) combine_as<op>(dst + p.t + j * ts + ir.offset(j), scalar);
        else
          for (int64_t j = 0; j < n; ++j)
            combine_as<op>(dst + p.t + j * ts + ir.offset(j), static_cast<T>(mt_load(src + p.u + j * us)));
      });
      return;
    }
    with_op(a.op, [&](auto k) {
      constexpr ScatterOp op = decltype(k)::value;
      for (int64_t j = 0; j < n; ++j) {
        int64_t t = 0, u = 0, bad = 0;
        index_at(a, p, j, &t, &u, &bad);
        combine_as<op>(dst + t, a.src_is_scalar ? scalar : static_cast<T>(mt_load(src + u)));
      }
    });
  };
  par::parallel_for(n_sd, par::grain_for(outer * inner), [&](int64_t cb, int64_t ce) {
    if (sd == last) {  // a worker's coordinates are one run of each row (a scatter along dim 0 of a matrix)
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t pos = o * n_sd + cb;
        if (pos >= limit) return;  // later positions of this worker come after it too
        apply(pos, std::min(ce - cb, limit - pos));
      }
      return;
    }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = cb; c < ce; ++c)
        for (int64_t k = 0; k < inner; k += row) {
          const int64_t pos = (o * n_sd + c) * inner + k;
          if (pos >= limit) return;
          apply(pos, std::min(row, limit - pos));
        }
  });
  if (limit < a.numel) out_of_bounds(a, bad_value);
}

} // namespace

rt::Status scatter(const IndexArgs& a, rt::Stream) {
  bool row_const = a.ndim > 0 && a.numel > 0 && a.sizes[a.ndim - 1] > 0;
  for (int k = 0; k < a.nidx && row_const; ++k) row_const = a.idx_strides[k][a.ndim - 1] == 0;
  const bool by_rows = row_const && a.sizes[a.ndim - 1] >= 8 && a.numel > par::kGrain && par::threads() > 1;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      T* dst = static_cast<T*>(a.target);
      const T* src = static_cast<const T*>(a.other);
      T scalar;
      std::memcpy(&scalar, a.scalar, sizeof(T));
      if (by_rows) {  // Note [Sim scatter]
        scatter_rows<T>(a, dst, src, scalar);
        return;
      }
      if (a.split_dim >= 0 && a.split_dim < a.ndim && a.numel > par::kGrain && par::threads() > 1) {
        scatter_split<T>(a, dst, src, scalar);
        return;
      }
      const int64_t row = a.ndim ? a.sizes[a.ndim - 1] : 1;  // positions in order, each row decoded once
      with_op(a.op, [&](auto k) {  // the op chosen once, not per element
        constexpr ScatterOp op = decltype(k)::value;
        for (int64_t o = 0; o < a.numel; o += row) {
          const IndexPos p = index_pos(a, o);
          for (int64_t j = 0; j < row; ++j) {
            int64_t t = 0, u = 0, bad = 0;
            if (!index_at(a, p, j, &t, &u, &bad)) {
              out_of_bounds(a, bad);
              return;
            }
            combine_as<op>(dst + t, a.src_is_scalar ? scalar : static_cast<T>(mt_load(src + u)));
          }
        }
      });
    }
  });
  if (ok && (a.dtype == DType::ComplexFloat || a.dtype == DType::ComplexDouble))
    ok = false;  // Note [Complex index writes]
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "scatter: unsupported dtype");
}

} // namespace mytorch::sim
