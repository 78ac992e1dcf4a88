// Reduction family: reduce an input over some dimensions into an output (plus an index or mean output
// for max/min/var_mean), and inclusive scans along one dimension. The reductions and scans are the rows of
// tables/reductions.def; each one's math is one struct below.
//
// Note [Reduction engine]
// The glue splits the input's dimensions into output dims (each with the input stride and the output
// stride) and reduced dims (input stride only). Each output element is the combination of per-thread
// accumulators. A reduction is a struct, as ATen's reduce ops: the accumulator type for an input type
// (acc_t), init, push (one element, with its index), combine (two partial accumulators) and project (the
// result, and Var's mean), each reading the call's RedParams. Sums accumulate in opmath (float for half types, double for double, int64 for
// integers), variance with Welford's update and Chan's combine, arg-reductions keep the first index of
// the extreme value (NaN counts as the extreme, as in ATen). cuda/ spreads the work as Note [CUDA reduction
// plan] says (a block or a thread per output, the reduced elements split over blocks when the outputs are few);
// sim/ does the same work as blocked loops (Note [Sim parallelism]).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/welford.h"

namespace mytorch {

enum class RedOp : int {
#define MT_REDUCTION(name, ...) name,
#include "mytorch/tables/reductions.def"
};
enum class ScanOp : int {
#define MT_SCAN(name, ...) name,
#include "mytorch/tables/reductions.def"
};
// The dtypes column: every real dtype (scans: but bool), or floating only.
enum class RedDtypes : int { All, Float };

constexpr RedDtypes red_dtypes(RedOp op) {
  constexpr RedDtypes rows[] = {
#define MT_REDUCTION(name, dtypes, ...) RedDtypes::dtypes,
#include "mytorch/tables/reductions.def"
  };
  return rows[static_cast<int>(op)];
}
constexpr RedDtypes scan_dtypes(ScanOp op) {
  constexpr RedDtypes rows[] = {
#define MT_SCAN(name, dtypes, ...) RedDtypes::dtypes,
#include "mytorch/tables/reductions.def"
  };
  return rows[static_cast<int>(op)];
}

// A reduction's parameters, what its struct's functions read (besides the accumulators).
struct RedParams {
  double p = 2; // Norm order
  double correction = 1; // Var: divisor is N - correction
  bool take_sqrt = false; // Var -> std
  int64_t count = 0; // reduced elements per output (Mean's divisor)
};

struct ReduceArgs {
  RedOp op = RedOp::Sum;
  DType in_dtype = DType::Float;
  DType out_dtype = DType::Float;
  const void* in = nullptr;
  void* out = nullptr;
  void* out2 = nullptr; // indices (int64) for ArgMax/ArgMin with values, or mean for var_mean
  bool want_values = true; // ArgMax/ArgMin: write values to `out` as well as indices to `out2`
  int out_ndim = 0;
  int64_t out_sizes[kMaxDims] = {};
  int64_t out_in_strides[kMaxDims] = {}; // elements
  int64_t out_strides[kMaxDims] = {}; // elements, for out and out2
  int64_t out2_strides[kMaxDims] = {};
  int red_ndim = 0;
  int64_t red_sizes[kMaxDims] = {};
  int64_t red_in_strides[kMaxDims] = {}; // elements
  int64_t out_numel = 0;
  int64_t red_numel = 0;
  RedParams params; // params.count == red_numel
  // cuda: the first pass's partial accumulators when reduce_plan splits the reduced elements (glue-allocated,
  // reduce_plan(...).workspace_bytes); the sim runtime does not read it.
  void* workspace = nullptr;
};

// Note [CUDA reduction plan]
// How the cuda kernels spread a reduction over the device, decided once here (the glue sizes the workspace with
// it, the launcher follows it):
//  - rows: a block per output element, its threads striding over the reduced elements (16-byte loads when the
//    reduced elements are one contiguous run); used when the reduced elements are innermost in memory, or the
//    outputs are not adjacent;
//  - columns: when adjacent outputs are adjacent in memory and the reduced elements are strided (sum over a
//    leading dimension, bias gradients): a block of kRedColumns x kRedColumnRows threads per 32 (or, 16 bytes a
//    thread for aligned 4-byte types, 128) adjacent outputs, a warp reading one reduced row of them (coalesced),
//    the block's rows combined in shared memory;
//  - splits: when the outputs alone cannot fill the device (fewer blocks than kRedTargetWaves waves of
//    resident blocks), each output's reduced elements are cut into `splits` fixed chunks; the first pass writes
//    a partial accumulator per (output, chunk) to the workspace (just its value for red::kOneValue reductions)
//    and a second pass combines them in chunk order.
//    No atomics: the result depends only on the shape, never on the schedule.
struct ReducePlan {
  bool columns = false;
  int vec = 1; // columns: adjacent outputs per thread, read 16 bytes at a time (4-byte types)
  int64_t splits = 1; // chunks of each output's reduced elements (> 1: two passes)
  int64_t chunk = 0; // reduced elements per chunk
  size_t workspace_bytes = 0; // out_numel x splits partial accumulators
};
constexpr int64_t kRedThreads = 256; // threads of a reduction block
constexpr int64_t kRedBlocksPerSm = 8; // resident blocks of 256 threads per SM (2048 threads)
constexpr int64_t kRedTargetWaves = 2; // a split plan aims at this many waves of resident blocks
constexpr int64_t kRedMinRowChunk = 1024; // reduced elements a block of a split row plan reads at least
constexpr int64_t kRedColumns = 32; // outputs of a column block (a warp's width)
constexpr int64_t kRedColumnRows = 8; // reduced rows a column block reads at once
constexpr int64_t kRedMinColumnChunk = 64; // reduced rows a block of a split column plan reads at least
constexpr int64_t kRedMaxSplits = 65535; // grid.y
constexpr size_t kRedPartialBytes = 24; // the largest partial accumulator (Acc<double>, Acc<int64_t>)

inline ReducePlan reduce_plan(const ReduceArgs& r, int64_t sms) {
  ReducePlan p;
  p.chunk = r.red_numel;
  if (r.out_numel <= 0 || r.red_numel <= 0) return p;
  const bool red_inner = r.red_ndim >= 1 && r.red_in_strides[r.red_ndim - 1] == 1;
  p.columns = !red_inner && r.out_ndim >= 1 && r.out_in_strides[r.out_ndim - 1] == 1;
  if (p.columns && dtype_size(r.in_dtype) == 4 && reinterpret_cast<uintptr_t>(r.in) % 16 == 0 &&
      r.out_sizes[r.out_ndim - 1] % 4 == 0) {
    bool aligned = true; // every group of 4 adjacent outputs starts 16-byte aligned in every reduced row
    for (int d = 0; d < r.red_ndim; ++d) aligned = aligned && r.red_in_strides[d] % 4 == 0;
    for (int d = 0; d + 1 < r.out_ndim; ++d) aligned = aligned && r.out_in_strides[d] % 4 == 0;
    if (aligned) p.vec = 4;
  }
  const int64_t target = kRedTargetWaves * kRedBlocksPerSm * (sms > 0 ? sms : 1);
  const int64_t per_block = kRedColumns * p.vec;
  const int64_t blocks = p.columns ? (r.out_numel + per_block - 1) / per_block : r.out_numel;
  if (blocks >= target) return p;
  const int64_t min_chunk = p.columns ? kRedMinColumnChunk : kRedMinRowChunk;
  int64_t splits = std::min((target + blocks - 1) / blocks, r.red_numel / min_chunk);
  splits = std::min(splits, kRedMaxSplits);
  if (splits <= 1) return p;
  int64_t chunk = (r.red_numel + splits - 1) / splits;
  if (!p.columns) chunk = (chunk + 15) / 16 * 16; // chunks start 16-element aligned (16-byte loads)
  p.splits = (r.red_numel + chunk - 1) / chunk;
  p.chunk = chunk;
  if (p.splits > 1) p.workspace_bytes = static_cast<size_t>(r.out_numel * p.splits) * kRedPartialBytes;
  else p.chunk = r.red_numel;
  return p;
}

struct ScanArgs {
  ScanOp op = ScanOp::CumSum;
  DType dtype = DType::Float; // input and output (the glue casts)
  const void* in = nullptr;
  void* out = nullptr;
  int64_t lines = 0; // independent scans
  int64_t length = 0; // elements per scan
  int outer_ndim = 0;
  int64_t outer_sizes[kMaxDims] = {};
  int64_t outer_in_strides[kMaxDims] = {};
  int64_t outer_out_strides[kMaxDims] = {};
  int64_t in_stride = 1, out_stride = 1; // along the scanned dimension (elements)
  // the indexed scans (cummax, cummin): where the index of each running extreme goes (int64)
  void* indices = nullptr;
  int64_t idx_stride = 1;
  int64_t outer_idx_strides[kMaxDims] = {};
  // cuda: the chunks' published aggregates of a chunked scan (scan_plan(...).workspace_bytes; the sim ignores it)
  void* workspace = nullptr;
};

// Note [CUDA scan plan]
// Lines that are contiguous and longer than kScanShortLine are scanned by blocks of kScanThreads threads, each
// taking a chunk of kScanChunk elements: loaded coalesced into shared memory, scanned per thread and across the
// block, then given the prefix of the chunks before it by a decoupled look-back (single pass: every element is
// read and written once). Block order comes from a ticket, so a chunk only waits for chunks already running. The
// look-back finds the nearest chunk whose inclusive prefix is published and adds the aggregates after it from left
// to right: the same operations, in the same order, as a chain of chunks would do, so the result depends on the
// shape only, never on timing. Other lines (short, or strided: adjacent lines adjacent in memory) take a thread
// per line.
struct ScanPlan {
  bool chunked = false;
  int64_t chunks = 1; // chunks per line
  size_t workspace_bytes = 0; // ScanTile per (line, chunk), then the ticket counter
};
constexpr int64_t kScanThreads = 256;
constexpr int64_t kScanItems = 8;
constexpr int64_t kScanChunk = kScanThreads * kScanItems;
constexpr int64_t kScanShortLine = 64;
constexpr size_t kScanTileBytes = 40; // the largest ScanTile (int64 or double states with their indices, a flag)

inline ScanPlan scan_plan(const ScanArgs& s) {
  ScanPlan p;
  if (s.in_stride != 1 || s.out_stride != 1 || (s.indices != nullptr && s.idx_stride != 1) ||
      s.length <= kScanShortLine || s.lines <= 0) {
    return p;
  }
  const int64_t chunks = (s.length + kScanChunk - 1) / kScanChunk;
  if (s.lines > (int64_t(1) << 31) / chunks) return p; // more blocks than a grid holds: a thread per line
  p.chunked = true;
  p.chunks = chunks;
  if (p.chunks > 1) p.workspace_bytes = static_cast<size_t>(s.lines * p.chunks) * kScanTileBytes + 16;
  return p;
}

// red_visit(op, f, otherwise) / scan_visit: f(std::integral_constant<RedOp, op>{}) for a runtime op, a switch
// over every row (as ew_visit).
template <typename F, typename G>
inline auto red_visit(RedOp op, F&& f, G&& otherwise) {
  switch (op) {
#define MT_REDUCTION(name, ...) \
  case RedOp::name: return f(std::integral_constant<RedOp, RedOp::name>{});
#include "mytorch/tables/reductions.def"
  }
  return otherwise();
}
template <typename F, typename G>
inline auto scan_visit(ScanOp op, F&& f, G&& otherwise) {
  switch (op) {
#define MT_SCAN(name, ...) \
  case ScanOp::name: return f(std::integral_constant<ScanOp, ScanOp::name>{});
#include "mytorch/tables/reductions.def"
  }
  return otherwise();
}

namespace red {

// Whether the kernels take input dtype T (the row's dtypes column; complex never).
template <typename T> constexpr bool real_v = !is_complex_t<T>::value;
template <RedOp op, typename T>
constexpr bool supported() {
  return real_v<T> && (red_dtypes(op) == RedDtypes::All || !std::is_integral_v<T>);
}
template <ScanOp op, typename T>
constexpr bool scan_supported() {
  return real_v<T> && !std::is_same_v<T, bool> && (scan_dtypes(op) == RedDtypes::All || !std::is_integral_v<T>);
}

// Offset of reduced element j (row-major over the reduced dims: the last one moves fastest).
MT_HOST_DEVICE inline int64_t red_offset(const ReduceArgs& r, int64_t j) {
  if (r.red_ndim == 1) return j * r.red_in_strides[0]; // the common case: no division
  int64_t off = 0;
  for (int d = r.red_ndim - 1; d >= 0; --d) {
    off += (j % r.red_sizes[d]) * r.red_in_strides[d];
    j /= r.red_sizes[d];
  }
  return off;
}

// Where output element o reads its input and writes its results (row-major over the output dims).
struct RedOffsets { int64_t in_base = 0, out = 0, out2 = 0; };
MT_HOST_DEVICE inline RedOffsets red_output_offsets(const ReduceArgs& r, int64_t o) {
  RedOffsets off;
  for (int d = r.out_ndim - 1; d >= 0; --d) {
    const int64_t i = o % r.out_sizes[d];
    o /= r.out_sizes[d];
    off.in_base += i * r.out_in_strides[d];
    off.out += i * r.out_strides[d];
    off.out2 += i * r.out2_strides[d];
  }
  return off;
}

// Acc, every reduction's accumulator, is in welford.h.

template <typename T>
MT_HOST_DEVICE inline bool is_nan(T v) {
  return v != v;
}

// Integral sums and products accumulate in int64, the rest in opmath.
template <typename T>
using sum_acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, ew::opmath_t<T>>;

// What a reduction writes to out2 besides its value: nothing, the index of the value (max/min/argmax/argmin),
// or the mean (var/std with their mean).
enum class Out2 : int { None, Index, Mean };

// Reduction<op>: one specialization per row of tables/reductions.def; a row without one does not compile.
// kOneValue (optional, default false): push and combine read and write the state's `a` only, so a loop may keep
// just that value per accumulator (the sim's vectorised lanes).
template <RedOp op>
struct Reduction;

#define MT_RED_INIT template <typename A> MT_HOST_DEVICE static Acc<A> init
#define MT_RED_PUSH template <typename A> MT_HOST_DEVICE static void push
#define MT_RED_COMBINE template <typename A> MT_HOST_DEVICE static void combine
#define MT_RED_PROJECT template <typename A> MT_HOST_DEVICE static A project

template <> struct Reduction<RedOp::Sum> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = sum_acc_t<T>;
  MT_RED_INIT(const RedParams&) { return {A(0), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a += v; }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.a += o.a; }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
// Sum with NaNs counted as zero (integers have none).
template <> struct Reduction<RedOp::NanSum> : Reduction<RedOp::Sum> {
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a += v != v ? A(0) : v; }
};
template <> struct Reduction<RedOp::Mean> : Reduction<RedOp::Sum> {
  template <typename T> using acc_t = ew::opmath_t<T>;
  MT_RED_PROJECT(const Acc<A>& s, const RedParams& r, A*) { return s.a / static_cast<A>(r.count); }
};
template <> struct Reduction<RedOp::Prod> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = sum_acc_t<T>;
  MT_RED_INIT(const RedParams&) { return {A(1), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a *= v; }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.a *= o.a; }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
// The extreme value and the index of its first occurrence; NaN wins, and among equal values (or NaNs) the
// first index. n < 0: nothing pushed yet.
template <bool kMax>
struct Extreme {
  static constexpr Out2 kOut2 = Out2::Index;
  template <typename T> using acc_t = ew::opmath_t<T>;
  MT_RED_INIT(const RedParams&) {
    return {kMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max(), A(0), -1};
  }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t idx, const RedParams&) {
    if (s.n < 0 || (!is_nan(s.a) && (is_nan(v) || (kMax ? v > s.a : v < s.a)))) {
      s.a = v;
      s.n = idx;
    }
  }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) {
    if (o.n < 0) return;
    if (s.n < 0) {
      s = o;
      return;
    }
    const bool better = is_nan(o.a) ? !is_nan(s.a) || o.n < s.n : (!is_nan(s.a) && (kMax ? o.a > s.a : o.a < s.a));
    const bool tie = !is_nan(o.a) && !is_nan(s.a) && o.a == s.a && o.n < s.n;
    if (better || tie) s = o;
  }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
template <> struct Reduction<RedOp::Max> : Extreme<true> {};
template <> struct Reduction<RedOp::Min> : Extreme<false> {};
template <> struct Reduction<RedOp::ArgMax> : Extreme<true> {};
template <> struct Reduction<RedOp::ArgMin> : Extreme<false> {};
// all / any / count_nonzero accumulate in double: exact for counts up to 2^53 and for comparisons with zero in
// every dtype.
template <> struct Reduction<RedOp::All> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = double;
  MT_RED_INIT(const RedParams&) { return {A(1), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a = (s.a != A(0) && v != A(0)) ? A(1) : A(0); }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.a = (s.a != A(0) && o.a != A(0)) ? A(1) : A(0); }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
template <> struct Reduction<RedOp::Any> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = double;
  MT_RED_INIT(const RedParams&) { return {A(0), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a = (s.a != A(0) || v != A(0)) ? A(1) : A(0); }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.a = (s.a != A(0) || o.a != A(0)) ? A(1) : A(0); }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
// The running XOR of 64-bit patterns, held in a double (floating inputs) or an int64 (integers).
MT_HOST_DEVICE inline int64_t xor_bits(int64_t a, int64_t b) { return a ^ b; }
MT_HOST_DEVICE inline double xor_bits(double a, double b) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(__double_as_longlong(a) ^ __double_as_longlong(b));
#else
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  x ^= y;
  double r;
  std::memcpy(&r, &x, sizeof r);
  return r;
#endif
}
// hash_tensor's mode 0 (ATen's XorSumOps): the XOR of the elements' bits, a floating element's as the double it
// converts to, an integer's (and a bool's) widened to 64 bits. Pushed and combined in any order, the same bits; the
// result's pattern is read as uint64 by the glue (a double output for floating inputs, an int64 one for integers).
template <> struct Reduction<RedOp::XorSum> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  MT_RED_INIT(const RedParams&) { return {A(0), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.a = xor_bits(s.a, v); }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.a = xor_bits(s.a, o.a); }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return s.a; }
};
template <> struct Reduction<RedOp::CountNonzero> {
  static constexpr Out2 kOut2 = Out2::None;
  template <typename T> using acc_t = double;
  MT_RED_INIT(const RedParams&) { return {A(0), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { s.n += v != A(0); }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { s.n += o.n; }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams&, A*) { return static_cast<A>(s.n); }
};
// The vector p-norm (floating inputs only): sum |x|^p, then ^(1/p); max / min |x| for +-inf; the count of
// non-zeros for p = 0.
template <> struct Reduction<RedOp::Norm> {
  static constexpr Out2 kOut2 = Out2::None;
  static constexpr bool kOneValue = true;
  template <typename T> using acc_t = ew::opmath_t<T>;
  MT_RED_INIT(const RedParams& r) {
    if (r.p == -INFINITY) return {static_cast<A>(INFINITY), A(0), 0}; // the -inf norm's identity
    return {A(0), A(0), 0};
  }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams& r) {
    const A x = v < A(0) ? -v : v;
    if (r.p == 2) s.a += x * x;
    else if (r.p == 1) s.a += x;
    else if (r.p == INFINITY) s.a = (is_nan(x) || x > s.a) ? x : s.a;
    else if (r.p == -INFINITY) s.a = (is_nan(x) || x < s.a) ? x : s.a;
    else if (r.p == 0) s.a += x != A(0) ? A(1) : A(0);
    else s.a += static_cast<A>(std::pow(x, static_cast<A>(r.p)));
  }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams& r) {
    if (r.p == INFINITY) s.a = (is_nan(o.a) || o.a > s.a) ? o.a : s.a;
    else if (r.p == -INFINITY) s.a = (is_nan(o.a) || o.a < s.a) ? o.a : s.a;
    else s.a += o.a;
  }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams& r, A*) {
    if (r.p == 2) return static_cast<A>(std::sqrt(s.a));
    if (r.p == 1 || r.p == 0 || r.p == INFINITY || r.p == -INFINITY) return s.a;
    return static_cast<A>(std::pow(s.a, static_cast<A>(1.0 / r.p)));
  }
};
// Variance (std with take_sqrt) by Welford's update and Chan et al.'s combine; project also gives the mean.
template <> struct Reduction<RedOp::Var> {
  static constexpr Out2 kOut2 = Out2::Mean;
  template <typename T> using acc_t = ew::opmath_t<T>;
  MT_RED_INIT(const RedParams&) { return {A(0), A(0), 0}; }
  MT_RED_PUSH(Acc<A>& s, A v, int64_t, const RedParams&) { welford_push(s, v); }
  MT_RED_COMBINE(Acc<A>& s, const Acc<A>& o, const RedParams&) { welford_combine(s, o); }
  MT_RED_PROJECT(const Acc<A>& s, const RedParams& r, A* mean) {
    if (mean) *mean = s.n ? s.a : static_cast<A>(NAN);
    A div = static_cast<A>(s.n) - static_cast<A>(r.correction);
    if (div < A(0)) div = A(0);
    const A v = s.b / div; // 0/0 -> NaN, m2/0 -> inf, as ATen
    return r.take_sqrt ? static_cast<A>(std::sqrt(v)) : v;
  }
};

#undef MT_RED_INIT
#undef MT_RED_PUSH
#undef MT_RED_COMBINE
#undef MT_RED_PROJECT

template <typename R, typename = void>
constexpr bool kOneValue = false;
template <typename R>
constexpr bool kOneValue<R, std::void_t<decltype(R::kOneValue)>> = R::kOneValue;

template <RedOp op, typename T>
using acc_t = typename Reduction<op>::template acc_t<T>;

// Scan<op>: one specialization per MT_SCAN row: the identity and the combine, in int64 for integers and opmath
// otherwise.
template <ScanOp op>
struct Scan;
template <> struct Scan<ScanOp::CumSum> {
  template <typename A> MT_HOST_DEVICE static A init() { return A(0); }
  template <typename A> MT_HOST_DEVICE static A combine(A acc, A v) { return acc + v; }
};
template <> struct Scan<ScanOp::CumProd> {
  template <typename A> MT_HOST_DEVICE static A init() { return A(1); }
  template <typename A> MT_HOST_DEVICE static A combine(A acc, A v) { return acc * v; }
};
// The running maximum (minimum) and the index of the element it is: as ATen's cummax_cummin_helper, a later
// element wins on equality and every NaN wins (so the index is the last NaN's).
template <bool kMax>
struct CumExtreme {
  static constexpr bool kIndexed = true;
  template <typename A> MT_HOST_DEVICE static A init() { return A(0); }
  template <typename A> MT_HOST_DEVICE static A combine(A acc, A) { return acc; } // unused: the policy's combine
  template <typename A> MT_HOST_DEVICE static bool later_wins(A earlier, A later) {
    return later != later || (earlier == earlier && (kMax ? later >= earlier : later <= earlier));
  }
};
template <> struct Scan<ScanOp::CumMax> : CumExtreme<true> {};
template <> struct Scan<ScanOp::CumMin> : CumExtreme<false> {};
// log(exp(acc) + exp(v)), as ATen's _log_add_exp_helper: NaN propagates, equal infinities stay.
template <> struct Scan<ScanOp::LogCumSumExp> {
  template <typename A> MT_HOST_DEVICE static A init() { return -std::numeric_limits<A>::infinity(); }
  template <typename A> MT_HOST_DEVICE static A combine(A acc, A v) {
    const A mn = v != v ? v : (v < acc ? v : acc);
    const A mx = v != v ? v : (acc < v ? v : acc);
    if (mn != mx || (mn - mn == mn - mn)) return std::log1p(std::exp(mn - mx)) + mx; // mn - mn: NaN iff mn inf
    return acc;
  }
};

// The running state of a scan (Note [CUDA scan plan]): the accumulated value, and for the indexed rows the index
// of the element it is. identity() is neutral (combine(identity(), x) == x exactly), make(x, i) the state of one
// element, combine(earlier, later) associative.
template <typename S, typename = void>
constexpr bool kScanIndexed = false;
template <typename S>
constexpr bool kScanIndexed<S, std::void_t<decltype(S::kIndexed)>> = S::kIndexed;
template <ScanOp op>
constexpr bool scan_indexed() {
  return kScanIndexed<Scan<op>>;
}
template <ScanOp op, typename A, bool kIndexed = scan_indexed<op>()>
struct ScanPolicy {
  using State = A;
  MT_HOST_DEVICE static State identity() { return Scan<op>::template init<A>(); }
  MT_HOST_DEVICE static State make(A x, int64_t) { return x; }
  MT_HOST_DEVICE static State combine(State a, State b) { return Scan<op>::combine(a, b); }
  MT_HOST_DEVICE static A value(State v) { return v; }
  MT_HOST_DEVICE static int64_t index(State) { return 0; }
};
template <typename A>
struct IndexedState {
  A v;
  int64_t i; // < 0: no element yet
};
template <ScanOp op, typename A>
struct ScanPolicy<op, A, true> {
  using State = IndexedState<A>;
  MT_HOST_DEVICE static State identity() { return {A(0), -1}; }
  MT_HOST_DEVICE static State make(A x, int64_t i) { return {x, i}; }
  MT_HOST_DEVICE static State combine(State a, State b) {
    if (b.i < 0) return a;
    if (a.i < 0) return b;
    return Scan<op>::later_wins(a.v, b.v) ? b : a;
  }
  MT_HOST_DEVICE static A value(State v) { return v.v; }
  MT_HOST_DEVICE static int64_t index(State v) { return v.i; }
};

// Where line l starts in the input, the output and the indices (row-major over the outer dims).
struct ScanLine { int64_t in = 0, out = 0, idx = 0; };
MT_HOST_DEVICE inline ScanLine scan_line_offsets(const ScanArgs& s, int64_t l) {
  ScanLine o;
  for (int d = s.outer_ndim - 1; d >= 0; --d) {
    const int64_t i = l % s.outer_sizes[d];
    l /= s.outer_sizes[d];
    o.in += i * s.outer_in_strides[d];
    o.out += i * s.outer_out_strides[d];
    o.idx += i * s.outer_idx_strides[d];
  }
  return o;
}

// Scan line l, in order.
template <ScanOp op, typename T>
MT_HOST_DEVICE inline void scan_line(const ScanArgs& s, int64_t l) {
  const ScanLine at = scan_line_offsets(s, l);
  const T* in = static_cast<const T*>(s.in) + at.in;
  T* out = static_cast<T*>(s.out) + at.out;
  int64_t* idx = s.indices ? static_cast<int64_t*>(s.indices) + at.idx : nullptr;
  using A = sum_acc_t<T>;
  using P = ScanPolicy<op, A>;
  typename P::State acc = P::identity();
  for (int64_t i = 0; i < s.length; ++i) {
    acc = P::combine(acc, P::make(static_cast<A>(in[i * s.in_stride]), i));
    out[i * s.out_stride] = static_cast<T>(P::value(acc));
    if constexpr (scan_indexed<op>()) idx[i * s.idx_stride] = P::index(acc);
  }
}

} // namespace red

// Whether the kernels take input dtype t for `op` (the row's dtypes column; the same on both runtimes).
bool reduce_supported(RedOp op, DType t);

MT_LAUNCHER(reduce, (const ReduceArgs& r, rt::Stream stream), (r, stream))
MT_LAUNCHER(scan, (const ScanArgs& s, rt::Stream stream), (s, stream))

} // namespace mytorch
