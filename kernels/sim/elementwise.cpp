// Sim twin of cuda/elementwise*.cu: each op's functor (ops_math.h) in plain loops over the strided description,
// for every row of the pointwise table (Note [Op tables] in ew_ops.h).
#include <algorithm>
#include <cstring>

#include "mytorch/elementwise.h"
#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"
#include "mytorch/sim_walk.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

using walk::for_each_run;

#if MT_SIM_FAST
// The dtypes with dense loops: the floating ones (each dense loop is one instantiation per op and dtype, so the
// integer dtypes, rare in the hot paths, keep the strided loop and the build time stays bounded).
template <typename T>
constexpr bool kDense = std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;
// The integer and bool dtypes get the dense loops (contiguous operands only) for the comparisons, bitwise and
// logical ops and the cheap arithmetic: masks and indices are built from these, and the strided loop moved an
// element in about 1.5 ns (a bitwise_and of int32 at 0.36x the CPU).
template <EwOp op, typename T>
constexpr bool kDenseInt =
    std::is_integral_v<T> &&
    (ew_group(op) == EwGroup::Logic || op == EwOp::Add || op == EwOp::Sub || op == EwOp::Mul || op == EwOp::Maximum ||
     op == EwOp::Minimum || op == EwOp::BitNot || op == EwOp::LogicalNot || op == EwOp::Neg || op == EwOp::Abs);

// Whether an operand's elements lie one after another in the shape's element order.
bool dense(const StridedShape& s, const int64_t* st, int elem) {
  int64_t expect = elem;
  for (int d = 0; d < s.ndim; ++d) {
    if (s.sizes[d] != 1 && st[d] != expect) return false;
    expect *= s.sizes[d];
  }
  return true;
}

// The dense loops (Note [Sim parallelism]: each piece writes its own outputs). One loop per pattern of tensor
// and scalar operands, so that every load is a plain indexed load the compiler vectorises (the functors' math
// calls too: Note [Sim vector math]). In: the element type of the arrays (T, or float for a Half block).
template <EwOp op, typename T, typename Out, typename O, typename In = T>
void dense_unary(Out* o, const In* x, const EwParams p, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), O(0), O(0), p));
}

// The fmod rows' vector form (Note [Vectorised fmod]): f_fast on every element, then the exact functor again
// where the operands are outside the range the fast form is exact for (rare: |a| >= 2^24 |b|, b zero or not
// finite, NaN).
template <EwOp op, typename T, typename Out, typename O, typename In>
void dense_fmod(Out* o, const In* x, const In* y, O sx, O sy, const EwParams p, int64_t b, int64_t e) {
  using F = ew::Fn<op>;
  constexpr int64_t kBlock = 1024;  // the redo reads the operands again from L1
  for (int64_t c = b; c < e; c += kBlock) {
    const int64_t ce = std::min(e, c + kBlock);
    if (x && y) {
      for (int64_t i = c; i < ce; ++i)
        o[i] = static_cast<Out>(F::template f_fast<T, O, true>(static_cast<O>(x[i]), static_cast<O>(y[i]), p));
    } else if (x) {
      for (int64_t i = c; i < ce; ++i)
        o[i] = static_cast<Out>(F::template f_fast<T, O, true>(static_cast<O>(x[i]), sy, p));
    } else {
      for (int64_t i = c; i < ce; ++i)
        o[i] = static_cast<Out>(F::template f_fast<T, O, true>(sx, static_cast<O>(y[i]), p));
    }
    int out_of_range = 0;  // a vectorised test first: the scalar redo only for a block that needs it
    for (int64_t i = c; i < ce; ++i)
      out_of_range |= !ew::fmod_in_range(x ? static_cast<O>(x[i]) : sx, y ? static_cast<O>(y[i]) : sy);
    if (!out_of_range) continue;
    for (int64_t i = c; i < ce; ++i) {
      const O u = x ? static_cast<O>(x[i]) : sx, v = y ? static_cast<O>(y[i]) : sy;
      if (!ew::fmod_in_range(u, v)) o[i] = static_cast<Out>(ew::apply<op, T>(u, v, O(0), p));
    }
  }
}

template <EwOp op, typename T, typename Out, typename O, typename In = T>
void dense_binary(Out* o, const In* x, const In* y, O sx, O sy, const EwParams p, int64_t b, int64_t e) {
  if constexpr (ew::HasFastFmod<op>::value && std::is_same_v<O, float>) {
    return dense_fmod<op, T, Out, O, In>(o, x, y, sx, sy, p, b, e);
  }
  if (x && y) {
    for (int64_t i = b; i < e; ++i)
      o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), static_cast<O>(y[i]), O(0), p));
  } else if (x) {
    for (int64_t i = b; i < e; ++i) o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), sy, O(0), p));
  } else {
    for (int64_t i = b; i < e; ++i) o[i] = static_cast<Out>(ew::apply<op, T>(sx, static_cast<O>(y[i]), O(0), p));
  }
}

// The ternary rows (clamp, lerp, addcmul, addcdiv) on dense float or double tensors, the second or third operand
// possibly a scalar (kScalar: its index; clamp's absent bound, lerp's scalar weight): one loop, no blocks.
template <EwOp op, typename T, typename Out, typename O, int kScalar>
void dense_ternary(Out* o, const T* x, const T* y, const T* z, O s, const EwParams p, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const O v1 = kScalar == 1 ? s : static_cast<O>(y[i]), v2 = kScalar == 2 ? s : static_cast<O>(z[i]);
    o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), v1, v2, p));
  }
}

// Half operands in blocks (Note [Sim row loops]): converted to float with F16C, the float loops above on the block,
// converted back (bfloat16 converts by shifts inside the loops above: blocks measured slower for it).
#if defined(MT_SIM_ISA_AVX512)
// bfloat16's cheap ops in the AVX-512 compile (Note [Sim AVX-512 dense loops]): one loop over the elements, c10's
// conversions written as integer operations (the same bits: a shift in, ties to even and every NaN to 0x7fc0 out),
// which GCC vectorises 16 wide whole. Through 16-element blocks as below it stored the functor's results one float
// at a time and read them back as one vector, a failed store forward per block (bfloat16 mul at 0.25x the CPU).
template <EwOp op>
void dense_bf16(c10::BFloat16* o, const c10::BFloat16* x, const c10::BFloat16* y, float sx, float sy, int n,
                const EwParams p, int64_t b, int64_t e) {
  using T = c10::BFloat16;
  auto* ob = reinterpret_cast<uint16_t*>(o);
  const auto* xb = reinterpret_cast<const uint16_t*>(x);
  const auto* yb = reinterpret_cast<const uint16_t*>(y);
  if (n == 1) {
    for (int64_t i = b; i < e; ++i)
      ob[i] = vec::float_to_bf16_bits(ew::apply<op, T>(vec::bf16_bits_to_float(xb[i]), 0.f, 0.f, p));
  } else if (x && y) {
    for (int64_t i = b; i < e; ++i)
      ob[i] = vec::float_to_bf16_bits(
          ew::apply<op, T>(vec::bf16_bits_to_float(xb[i]), vec::bf16_bits_to_float(yb[i]), 0.f, p));
  } else if (x) {
    for (int64_t i = b; i < e; ++i)
      ob[i] = vec::float_to_bf16_bits(ew::apply<op, T>(vec::bf16_bits_to_float(xb[i]), sy, 0.f, p));
  } else {
    for (int64_t i = b; i < e; ++i)
      ob[i] = vec::float_to_bf16_bits(ew::apply<op, T>(sx, vec::bf16_bits_to_float(yb[i]), 0.f, p));
  }
}
#endif

template <EwOp op, typename T, typename Out>
void dense_half(Out* o, const T* x, const T* y, float sx, float sy, int n, const EwParams p, int64_t b, int64_t e) {
  constexpr int64_t kBlock = 512;
  float xb[kBlock], yb[kBlock];
  using OB = std::conditional_t<std::is_same_v<Out, bool>, bool, float>;
  OB ob[kBlock];
  // The math-library functors (exp, erf, tanh...: the UnaryFloat and Nn groups) 64 at a time: an 8-element loop is
  // unrolled into 8 scalar libm calls, a 64-element one vectorises with libmvec.
  constexpr EwGroup g = ew_group(op);
  constexpr bool libm = g == EwGroup::UnaryFloat || g == EwGroup::Nn || op == EwOp::Atan2 || op == EwOp::Hypot ||
                        op == EwOp::Logaddexp || op == EwOp::Logaddexp2 || op == EwOp::Pow;  // Note [pow in float]
#if defined(MT_SIM_ISA_AVX512)
  if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<Out, T> && !libm) {
    return dense_bf16<op>(o, x, y, sx, sy, n, p, b, e);
  }
#endif
  if constexpr (!std::is_same_v<Out, bool>) {
    // Arithmetic, logic and the cheap unary ops 8 at a time, in registers: one conversion per operand, the functor
    // on 8 floats, one conversion back (512-element blocks went through L1 three times: half mul at 0.69x the CPU,
    // 1.38x this way).
    constexpr int64_t kSmall = libm ? 64 : 8;
    for (; b + kSmall <= e; b += kSmall) {
      float xs[kSmall], ys[kSmall], os[kSmall];
      if (x) vec::to_opmath(x + b, xs, kSmall);
      if (n > 1 && y) vec::to_opmath(y + b, ys, kSmall);
      if (n == 1) dense_unary<op, T, float, float, float>(os, xs, p, 0, kSmall);
      else dense_binary<op, T, float, float, float>(os, x ? xs : nullptr, y ? ys : nullptr, sx, sy, p, 0, kSmall);
      vec::from_opmath(os, o + b, kSmall);
    }
  }
  for (int64_t i = b; i < e; i += kBlock) {
    const int64_t m = std::min(kBlock, e - i);
    if (x) vec::to_opmath(x + i, xb, m);
    if (n > 1 && y) vec::to_opmath(y + i, yb, m);
    if (n == 1) dense_unary<op, T, OB, float, float>(ob, xb, p, 0, m);
    else dense_binary<op, T, OB, float, float>(ob, x ? xb : nullptr, y ? yb : nullptr, sx, sy, p, 0, m);
    if constexpr (std::is_same_v<Out, bool>) std::copy(ob, ob + m, o + i);
    else vec::from_opmath(ob, o + i, m);
  }
}

// The strided path of the dense dtypes (Note [Sim strided walks]): each run along dimension 0, or each tile of
// dimensions 0 and 1 where an operand is contiguous along 1, gathered into opmath blocks of at most kTile^2
// elements, the dense loops above on the blocks (vectorised whatever the strides), the results stored through the
// output's strides. The same functors on the same opmath values as the dense path, so a strided operand gives the
// bits a contiguous one gives.
#if !defined(MT_SIM_ISA_AVX512)
template <EwOp op, typename T, typename Out, typename O, int n>
void strided_blocks(const ElementwiseArgs& a, char* out, const char* const* in, const int64_t* const* st, const O* sval,
                    int64_t grain) {
  using OB = std::conditional_t<std::is_same_v<Out, bool>, bool, O>;
  constexpr bool masked = ew_has_mask(op);  // operand 0 is a bool mask (where)
  constexpr int64_t kB = walk::kTile * walk::kTile;
  // The parameters by value: read through `a` (a reference), GCC reloaded them from memory for every element and
  // kept the loops below scalar (threshold on a transposed operand: 0.03x the CPU).
  const EwParams prm = a.p;
  auto block = [&](const int64_t* off, int64_t n0, int64_t n1, const int64_t* s0, const int64_t* s1) {
    const EwParams p = prm;
    O vb[n][kB];
    OB ob[kB];
    const int64_t m = n0 * n1;
    // A run (n1 == 1) of an operand already in opmath and contiguous is read where it is, and a contiguous opmath
    // output written where it is, unless it is an input too (in place): no copies through the blocks (a memcpy
    // each way cost as much as the op on runs of 120 floats).
    const O* v[n];
    OB* o = ob;
    // (a block of whole short runs is one run too where an operand's runs follow each other in memory)
    auto one_run = [&](int k, int64_t elem) { return s0[k] == elem && (n1 == 1 || s1[k] == n0 * elem); };
    if constexpr (std::is_same_v<Out, OB>) {
      if (one_run(0, sizeof(Out))) o = reinterpret_cast<OB*>(out + off[0]);
    }
    for (int k = 0; k < n; ++k) {
      v[k] = vb[k];
      if constexpr (std::is_same_v<T, O>) {
        if (st[k + 1] && !(masked && k == 0) && one_run(k + 1, sizeof(T))) {
          v[k] = reinterpret_cast<const O*>(in[k] + off[k + 1]);
          const char *vb0 = reinterpret_cast<const char*>(v[k]), *o0 = reinterpret_cast<const char*>(o);
          if (vb0 < o0 + m * sizeof(OB) && o0 < vb0 + m * sizeof(O)) o = ob;  // overlaps the output: buffered
          continue;
        }
      }
      if (!st[k + 1]) {
        std::fill(vb[k], vb[k] + m, sval[k]);  // the loops below read every operand
        continue;
      }
      const char* base = in[k] + off[k + 1];
      if (!(masked && k == 0) && n1 > 1 && one_run(k + 1, sizeof(T))) {
        vec::to_opmath(reinterpret_cast<const T*>(base), vb[k], m);
        continue;
      }
      if (!(masked && k == 0) && n0 < 8 && n1 > 1) {  // short runs: one strided loop per position in the run, not
        // a loop's set-up per run of 3 (x[..., None] + y: 0.24x the CPU)
        for (int64_t i = 0; i < n0; ++i) {
          const char* col = base + i * s0[k + 1];
          const int64_t s = s1[k + 1];
          for (int64_t j = 0; j < n1; ++j)
            vb[k][j * n0 + i] = static_cast<O>(mt_load(reinterpret_cast<const T*>(col + j * s)));
        }
        continue;
      }
      for (int64_t j = 0; j < n1; ++j) {
        const char* row = base + j * s1[k + 1];
        O* b = vb[k] + j * n0;
        // an operand contiguous along the run (the others broadcast or strided) in plain loops that vectorise
        if (masked && k == 0 && s0[1] == 1) {
          const unsigned char* r = reinterpret_cast<const unsigned char*>(row);  // mt_load's reading of a bool
          for (int64_t i = 0; i < n0; ++i) b[i] = static_cast<O>(r[i] != 0);
        } else if (masked && k == 0) {
          for (int64_t i = 0; i < n0; ++i)
            b[i] = static_cast<O>(mt_load(reinterpret_cast<const bool*>(row + i * s0[1])));
        } else if (s0[k + 1] == static_cast<int64_t>(sizeof(T))) {
          vec::to_opmath(reinterpret_cast<const T*>(row), b, n0);
        } else if (s0[k + 1] == 0) {  // broadcast along the run (x / x.sum(-1, keepdim=True)): a fill that vectorises
          std::fill(b, b + n0, static_cast<O>(mt_load(reinterpret_cast<const T*>(row))));
        } else {
          for (int64_t i = 0; i < n0; ++i)
            b[i] = static_cast<O>(mt_load(reinterpret_cast<const T*>(row + i * s0[k + 1])));
        }
      }
    }
    // Loops of their own, every operand a block (a scalar one filled): sharing dense_half's instantiations of
    // dense_unary/dense_binary changed how GCC compiled those (bfloat16 minimum went from 0.8x the CPU to 0.09x).
    if constexpr (n == 1) {
      for (int64_t q = 0; q < m; ++q) o[q] = static_cast<OB>(ew::apply<op, T>(v[0][q], O(0), O(0), p));
    } else if constexpr (n == 2 && ew::HasFastFmod<op>::value && std::is_same_v<O, float>) {
      dense_fmod<op, T, OB, O, O>(o, v[0], v[1], O(0), O(0), p, 0, m);
    } else if constexpr (n == 2) {
      for (int64_t q = 0; q < m; ++q) o[q] = static_cast<OB>(ew::apply<op, T>(v[0][q], v[1][q], O(0), p));
    } else {
      for (int64_t q = 0; q < m; ++q) o[q] = static_cast<OB>(ew::apply<op, T>(v[0][q], v[1][q], v[2][q], p));
    }
    if (o != ob) return;  // written in place
    if (!std::is_same_v<Out, bool> && n1 > 1 && one_run(0, sizeof(Out))) {
      vec::from_opmath(ob, reinterpret_cast<Out*>(out + off[0]), m);
      return;
    }
    for (int64_t j = 0; j < n1; ++j) {
      char* row = out + off[0] + j * s1[0];
      if (s0[0] == static_cast<int64_t>(sizeof(Out)) && !std::is_same_v<Out, bool>) {
        vec::from_opmath(ob + j * n0, reinterpret_cast<Out*>(row), n0);
        continue;
      }
      for (int64_t i = 0; i < n0; ++i) *reinterpret_cast<Out*>(row + i * s0[0]) = static_cast<Out>(ob[j * n0 + i]);
    }
  };
  int es[4] = {int(sizeof(Out)), int(sizeof(T)), int(sizeof(T)), int(sizeof(T))};
  if (masked) es[1] = 1;
  // tiles, or blocks of whole short runs (x[..., None] + y with a last dim of 3), not a block a run
  const bool tiles = walk::wants_tiles(a.shape, st, es, 1 + n);
  if (tiles || walk::short_runs(a.shape)) {
    int64_t s0[4] = {}, s1[4] = {};
    for (int k = 0; k <= n; ++k) {
      s0[k] = st[k] ? st[k][0] : 0;
      s1[k] = st[k] ? st[k][1] : 0;
    }
    const auto fn = [&](const int64_t* off, int64_t n0, int64_t n1) { block(off, n0, n1, s0, s1); };
    if (tiles) walk::for_each_tile(a.shape, st, 1 + n, 1, fn);
    else walk::for_each_short_run_block(a.shape, st, 1 + n, 1, fn);
    return;
  }
  par::parallel_for(a.shape.numel, grain, [&](int64_t b, int64_t e) {
    for_each_run(a.shape, st, 1 + n, b, e, [&](const int64_t* off, int64_t cnt, const int64_t* s) {
      const int64_t none[4] = {0, 0, 0, 0};
      for (int64_t c = 0; c < cnt; c += kB) {
        int64_t o[4] = {0, 0, 0, 0};
        for (int k = 0; k <= n; ++k) o[k] = off[k] + c * s[k];
        block(o, std::min(kB, cnt - c), 1, s, none);
      }
    });
  });
}

#endif  // !MT_SIM_ISA_AVX512
#endif

// A call's operands as the loops read them: an operand broadcast from one element (a 0-dim device tensor, every
// stride 0) read once and passed as a scalar operand, so that the dense loops take the call (prelu's 0-dim weight
// went through the strided blocks at 0.19x); st[k + 1] is null for a scalar operand k.
template <EwOp op, typename T>
struct Operands {
  using O = ew::opmath_t<T>;
  static constexpr int n = ew_arity(op);
  char* out;
  const char* in[3];
  O sval[3] = {O(0), O(0), O(0)};
  bool scal[3];
  const int64_t* st[4];

  explicit Operands(const ElementwiseArgs& a)
      : out(static_cast<char*>(a.out.data)),
        in{static_cast<const char*>(a.in[0].data), static_cast<const char*>(a.in[1].data),
           static_cast<const char*>(a.in[2].data)} {
    constexpr bool masked = ew_has_mask(op);
    for (int k = 0; k < n; ++k) {
      if (!a.is_scalar[k]) continue;
      if (masked && k == 0) {
        bool m = false;
        std::memcpy(&m, a.scalar[0], 1);
        sval[0] = static_cast<O>(m);
      } else if (masked) {
        T v;
        std::memcpy(&v, a.scalar[k], sizeof(T));  // where's values are in the compute dtype
        sval[k] = static_cast<O>(v);
      } else {
        std::memcpy(&sval[k], a.scalar[k], sizeof(O));  // arithmetic scalars stay in opmath precision
      }
    }
    scal[0] = a.is_scalar[0];
    scal[1] = n > 1 && a.is_scalar[1];
    scal[2] = n > 2 && a.is_scalar[2];
    for (int k = 0; n > 1 && k < n && a.shape.numel > 1; ++k) {  // a unary op keeps its (strided) loop
      if (scal[k]) continue;
      bool one = true;
      for (int d = 0; d < a.shape.ndim; ++d) one = one && (a.shape.sizes[d] == 1 || a.in[k].strides[d] == 0);
      if (!one) continue;
      if (masked && k == 0) sval[0] = static_cast<O>(mt_load(static_cast<const bool*>(a.in[0].data)));
      else sval[k] = static_cast<O>(mt_load(static_cast<const T*>(a.in[k].data)));
      scal[k] = true;
    }
    st[0] = a.out.strides;
    st[1] = scal[0] ? nullptr : a.in[0].strides;
    st[2] = n > 1 && !scal[1] ? a.in[1].strides : nullptr;
    st[3] = n > 2 && !scal[2] ? a.in[2].strides : nullptr;
  }
};

#if MT_SIM_FAST
// Note [Sim AVX-512 dense loops]
// The dense loops: every tensor operand and the output contiguous (one or two operands, no mask). The range is
// split over the threads at multiples of kDenseAlign elements, so that an element takes the vector body or the
// remainder loop (the libm call, a narrower libmvec variant) by its index alone, whatever the thread count: the
// same bits at 1, 2 and 4 threads for the math functions too. This is the whole of the AVX-512 compile
// (sim_isa.h): its loops are these, instantiated for float, half and bfloat16 only; every other call of that
// compile's process goes to the AVX2 variant (the strided blocks, the integer and float64 loops: 4.5 minutes
// of compile for the whole file, which the build time on 2 cores does not afford).
// Returns whether the call was one of these (and ran).
constexpr int64_t kDenseAlign = 64;

template <EwOp op, typename T>
bool run_dense(const ElementwiseArgs& a, const Operands<op, T>& q) {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  constexpr int n = ew_arity(op);
  constexpr bool masked = ew_has_mask(op);
  if constexpr (!masked && n <= 2 && (kDense<T> || kDenseInt<op, T>)) {
    const int64_t* const* st = q.st;
    bool all_dense = dense(a.shape, st[0], sizeof(Out));
    for (int k = 0; k < n; ++k) all_dense = all_dense && (st[k + 1] == nullptr || dense(a.shape, st[k + 1], sizeof(T)));
    if (!all_dense || (n == 2 && q.scal[0] && q.scal[1])) return false;
    Out* o = reinterpret_cast<Out*>(q.out);
    // bool operands read as bytes and converted (any non-zero byte is true, as mt_load reads them)
    using In = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    const In* x = st[1] ? reinterpret_cast<const In*>(q.in[0]) : nullptr;
    const In* y = n > 1 && st[2] ? reinterpret_cast<const In*>(q.in[1]) : nullptr;
    const int64_t numel = a.shape.numel;
    const O s0 = q.sval[0], s1 = q.sval[1];
    const EwParams p = a.p;
    const int64_t pieces = (numel + kDenseAlign - 1) / kDenseAlign;
    par::parallel_for(pieces, std::max<int64_t>(1, par::grain_for(1) / kDenseAlign), [&](int64_t pb, int64_t pe) {
      const int64_t b = pb * kDenseAlign, e = std::min(numel, pe * kDenseAlign);
      if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>)
        dense_half<op, T>(o, x, y, s0, s1, n, p, b, e);
      else if constexpr (n == 1) dense_unary<op, T, Out, O, In>(o, x, p, b, e);
      else dense_binary<op, T, Out, O, In>(o, x, y, s0, s1, p, b, e);
    });
    return true;
  }
  return false;
}
#endif

#if !defined(MT_SIM_ISA_AVX512)
template <EwOp op, typename T>
rt::Status run(const ElementwiseArgs& a) {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  constexpr int n = ew_arity(op);
  constexpr bool masked = ew_has_mask(op);
  if (a.shape.numel == 0) return rt::Status::Success;
  const Operands<op, T> q(a);
  char* out = q.out;
  const char* const* in = q.in;
  const O* sval = q.sval;
  const bool* scal = q.scal;
  const int64_t* const* st = q.st;
  const int64_t grain = par::grain_for(1);
#if MT_SIM_FAST
  if (run_dense<op, T>(a, q)) return rt::Status::Success;
  if constexpr (!masked && n <= 2 && kDense<T>) {
    if (!(n == 2 && scal[0] && scal[1]) && !(n == 1 && !st[1])) {
      strided_blocks<op, T, Out, O, n>(a, out, in, st, sval, grain);
      return rt::Status::Success;
    }
  }
  if constexpr (n == 3 && !masked && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    bool all_dense = dense(a.shape, st[0], sizeof(Out)) && st[1] && dense(a.shape, st[1], sizeof(T));
    for (int k = 2; k <= 3; ++k) all_dense = all_dense && (!st[k] || dense(a.shape, st[k], sizeof(T)));
    if (all_dense && (st[2] || st[3])) {  // the functor on the same opmath values as the blocks below: the same bits
      Out* o = reinterpret_cast<Out*>(out);
      const T *x = reinterpret_cast<const T*>(in[0]), *y = reinterpret_cast<const T*>(in[1]),
              *z = reinterpret_cast<const T*>(in[2]);
      par::parallel_for(a.shape.numel, grain, [&](int64_t b, int64_t e) {
        if (!st[2]) dense_ternary<op, T, Out, O, 1>(o, x, y, z, sval[1], a.p, b, e);
        else if (!st[3]) dense_ternary<op, T, Out, O, 2>(o, x, y, z, sval[2], a.p, b, e);
        else dense_ternary<op, T, Out, O, 0>(o, x, y, z, O(0), a.p, b, e);
      });
      return rt::Status::Success;
    }
  }
  if constexpr (n == 3 && kDense<T>) {  // the other ternary rows (where, half types, strided): in blocks
    if (st[1] || st[2] || st[3]) {
      strided_blocks<op, T, Out, O, n>(a, out, in, st, sval, grain);
      return rt::Status::Success;
    }
  }
#endif
  par::parallel_for(a.shape.numel, grain, [&](int64_t begin, int64_t end) {
    for_each_run(a.shape, st, 1 + n, begin, end, [&](const int64_t* off, int64_t cnt, const int64_t* s) {
      for (int64_t i = 0; i < cnt; ++i) {
        O v[3] = {sval[0], sval[1], sval[2]};
        for (int k = 0; k < n; ++k) {
          if (scal[k]) continue;
          const char* p = in[k] + off[k + 1] + i * s[k + 1];
          if (masked && k == 0) v[0] = static_cast<O>(mt_load(reinterpret_cast<const bool*>(p)));
          else v[k] = static_cast<O>(mt_load(reinterpret_cast<const T*>(p)));
        }
        *reinterpret_cast<Out*>(out + off[0] + i * s[0]) = static_cast<Out>(ew::apply<op, T>(v[0], v[1], v[2], a.p));
      }
    });
  });
  return rt::Status::Success;
}

template <EwOp op>
rt::Status run_dtype(const ElementwiseArgs& a) {
  rt::Status st = rt::report(rt::Status::InvalidValue, "elementwise: the op does not support this dtype");
  dispatch_dtype(a.compute, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      if constexpr (ew::supported<op, T>()) st = run<op, T>(a);
    }
  });
  return st;
}
#else
// The AVX-512 compile: the dense loops of float, half and bfloat16 (Note [Sim AVX-512 dense loops]), but for the
// functors measured slower 16 wide than 8 (the speed report's cases, one process each way): the Special group's
// double-precision series (bessel_y0 float32 22 -> 29 ms) and erfc (0.27 -> 0.38 ms), whose branches the 16-wide
// loop runs masked; and the fmod rows in half and bfloat16 (bfloat16 fmod 0.98 -> 1.21
// ms: their vector form is dense_binary's two passes, which the 16-wide compile of dense_half's blocks slows). gelu
// and its backward keep the AVX2 loops for accuracy: where 1 + erf(x / sqrt 2) cancels (x near -5) libmvec's 16-wide
// erff left one element of test_sim_parallel's gelu outside the alignment rule against the CPU.
template <EwOp op>
constexpr bool kCheapSpecial = op == EwOp::Entr || op == EwOp::Xlogy || op == EwOp::Xlog1py || op == EwOp::Logit ||
                               op == EwOp::LogitBackward ||  // the Special rows built on one log (16 wide: logit 8x)
                               ew::HasFloatForm<op>::value;  // and the branch-free float forms
template <EwOp op, typename T>
constexpr bool kWide =
    (ew_group(op) != EwGroup::Special || kCheapSpecial<op>) && op != EwOp::Erfc && op != EwOp::Gelu &&
    op != EwOp::GeluBackward && (std::is_same_v<T, float> || !ew::HasFastFmod<op>::value);

template <EwOp op>
bool run_dense_dtype(const ElementwiseArgs& a) {
  bool ran = false;
  dispatch_dtype(a.compute, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool wide_dtype =
        std::is_same_v<T, float> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;
    if constexpr (wide_dtype && kWide<op, T>) {
      if constexpr (ew::supported<op, T>()) ran = a.shape.numel > 0 && run_dense<op, T>(a, Operands<op, T>(a));
    }
  });
  return ran;
}
#endif

} // namespace

#if defined(MT_SIM_ISA_AVX512)
MT_SIM_ENTRY bool elementwise_dense(const ElementwiseArgs& a) {
  return ew_visit(a.op, [&](auto op) { return run_dense_dtype<decltype(op)::value>(a); }, [] { return false; });
}
#else
MT_SIM_ENTRY rt::Status elementwise(const ElementwiseArgs& a, rt::Stream) {
  return ew_visit(
      a.op, [&](auto op) { return run_dtype<decltype(op)::value>(a); },
      [] { return rt::report(rt::Status::InvalidValue, "elementwise: unknown op"); });
}
#endif

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
#if MT_SIM_HAVE_AVX512
bool sim_isa_avx512();  // isa.cpp
namespace avx512 {
bool elementwise_dense(const ElementwiseArgs& a);
} // namespace avx512
#endif
#if MT_SIM_HAVE_AVX2
namespace avx2 {
rt::Status elementwise(const ElementwiseArgs& a, rt::Stream s);
} // namespace avx2
#endif
// The variant the CPU runs (Note [Sim ISA variants]): the AVX-512 dense loops where they take the call, else the
// AVX2 variant, else the baseline.
rt::Status elementwise(const ElementwiseArgs& a, rt::Stream s) {
#if MT_SIM_HAVE_AVX512
  if (sim_isa_avx512() && avx512::elementwise_dense(a)) return rt::Status::Success;
#endif
#if MT_SIM_HAVE_AVX2
  if (sim_isa_avx2()) return avx2::elementwise(a, s);
#endif
  return base::elementwise(a, s);
}
} // namespace mytorch::sim

namespace mytorch {

bool elementwise_supported(EwOp op, DType t) {
  return ew_visit(
      op,
      [&](auto op_tag) {
        bool ok = false;
        dispatch_dtype(t, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (!is_complex_t<T>::value) ok = ew::supported<decltype(op_tag)::value, T>();
        });
        return ok;
      },
      [] { return false; });
}

} // namespace mytorch
#endif
