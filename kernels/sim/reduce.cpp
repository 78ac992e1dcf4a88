// Sim twin of cuda/reduce.cu (Note [Reduction engine]): per output element, partial accumulators over
// runs of 256 reduced elements, combined pairwise in order; each reduction's struct from reduce.h (the scans are
// sim/scan.cpp).
#include "mytorch/reduce.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "mytorch/parallel.h"
#include "mytorch/sim_cpu_sum.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

constexpr int64_t kChunk = 256; // reduced elements per partial: the unit of the parallel split
constexpr int64_t kLeaf = 32;    // elements accumulated in sequence inside a chunk

// parts[0] := parts[0] + ... + parts[m-1], neighbours pairwise (an order fixed by m alone).
template <typename R, typename Acc>
Acc combine_pairwise(Acc* parts, int64_t m, const RedParams& p) {
  for (int64_t w = 1; w < m; w *= 2)
    for (int64_t i = 0; i + w < m; i += 2 * w) R::combine(parts[i], parts[i + w], p);
  return parts[0];
}

constexpr int kLanes = vec::kLanes; // interleaved leaves of a contiguous chunk: four vector registers of floats
constexpr int64_t kLaneChunk = 2048; // reduced elements per partial on the lanes' path

// A reduction over one contiguous row longer than a leaf: the lanes' path for one-value states (see
// chunk_partial), the row kernels below for variance and the arg-reductions.
inline bool contiguous_row(const ReduceArgs& r) {
  return r.red_ndim == 1 && r.red_in_strides[0] == 1 && r.red_numel > kLeaf;
}
template <typename R>
bool lanes_path(const ReduceArgs& r) {
  return red::kOneValue<R> && contiguous_row(r);
}
template <typename R>
constexpr bool kIsVar = std::is_same_v<R, red::Reduction<RedOp::Var>>;
template <typename R>
constexpr bool kIsExtreme = std::is_base_of_v<red::Extreme<true>, R> || std::is_base_of_v<red::Extreme<false>, R>;
template <typename R>
bool row_kernel_path(const ReduceArgs& r) {
  return (kIsVar<R> || kIsExtreme<R>) && contiguous_row(r);
}

// The sums of f(x[j]) over j in [c, end) in kLanes interleaved lanes (lane k: c+k, c+k+32, ...), each of
// kN functions, folded by the lanes' halving tree: out[i] = sum of f(x)[i]. The order depends on c and end only.
// vec::lane_sum's order, several sums in one pass: var_chunk called vec::lane_sum once per sum measured 0.155 ->
// 0.202 ms on a float32 var of 1M elements (one more pass over the chunk).
template <int kN, typename A, typename T, typename F>
void lane_sums(const T* x, int64_t c, int64_t end, const F& f, A (&out)[kN]) {
  A lane[kN][kLanes] = {};
  auto add = [&](int k, int64_t j) {
    A v[kN];
    f(static_cast<A>(mt_load(x + j)), v);
    for (int i = 0; i < kN; ++i) lane[i][k] += v[i];
  };
  int64_t j = c;
  for (; j + kLanes <= end; j += kLanes)
    for (int k = 0; k < kLanes; ++k) add(k, j + k);
  for (; j < end; ++j) add(static_cast<int>((j - c) % kLanes), j);
  for (int i = 0; i < kN; ++i) {
    for (int w = kLanes / 2; w >= 1; w /= 2)
      for (int k = 0; k < w; ++k) lane[i][k] += lane[i][k + w];
    out[i] = lane[i][0];
  }
}

// Note [Variance of a chunk in two passes]
// Welford's update divides by the count once per element, in one dependency chain: about 1.3 ns an element,
// three times the CPU's float32 var. Over a contiguous chunk (kLaneChunk elements, in cache after the first
// read) the state is computed in two vectorised passes instead: the mean from the lanes' sum, then the sum of
// squared deviations with the corrected two-pass formula M2 = sum (x - m)^2 - (sum (x - m))^2 / n (Chan, Golub
// and LeVeque), whose correction absorbs the rounding of m. Chunks still meet in Chan's combine, pairwise in
// chunk order, so the bits depend on the sizes alone (not the thread count), as before. The sim accumulates a
// float variance in double (run), as the CPU does, so the 32 lanes are eight AVX2 registers per sum.
template <typename A, typename T>
red::Acc<A> var_chunk(const T* x, int64_t c, int64_t end) {
  const int64_t n = end - c;
  A sum[1];
  lane_sums<1, A>(x, c, end, [](A v, A(&o)[1]) { o[0] = v; }, sum);
  const A m = sum[0] / static_cast<A>(n);
  if (!std::isfinite(m)) {  // inf or NaN: Welford's updates in order, as the CPU's (an inf then more: mean NaN)
    red::Acc<A> s{A(0), A(0), 0};
    for (int64_t j = c; j < end; ++j) red::Reduction<RedOp::Var>::push(s, static_cast<A>(mt_load(x + j)), j, {});
    return s;
  }
  A dev[2];
  lane_sums<2, A>(
      x, c, end,
      [m](A v, A(&o)[2]) {
        o[0] = v - m;
        o[1] = (v - m) * (v - m);
      },
      dev);
  return {m, dev[1] - dev[0] * dev[0] / static_cast<A>(n), n};
}

// amax and amin (Max and Min with no index output): NaN wins, else the extreme. Push and combine touch the value
// only (kOneValue), so chunk_partial's lanes and the column loops vectorise them; max/min with indices and
// argmax/argmin keep the indexed red::Extreme. Of equal values (+0 and -0) the one kept follows the lanes' order,
// fixed by the sizes (not by the thread count).
template <bool kMaxOp>
struct ExtremeValue {
  static constexpr bool kMax = kMaxOp;
  static constexpr red::Out2 kOut2 = red::Out2::None;
  static constexpr bool kOneValue = true;
  template <typename A>
  static A pick(A s, A v) {
    return (red::is_nan(v) || (kMax ? v > s : v < s)) ? v : s;
  }
  template <typename A>
  static red::Acc<A> init(const RedParams&) {
    using L = std::numeric_limits<A>;  // -inf, not lowest(): a row of -inf (a masked amax) gives -inf
    if constexpr (L::has_infinity) return {kMax ? -L::infinity() : L::infinity(), A(0), -1};
    else return {kMax ? L::lowest() : L::max(), A(0), -1};
  }
  template <typename A>
  static void push(red::Acc<A>& s, A v, int64_t, const RedParams&) {
    s.a = pick(s.a, v);
  }
  template <typename A>
  static void combine(red::Acc<A>& s, const red::Acc<A>& o, const RedParams&) {
    s.a = pick(s.a, o.a);
  }
  template <typename A>
  static A project(const red::Acc<A>& s, const RedParams&, A*) {
    return s.a;
  }
};
template <typename R>
constexpr bool kIsExtremeValue = std::is_same_v<R, ExtremeValue<true>> || std::is_same_v<R, ExtremeValue<false>>;

// The extreme of x[c, end) with NaN winning (ExtremeValue::pick), in kLanes interleaved lanes that start at `from`
// (lane k: c+k, c+k+32, ...; the tail into lane (j - c) % kLanes), folded by the lanes' halving tree. Over the
// whole groups of kLanes a lane's dependency chain is one compare-and-select without the NaN test (v > s ? v : s,
// one maxps), the NaNs noted in a mask off that chain: with the test on the chain amax of 1M float32 took 76 us
// against the CPU's 56. A chunk with a NaN there gives its first NaN; otherwise the same selections in the same
// order as picking element by element (the same bits, +0 and -0 included).
template <bool kMax, typename A, typename T>
A extreme_lanes(const T* x, int64_t c, int64_t end, A from) {
  constexpr int L = kLanes;
  auto pick = [](A s, A v) { return ExtremeValue<kMax>::pick(s, v); };
  A lane[L];
  int32_t nan[L];
  for (int k = 0; k < L; ++k) {
    lane[k] = from;
    nan[k] = 0;
  }
  int64_t j = c;
  for (; j + L <= end; j += L)
    for (int k = 0; k < L; ++k) {
      const A v = static_cast<A>(mt_load(x + j + k));
      lane[k] = (kMax ? v > lane[k] : v < lane[k]) ? v : lane[k];
      nan[k] |= red::is_nan(v) ? -1 : 0;  // a compare and an OR: the compare's mask as it is
    }
  int32_t seen = 0;
  for (int k = 0; k < L; ++k) seen |= nan[k];
  if (seen != 0)
    for (int64_t i = c;; ++i)
      if (red::is_nan(static_cast<A>(mt_load(x + i)))) return static_cast<A>(mt_load(x + i));
  for (; j < end; ++j) lane[(j - c) % L] = pick(lane[(j - c) % L], static_cast<A>(mt_load(x + j)));
  for (int w = L / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) lane[k] = pick(lane[k], lane[k + w]);
  return lane[0];
}

// The extreme of a contiguous chunk and the index of its first occurrence (red::Extreme's rule: NaN wins, the
// first of equal values): the value by extreme_lanes, then the first element equal to it (the first NaN if it is
// NaN), searched in blocks whose comparisons vectorise. The lanes start from the chunk's first element, so the
// value found is one of the chunk's. (Rows of at most kLaneRow go by extreme_rows, several at a time.)
template <typename R, typename A, typename T>
red::Acc<A> extreme_chunk(const T* x, int64_t c, int64_t end) {
  constexpr bool kMax = std::is_base_of_v<red::Extreme<true>, R>;
  const A m = extreme_lanes<kMax, A>(x, c, end, static_cast<A>(mt_load(x + c)));
  const bool nan = red::is_nan(m);
  auto found = [&](int64_t i) {  // the first hit in [i, i + kLanes): two loops, so that neither branches on nan
    bool any = false;
    if (nan)
      for (int k = 0; k < kLanes; ++k) any |= red::is_nan(static_cast<A>(mt_load(x + i + k)));
    else
      for (int k = 0; k < kLanes; ++k) any |= static_cast<A>(mt_load(x + i + k)) == m;
    return any;
  };
  auto hit = [&](int64_t i) {
    const A v = static_cast<A>(mt_load(x + i));
    return nan ? red::is_nan(v) : v == m;
  };
  int64_t j = c;
  for (; j + kLanes <= end; j += kLanes)
    if (found(j)) break;
  while (!hit(j)) ++j; // m is one of the chunk's elements: found by end
  return {static_cast<A>(mt_load(x + j)), A(0), j};
}

// The reduced elements per chunk: a row in the CPU's order is one chunk; else the lanes' or the leaves' length.
template <typename R, typename A, typename T>
int64_t chunk_len(const ReduceArgs& r) {
  if (cpu_order_path<R, A, T>(r)) return std::max<int64_t>(r.red_numel, 1);
  return lanes_path<R>(r) || row_kernel_path<R>(r) ? kLaneChunk : kChunk;
}

// The partial of the chunk [c, end) of one output: leaves of kLeaf elements in sequence, combined pairwise
// (neighbours, lower indices on the left, so argmax's first-index rule holds). A float32 sum of n elements then
// errs like n/8 sequential additions plus a tree, not like n: sequential chunks erred about 3x PyTorch's own
// cascade sum on 2048 elements. Over contiguous input, for the reductions whose state is one value (sums,
// products, norms, all/any: red::kOneValue), the leaves interleave instead, over chunks of kLaneChunk: lane k
// takes elements c+k, c+k+32, ... (64 per lane, as PyTorch's cascade sum's leaves), so that the 32 lanes advance
// together in four independent vector registers; the order is still fixed by the sizes alone.
template <typename R, typename A, typename T>
red::Acc<A> chunk_partial(const ReduceArgs& r, const T* in, int64_t in_base, int64_t c, int64_t end) {
  if constexpr (kCpuOrder<R, A, T>) {
    if (cpu_order_path<R, A, T>(r)) { // the whole row is this chunk (chunk_len)
      red::Acc<A> s = R::template init<A>(r.params);
      s.a = cpu_order_sum<R>(in + in_base + c, end - c);
      return s;
    }
  }
  if constexpr (kIsVar<R>) {
    if (row_kernel_path<R>(r)) return var_chunk<A>(in + in_base, c, end);
  }
  if constexpr (kIsExtreme<R>) {
    if (row_kernel_path<R>(r)) return extreme_chunk<R, A>(in + in_base, c, end);
  }
  if constexpr (kIsExtremeValue<R>) {
    if (lanes_path<R>(r))
      return {extreme_lanes<R::kMax, A>(in + in_base, c, end, R::template init<A>(r.params).a), A(0), -1};
  }
  if (lanes_path<R>(r)) {
    A lane[kLanes];
    const red::Acc<A> init = R::template init<A>(r.params);
    for (int k = 0; k < kLanes; ++k) lane[k] = init.a;
    const T* x = in + in_base;
    auto push = [&](A& a, int64_t j) {
      red::Acc<A> t{a, init.b, init.n};
      R::push(t, static_cast<A>(mt_load(x + j)), j, r.params);
      a = t.a;
    };
    int64_t j = c;
    for (; j + kLanes <= end; j += kLanes)
      for (int k = 0; k < kLanes; ++k) push(lane[k], j + k);
    for (; j < end; ++j) push(lane[(j - c) % kLanes], j);
    // the lanes halved: lane k with lane k + w, w = 16, 8, ..., 1 (a fixed tree whose levels are vector ops)
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int k = 0; k < w; ++k) {
        red::Acc<A> t{lane[k], init.b, init.n};
        R::combine(t, red::Acc<A>{lane[k + w], init.b, init.n}, r.params);
        lane[k] = t.a;
      }
    }
    return {lane[0], init.b, init.n};
  }
  red::Acc<A> leaf[kChunk / kLeaf];
  int m = 0;
  for (int64_t b = c; b < end; b += kLeaf, ++m) {
    leaf[m] = R::template init<A>(r.params);
    const int64_t e = std::min(b + kLeaf, end);
    if (r.red_ndim == 1) {
      const int64_t s = r.red_in_strides[0];
      for (int64_t j = b; j < e; ++j) R::push(leaf[m], static_cast<A>(mt_load(in + in_base + j * s)), j, r.params);
    } else {  // in runs along the innermost reduced dim, each run's offset decoded once (the same order)
      const int last = r.red_ndim - 1;  // -1: a 0-d input, one element at offset 0
      const int64_t inner = last >= 0 ? r.red_sizes[last] : 1, s = last >= 0 ? r.red_in_strides[last] : 0;
      for (int64_t j = b; j < e;) {
        const int64_t k = j % inner, n = std::min(e - j, inner - k);
        const T* x = in + in_base + red::red_offset(r, j);
        for (int64_t q = 0; q < n; ++q) R::push(leaf[m], static_cast<A>(mt_load(x + q * s)), j + q, r.params);
        j += n;
      }
    }
  }
  return combine_pairwise<R>(leaf, m, r.params);
}

// A reduction's state in the column loops: just the value when push and combine touch no more (kOneValue), so
// that a row of states is a row of floats the compiler vectorises.
template <typename R, typename A>
struct State {
  static constexpr bool kOne = red::kOneValue<R>;
  using S = std::conditional_t<kOne, A, red::Acc<A>>;
  static S init(const RedParams& p) {
    if constexpr (kOne) return R::template init<A>(p).a;
    else return R::template init<A>(p);
  }
  static void push(S& s, A v, int64_t j, const RedParams& p) {
    if constexpr (kOne) {
      red::Acc<A> t{s, A(0), 0};
      R::push(t, v, j, p);
      s = t.a;
    } else {
      R::push(s, v, j, p);
    }
  }
  static void combine(S& s, const S& o, const RedParams& p) {
    if constexpr (kOne) {
      red::Acc<A> t{s, A(0), 0};
      R::combine(t, red::Acc<A>{o, A(0), 0}, p);
      s = t.a;
    } else {
      R::combine(s, o, p);
    }
  }
  static red::Acc<A> acc(const S& s, const RedParams& p) {
    if constexpr (kOne) return {s, R::template init<A>(p).b, R::template init<A>(p).n};
    else return s;
  }
};

constexpr int kCols = 256; // outputs per column block

// rows[0..m) of nb states each := pairwise, neighbours, as combine_pairwise does for one output.
template <typename St, typename S>
void combine_rows(S* rows, int64_t stride, int64_t m, int nb, const RedParams& p) {
  for (int64_t w = 1; w < m; w *= 2)
    for (int64_t i = 0; i + w < m; i += 2 * w)
      for (int k = 0; k < nb; ++k) St::combine(rows[i * stride + k], rows[(i + w) * stride + k], p);
}

constexpr int kRegCols = 32;  // outputs whose states a column loop keeps in registers (four AVX2 registers of floats)

// f(W, k0, w) for the blocks [k0, k0 + w) of nb outputs: W (a std::integral_constant) kRegCols for whole blocks, 0
// for the last partial one.
template <typename F>
void column_blocks(int nb, const F& f) {
  for (int k0 = 0; k0 < nb; k0 += kRegCols) {
    if (nb - k0 >= kRegCols) f(std::integral_constant<int, kRegCols>{}, k0, kRegCols);
    else f(std::integral_constant<int, 0>{}, k0, nb - k0);
  }
}

// The totals of nb outputs whose inputs start at base, base + 1, ... and step by the reduced stride (a reduction
// over an outer dimension, e.g. a bias gradient): per output exactly chunk_partial's leaves and run's chunk order,
// with the outputs innermost, so that each step reads a contiguous row instead of nb strided columns. A leaf's rows
// are read kRegCols outputs at a time, their states in a local array that the loop (of a width known at compile
// time for whole blocks) keeps in registers, the leaf's rows staying in L1 from one block to the next: the nb
// states in memory, loaded and stored at every row, made sum(0) of 1024^2 float32 1.4x the CPU's time.
// parts: room for kCols states per chunk.
template <typename R, typename A, typename T>
void column_totals(const ReduceArgs& r, const T* in, int64_t base, int nb, red::Acc<A>* total,
                   typename State<R, A>::S* parts) {
  using St = State<R, A>;
  using S = typename St::S;
  const int64_t s = r.red_in_strides[0];
  const int64_t nchunks = (r.red_numel + kChunk - 1) / kChunk;
  S leaf[kChunk / kLeaf][kCols];
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t end = std::min((c + 1) * kChunk, r.red_numel);
    int64_t m = 0;
    for (int64_t b = c * kChunk; b < end; b += kLeaf, ++m) {
      const int64_t e = std::min(b + kLeaf, end);
      column_blocks(nb, [&](auto W, int k0, int nw) {
        const int w = decltype(W)::value > 0 ? decltype(W)::value : nw;
        S lf[kRegCols];
        for (int k = 0; k < w; ++k) lf[k] = St::init(r.params);
        for (int64_t j = b; j < e; ++j) {
          const T* row = in + base + k0 + j * s;
          for (int k = 0; k < w; ++k) St::push(lf[k], static_cast<A>(mt_load(row + k)), j, r.params);
        }
        std::copy(lf, lf + w, leaf[m] + k0);
      });
    }
    combine_rows<St>(&leaf[0][0], kCols, m, nb, r.params);
    std::copy(leaf[0], leaf[0] + nb, parts + c * kCols);
  }
  combine_rows<St>(parts, kCols, nchunks, nb, r.params);
  for (int k = 0; k < nb; ++k) total[k] = St::acc(parts[k], r.params);
}

// column_totals for the extremes: each output's first extreme taken row by row, the rows read in order and each a
// loop across kRegCols outputs at a time in value (and index) arrays, which vectorises; the states' push did not
// (max(1) of 60^3 float32: 1.4x the CPU's time; amax(0) of 1024^2: 1.5x). kIndex (max/min with indices,
// argmax/argmin: red::Extreme):
// the first NaN if any, the index in I (int32 where the reduced length fits); the answer is one element, so the order
// of the reading does not change the bits. Otherwise (amax/amin: ExtremeValue) the value only, by one compare and
// select per element (a maxps) with the NaNs noted in a mask beside it, as extreme_lanes: a column with a NaN gives
// its first NaN; else the first of equal values, as column_totals' leaves combined in order gave.
template <bool kMax, bool kIndex, int W, typename I, typename A, typename T>
void extreme_column_block(const ReduceArgs& r, const T* in, int64_t base, int nw, red::Acc<A>* total) {
  const int w = W > 0 ? W : nw;  // W: the width known at compile time, so that the loops unroll into registers
  const int64_t s = r.red_in_strides[0];
  A val[kRegCols];
  I at[kRegCols];
  int32_t nan[kRegCols];
  for (int k = 0; k < w; ++k) {
    val[k] = static_cast<A>(mt_load(in + base + k));
    at[k] = 0;
    nan[k] = red::is_nan(val[k]) ? -1 : 0;
  }
  for (int64_t j = 1; j < r.red_numel; ++j) {
    const T* row = in + base + j * s;
    const I jj = static_cast<I>(j);
    for (int k = 0; k < w; ++k) {
      const A v = static_cast<A>(mt_load(row + k));
      if constexpr (kIndex) {
        const bool take = (kMax ? v > val[k] : v < val[k]) || (v != v && val[k] == val[k]);
        val[k] = take ? v : val[k];
        at[k] = take ? jj : at[k];
      } else {
        val[k] = (kMax ? v > val[k] : v < val[k]) ? v : val[k];
        nan[k] |= red::is_nan(v) ? -1 : 0;
      }
    }
  }
  for (int k = 0; k < w; ++k) {
    if constexpr (!kIndex) {
      for (int64_t j = 0; nan[k] != 0; ++j)  // the column's first NaN (there is one)
        if (red::is_nan(static_cast<A>(mt_load(in + base + j * s + k)))) {
          val[k] = static_cast<A>(mt_load(in + base + j * s + k));
          break;
        }
    }
    total[k] = {val[k], A(0), static_cast<int64_t>(at[k])};
  }
}

template <bool kMax, bool kIndex, typename I, typename A, typename T>
void extreme_columns(const ReduceArgs& r, const T* in, int64_t base, int nb, red::Acc<A>* total) {
  column_blocks(nb, [&](auto W, int k0, int w) {
    extreme_column_block<kMax, kIndex, decltype(W)::value, I, A>(r, in, base + k0, w, total + k0);
  });
}

// red::red_output_offsets of outputs o0, o0 + 1, ... in turn: one carry per output instead of a division and a
// remainder per output dimension (3600 rows of 120 floats: about half of a short-row sum's time).
struct OutputCursor {
  const ReduceArgs& r;
  int64_t idx[kMaxDims] = {};
  red::RedOffsets at;
  OutputCursor(const ReduceArgs& args, int64_t o) : r(args), at(red::red_output_offsets(args, o)) {
    for (int d = r.out_ndim - 1; d >= 0; --d) {
      idx[d] = o % r.out_sizes[d];
      o /= r.out_sizes[d];
    }
  }
  void next() {
    for (int d = r.out_ndim - 1; d >= 0; --d) {
      at.in_base += r.out_in_strides[d];
      at.out += r.out_strides[d];
      at.out2 += r.out2_strides[d];
      if (++idx[d] < r.out_sizes[d]) return;
      at.in_base -= r.out_sizes[d] * r.out_in_strides[d];
      at.out -= r.out_sizes[d] * r.out_strides[d];
      at.out2 -= r.out_sizes[d] * r.out2_strides[d];
      idx[d] = 0;
    }
  }
  // k >= 1 outputs on, at most to the end of the innermost output row (row_left()).
  void advance(int64_t k) {
    const int d = r.out_ndim - 1;
    at.in_base += (k - 1) * r.out_in_strides[d];
    at.out += (k - 1) * r.out_strides[d];
    at.out2 += (k - 1) * r.out2_strides[d];
    idx[d] += k - 1;
    next();
  }
  int64_t row_left() const { return r.out_sizes[r.out_ndim - 1] - idx[r.out_ndim - 1]; }
};

// Note [Sim short reductions]
// Many outputs of few reduced elements each (sum(-1) of (N, 3), a 2-norm of 60 contiguous floats per output): the
// per-output calls cost more than the work (4.7 ns an output for sum(-1) of 1M x 1 float32, 12x the CPU's time;
// 24 ns for the 2-norm). Two loops do the one-output path's pushes for a group of outputs of one output row at once,
// the elements gathered (in the accumulator type) into a [j][output] block, each push a loop across the group:
//  - short rows (short_totals, red_ndim <= 1, at most kLeaf elements): chunk_partial's single leaf, init then the
//    elements in order (a float sum of fewer than kCpuIlp in the CPU's order is the same sequence from zero, plus
//    three empty accumulators: +0, a no-op as a sum from +0 is never -0);
//  - lane rows (lane_totals, one-value states over a contiguous row of at most kLaneRow on chunk_partial's lanes):
//    element j into lane j % kLanes, then the lanes' halving tree.
// The same operations per output in the same order, so the same bits, but where a product is added to the state
// (x * x, Welford's update), which GCC may fuse into an FMA in one loop and not the other. The loop is chosen by the
// shape alone: results do not depend on the thread count.
constexpr int kShortGroup = 64;

// The states of nb outputs of one output row, the first at in + base, the next `step` elements on.
template <typename R, typename A, typename T>
void short_totals(const ReduceArgs& r, const T* in, int64_t base, int64_t step, int nb, typename State<R, A>::S* st) {
  using St = State<R, A>;
  const int64_t n = r.red_numel, s = r.red_ndim == 1 ? r.red_in_strides[0] : 0;
  A buf[kLeaf][kShortGroup];
  if (n == 1 && step == 1) { // a size-1 reduced dim of a contiguous input: a conversion that vectorises
    for (int k = 0; k < nb; ++k) buf[0][k] = static_cast<A>(mt_load(in + base + k));
  } else {
    for (int k = 0; k < nb; ++k) {
      const T* x = in + base + k * step;
      for (int64_t j = 0; j < n; ++j) buf[j][k] = static_cast<A>(mt_load(x + j * s));
    }
  }
  for (int k = 0; k < nb; ++k) st[k] = St::init(r.params);
  for (int64_t j = 0; j < n; ++j)
    for (int k = 0; k < nb; ++k) St::push(st[k], buf[j][k], j, r.params);
}

constexpr int kLaneGroup = 16;
constexpr int64_t kLaneRow = 512;

// The values of nb outputs of one output row (lane rows), the first row at in + base, the next `step` on:
// chunk_partial's lanes over the whole row.
template <typename R, typename A, typename T>
void lane_totals(const ReduceArgs& r, const T* in, int64_t base, int64_t step, int nb, A* st) {
  using St = State<R, A>;
  const int64_t n = r.red_numel;
  A lane[kLanes][kLaneGroup], buf[kLanes][kLaneGroup];
  for (int k = 0; k < kLanes; ++k)
    for (int g = 0; g < nb; ++g) lane[k][g] = St::init(r.params);
  for (int64_t j0 = 0; j0 < n; j0 += kLanes) {
    const int m = static_cast<int>(std::min<int64_t>(kLanes, n - j0));
    for (int g = 0; g < nb; ++g) {
      const T* x = in + base + g * step + j0;
      for (int k = 0; k < m; ++k) buf[k][g] = static_cast<A>(mt_load(x + k));
    }
    for (int k = 0; k < m; ++k)
      for (int g = 0; g < nb; ++g) St::push(lane[k][g], buf[k][g], j0 + k, r.params);
  }
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k)
      for (int g = 0; g < nb; ++g) St::combine(lane[k][g], lane[k + w][g], r.params);
  for (int g = 0; g < nb; ++g) st[g] = lane[0][g];
}

// lane_totals for max/min with indices and argmax/argmin (red::Extreme) over rows of at most kLaneRow: nb rows at a
// time, each element j a loop across the rows keeping each row's first extreme (or first NaN) and its index, as
// extreme_columns. One row at a time through extreme_chunk spent a row of 60 (max(-1) of 60^3) in its lanes'
// set-up, tail, tree and search: 2.9x the CPU's time.
template <bool kMax, typename A, typename T>
void extreme_rows(const ReduceArgs& r, const T* in, int64_t base, int64_t step, int nb, red::Acc<A>* st) {
  const int64_t n = r.red_numel;
  A val[kLaneGroup], buf[kLanes][kLaneGroup];
  int32_t at[kLaneGroup];
  for (int g = 0; g < nb; ++g) {
    val[g] = static_cast<A>(mt_load(in + base + g * step));
    at[g] = 0;
  }
  for (int64_t j0 = 0; j0 < n; j0 += kLanes) {
    const int m = static_cast<int>(std::min<int64_t>(kLanes, n - j0));
    for (int g = 0; g < nb; ++g) {
      const T* x = in + base + g * step + j0;
      for (int k = 0; k < m; ++k) buf[k][g] = static_cast<A>(mt_load(x + k));
    }
    for (int k = 0; k < m; ++k) {
      const int32_t j = static_cast<int32_t>(j0 + k);
      for (int g = 0; g < nb; ++g) {
        const A v = buf[k][g];
        const bool take = (kMax ? v > val[g] : v < val[g]) || (v != v && val[g] == val[g]);
        val[g] = take ? v : val[g];
        at[g] = take ? j : at[g];
      }
    }
  }
  for (int g = 0; g < nb; ++g) st[g] = {val[g], A(0), at[g]};
}

// One output's total projected and written as O (out, and out2's index or mean); a complex O writes the index only.
template <typename R, typename O, typename A>
inline void store_total(const ReduceArgs& r, const red::RedOffsets& at, const red::Acc<A>& total) {
  A mean = A(0);
  const A v = R::project(total, r.params, &mean);
  if constexpr (!is_complex_t<O>::value) {
    if (r.want_values) static_cast<O*>(r.out)[at.out] = mt_cast<O, A>(v);
  }
  if constexpr (R::kOut2 == red::Out2::Index) {
    if (r.out2 != nullptr) static_cast<int64_t*>(r.out2)[at.out2] = total.n < 0 ? 0 : total.n;
  } else if constexpr (R::kOut2 == red::Out2::Mean && !is_complex_t<O>::value) {
    if (r.out2 != nullptr) static_cast<O*>(r.out2)[at.out2] = mt_cast<O, A>(mean);
  }
}

// Per output element: partials over runs of kChunk reduced elements, combined pairwise in chunk order (Note [Sim
// parallelism]: the chunks depend on the sizes only, so the bits do not depend on the thread count). Many outputs
// split over the workers by output; a few long ones by chunk, the partials combined on the calling thread.
template <typename R, RedOp op, typename T, typename A = red::acc_t<op, T>>
rt::Status run_as(const ReduceArgs& r) {
  const T* in = static_cast<const T*>(r.in);
  const int64_t chunk = chunk_len<R, A, T>(r);
  const int64_t nchunks = (r.red_numel + chunk - 1) / chunk;
  auto finish = [&](const red::RedOffsets& at, const red::Acc<A>& total) {
    dispatch_dtype(r.out_dtype, [&](auto tag) { store_total<R, decltype(tag)>(r, at, total); });
  };
  // The partials of chunks [cb, ce) of the output at in_base, into parts[cb, ce); their total.
  auto fill = [&](red::Acc<A>* parts, int64_t in_base, int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      parts[c] = chunk_partial<R, A>(r, in, in_base, c * chunk, std::min((c + 1) * chunk, r.red_numel));
  };
  auto total_of = [&](red::Acc<A>* parts) {
    return nchunks ? combine_pairwise<R>(parts, nchunks, r.params) : R::template init<A>(r.params);
  };
  const bool by_output = r.out_numel >= 4 * par::threads() || nchunks < 2 * par::threads();
  const bool columns = r.red_ndim == 1 && r.red_in_strides[0] != 1 && r.red_numel > 0 && r.out_ndim > 0 &&
                       r.out_in_strides[r.out_ndim - 1] == 1 && !lanes_path<R>(r);
  // One chunk per output: its partial is the total, so the outputs' dtype is resolved once per call and no partials
  // array is kept (Note [Sim short reductions]).
  if (by_output && nchunks == 1 && !columns && r.out_dtype != DType::ComplexFloat &&
      r.out_dtype != DType::ComplexDouble) {
    dispatch_dtype(r.out_dtype, [&](auto tag) {
      using O = decltype(tag);
      if constexpr (!is_complex_t<O>::value) {
        O* out = static_cast<O*>(r.out);
        const bool short_rows = r.out_ndim >= 1 && r.red_ndim <= 1 && r.red_numel >= 1 && r.red_numel <= kLeaf &&
                                (!cpu_order_path<R, A, T>(r) || r.red_numel < kCpuIlp);
        const bool extreme_row_group =
            kIsExtreme<R> && r.out_ndim >= 1 && row_kernel_path<R>(r) && r.red_numel <= kLaneRow;
        const bool lane_rows = red::kOneValue<R> && r.out_ndim >= 1 && lanes_path<R>(r) &&
                               !cpu_order_path<R, A, T>(r) && r.red_numel <= kLaneRow;
        par::parallel_for(r.out_numel, par::grain_for(r.red_numel), [&](int64_t ob, int64_t oe) {
          OutputCursor cur(r, ob);
          // Note [Sim short reductions]: `group` outputs of one output row at a time, totals(base, nb, states)
          const auto groups = [&](int group, const auto& totals) {
            const int d = r.out_ndim - 1;
            typename State<R, A>::S st[kShortGroup];
            for (int64_t o = ob; o < oe;) {
              const int nb = static_cast<int>(std::min<int64_t>({group, oe - o, cur.row_left()}));
              totals(cur.at.in_base, nb, st);
              red::RedOffsets at = cur.at;
              if (r.want_values && r.out2 == nullptr && r.out_strides[d] == 1) { // a loop that vectorises
                for (int k = 0; k < nb; ++k)
                  out[at.out + k] =
                      mt_cast<O, A>(R::project(State<R, A>::acc(st[k], r.params), r.params, static_cast<A*>(nullptr)));
              } else {
                for (int k = 0; k < nb; ++k) {
                  store_total<R, O>(r, at, State<R, A>::acc(st[k], r.params));
                  at.out += r.out_strides[d];
                  at.out2 += r.out2_strides[d];
                }
              }
              cur.advance(nb);
              o += nb;
            }
          };
          const int64_t step = r.out_ndim ? r.out_in_strides[r.out_ndim - 1] : 0;
          if (short_rows) {
            groups(kShortGroup, [&](int64_t base, int nb, typename State<R, A>::S* st) {
              short_totals<R, A>(r, in, base, step, nb, st);
            });
            return;
          }
          if constexpr (kIsExtreme<R>) {
            if (extreme_row_group) {
              constexpr bool kMax = std::is_base_of_v<red::Extreme<true>, R>;
              groups(kLaneGroup,
                     [&](int64_t base, int nb, red::Acc<A>* st) { extreme_rows<kMax, A>(r, in, base, step, nb, st); });
              return;
            }
          }
          if constexpr (red::kOneValue<R>) {
            if (lane_rows) {
              groups(kLaneGroup, [&](int64_t base, int nb, A* st) { lane_totals<R, A>(r, in, base, step, nb, st); });
              return;
            }
          }
          for (int64_t o = ob; o < oe; ++o, cur.next())
            store_total<R, O>(r, cur.at, chunk_partial<R, A>(r, in, cur.at.in_base, 0, r.red_numel));
        });
      }
    });
    return rt::Status::Success;
  }
  if (by_output) {
    par::parallel_for(r.out_numel, par::grain_for(r.red_numel), [&](int64_t ob, int64_t oe) {
      // a short reduction's partials stay on the stack: no allocation per call
      constexpr int64_t kOnStack = 16;
      red::Acc<A> on_stack[kOnStack];
      std::vector<red::Acc<A>> on_heap(static_cast<size_t>(nchunks > kOnStack ? nchunks : 0));
      red::Acc<A>* parts = nchunks > kOnStack ? on_heap.data() : on_stack;
      // (not a std::vector<float>: its members would be instantiated here with AVX2 and exported, Note [Sim ISA
      // variants])
      std::unique_ptr<typename State<R, A>::S[]> col_parts(
          columns ? new typename State<R, A>::S[static_cast<size_t>(nchunks * kCols)] : nullptr);
      OutputCursor cur(r, ob);
      for (int64_t o = ob; o < oe;) {
        // outputs adjacent in the input (the innermost output dim has stride 1) and a strided reduced dim: a block
        const int64_t row_left = r.out_ndim ? r.out_sizes[r.out_ndim - 1] - o % r.out_sizes[r.out_ndim - 1] : 1;
        const int nb = static_cast<int>(std::min<int64_t>({kCols, oe - o, row_left}));
        if (columns && nb > 1) {
          red::Acc<A> totals[kCols];
          if constexpr (kIsExtreme<R>) {
            constexpr bool kMax = std::is_base_of_v<red::Extreme<true>, R>;
            if (r.red_numel <= INT32_MAX) extreme_columns<kMax, true, int32_t, A>(r, in, cur.at.in_base, nb, totals);
            else extreme_columns<kMax, true, int64_t, A>(r, in, cur.at.in_base, nb, totals);
          } else if constexpr (kIsExtremeValue<R>) {
            extreme_columns<R::kMax, false, int32_t, A>(r, in, cur.at.in_base, nb, totals);
          } else {
            column_totals<R, A>(r, in, cur.at.in_base, nb, totals, col_parts.get());
          }
          for (int k = 0; k < nb; ++k, cur.next()) finish(cur.at, totals[k]);
          o += nb;
          continue;
        }
        fill(parts, cur.at.in_base, 0, nchunks);
        finish(cur.at, total_of(parts));
        cur.next();
        ++o;
      }
    });
    return rt::Status::Success;
  }
  std::vector<red::Acc<A>> parts(static_cast<size_t>(nchunks));
  for (int64_t o = 0; o < r.out_numel; ++o) {
    const red::RedOffsets at = red::red_output_offsets(r, o);
    par::parallel_for(nchunks, par::grain_for(chunk),
                      [&](int64_t cb, int64_t ce) { fill(parts.data(), at.in_base, cb, ce); });
    finish(at, total_of(parts.data()));
  }
  return rt::Status::Success;
}

// The 2- and 1-norms with the order fixed at compile time: red::Reduction<RedOp::Norm> branches on p for every
// element, which kept the lanes' loop scalar (the 2-norm of 3600 rows of 120 floats took 138 us, their sum 46). The
// same operations in the same order as Reduction<Norm> at that p: the same bits.
template <int kP>
struct NormOf : red::Reduction<RedOp::Norm> {
  template <typename A>
  static red::Acc<A> init(const RedParams&) {
    return {A(0), A(0), 0};
  }
  template <typename A>
  static void push(red::Acc<A>& s, A v, int64_t, const RedParams&) {
    const A x = v < A(0) ? -v : v;
    if constexpr (kP == 2) s.a += x * x;
    else s.a += x;
  }
  template <typename A>
  static void combine(red::Acc<A>& s, const red::Acc<A>& o, const RedParams&) {
    s.a += o.a;
  }
  template <typename A>
  static A project(const red::Acc<A>& s, const RedParams&, A*) {
    if constexpr (kP == 2) return static_cast<A>(std::sqrt(s.a));
    else return s.a;
  }
};

template <RedOp op, typename T>
rt::Status run(const ReduceArgs& r) {
  if constexpr (op == RedOp::Max || op == RedOp::Min) {
    if (r.out2 == nullptr) return run_as<ExtremeValue<op == RedOp::Max>, op, T>(r);
  }
  if constexpr (op == RedOp::Norm) {
    if (r.params.p == 2) return run_as<NormOf<2>, op, T>(r);
    if (r.params.p == 1) return run_as<NormOf<1>, op, T>(r);
  }
  // Variance in double on the sim, as the CPU's WelfordOps: a float32 mean rounded to its ulp loses what sets
  // the variance of data far from zero (1e6 +- 4: Chan's combine of two chunks' means). CUDA keeps float (as
  // torch.cuda).
  if constexpr (op == RedOp::Var && std::is_same_v<red::acc_t<op, T>, float>)
    return run_as<red::Reduction<op>, op, T, double>(r);
  return run_as<red::Reduction<op>, op, T>(r);
}

} // namespace

MT_SIM_ENTRY rt::Status reduce(const ReduceArgs& r, rt::Stream) {
  return red_visit(
      r.op,
      [&](auto op) {
        rt::Status st = rt::report(rt::Status::InvalidValue, "reduce: unsupported input dtype");
        dispatch_dtype(r.in_dtype, [&](auto tag) {
          if constexpr (red::supported<decltype(op)::value, decltype(tag)>())
            st = run<decltype(op)::value, decltype(tag)>(r);
        });
        return st;
      },
      [] { return rt::report(rt::Status::InvalidValue, "reduce: unknown op"); });
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, reduce, (const ReduceArgs& r, rt::Stream s), (r, s))
} // namespace mytorch::sim

namespace mytorch {

bool reduce_supported(RedOp op, DType t) {
  return red_visit(
      op,
      [&](auto op_tag) {
        bool ok = false;
        dispatch_dtype(t, [&](auto tag) { ok = red::supported<decltype(op_tag)::value, decltype(tag)>(); });
        return ok;
      },
      [] { return false; });
}

} // namespace mytorch
#endif
