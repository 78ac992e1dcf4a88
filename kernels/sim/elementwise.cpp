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

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Visits the elements [begin, end) of the strided description in runs along dimension 0:
// fn(offsets[4], count, run_strides[4]) with offsets in bytes.
template <typename Fn>
void for_each_run(const StridedShape& s, const int64_t* const* st, int nops, int64_t begin, int64_t end, Fn fn) {
  int64_t off[4] = {0, 0, 0, 0};
  int64_t inner[4] = {0, 0, 0, 0};
  if (s.ndim == 0) {
    fn(off, 1, inner);
    return;
  }
  for (int k = 0; k < nops; ++k) inner[k] = st[k] ? st[k][0] : 0;
  int64_t idx[kMaxDims] = {};
  int64_t rest = begin;
  for (int d = 0; d < s.ndim; ++d) {
    idx[d] = rest % s.sizes[d];
    rest /= s.sizes[d];
    for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][d] * idx[d] : 0;
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t cnt = std::min(s.sizes[0] - idx[0], end - pos);
    fn(off, cnt, inner);
    pos += cnt;
    for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][0] * cnt : 0;
    idx[0] += cnt;
    if (idx[0] < s.sizes[0]) continue;
    for (int k = 0; k < nops; ++k) off[k] -= st[k] ? st[k][0] * s.sizes[0] : 0;
    idx[0] = 0;
    for (int d = 1; d < s.ndim; ++d) {
      ++idx[d];
      for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][d] : 0;
      if (idx[d] < s.sizes[d]) break;
      for (int k = 0; k < nops; ++k) off[k] -= st[k] ? st[k][d] * s.sizes[d] : 0;
      idx[d] = 0;
    }
  }
}

#if MT_SIM_FAST
// The dtypes with dense loops: the floating ones (each dense loop is one instantiation per op and dtype, so the
// integer dtypes, rare in the hot paths, keep the strided loop and the build time stays bounded).
template <typename T>
constexpr bool kDense = std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;

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

template <EwOp op, typename T, typename Out, typename O, typename In = T>
void dense_binary(Out* o, const In* x, const In* y, O sx, O sy, const EwParams p, int64_t b, int64_t e) {
  if (x && y) {
    for (int64_t i = b; i < e; ++i)
      o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), static_cast<O>(y[i]), O(0), p));
  } else if (x) {
    for (int64_t i = b; i < e; ++i) o[i] = static_cast<Out>(ew::apply<op, T>(static_cast<O>(x[i]), sy, O(0), p));
  } else {
    for (int64_t i = b; i < e; ++i) o[i] = static_cast<Out>(ew::apply<op, T>(sx, static_cast<O>(y[i]), O(0), p));
  }
}

// Half operands in blocks (Note [Sim row loops]): converted to float with F16C, the float loops above on the block,
// converted back (bfloat16 converts by shifts inside the loops above: blocks measured slower for it).
template <EwOp op, typename T, typename Out>
void dense_half(Out* o, const T* x, const T* y, float sx, float sy, int n, const EwParams p, int64_t b, int64_t e) {
  constexpr int64_t kBlock = 512;
  float xb[kBlock], yb[kBlock];
  using OB = std::conditional_t<std::is_same_v<Out, bool>, bool, float>;
  OB ob[kBlock];
  if constexpr (!std::is_same_v<Out, bool>) {
    // Arithmetic, logic and the cheap unary ops 8 at a time, in registers: one conversion per operand, the functor
    // on 8 floats, one conversion back (512-element blocks went through L1 three times: half mul at 0.69x the CPU,
    // 1.38x this way). The math-library functors (exp, erf, tanh...: the UnaryFloat and Nn groups) 64 at a time:
    // an 8-element loop is unrolled into 8 scalar libm calls, a 64-element one vectorises with libmvec.
    constexpr EwGroup g = ew_group(op);
    constexpr int64_t kSmall = (g == EwGroup::UnaryFloat || g == EwGroup::Nn) ? 64 : 8;
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

#endif

template <EwOp op, typename T>
rt::Status run(const ElementwiseArgs& a) {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  constexpr int n = ew_arity(op);
  constexpr bool masked = ew_has_mask(op);
  if (a.shape.numel == 0) return rt::Status::Success;
  char* out = static_cast<char*>(a.out.data);
  const char* in[3] = {static_cast<const char*>(a.in[0].data), static_cast<const char*>(a.in[1].data),
                       static_cast<const char*>(a.in[2].data)};
  O sval[3] = {O(0), O(0), O(0)};
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
  const int64_t* st[4] = {a.out.strides, a.is_scalar[0] ? nullptr : a.in[0].strides,
                          n > 1 && !a.is_scalar[1] ? a.in[1].strides : nullptr,
                          n > 2 && !a.is_scalar[2] ? a.in[2].strides : nullptr};
  const int64_t grain = par::grain_for(1);
#if MT_SIM_FAST
  if constexpr (!masked && n <= 2 && kDense<T>) {
    bool all_dense = dense(a.shape, st[0], sizeof(Out));
    for (int k = 0; k < n; ++k) all_dense = all_dense && (st[k + 1] == nullptr || dense(a.shape, st[k + 1], sizeof(T)));
    if (all_dense && !(n == 2 && a.is_scalar[0] && a.is_scalar[1])) {
      Out* o = reinterpret_cast<Out*>(out);
      const T* x = st[1] ? reinterpret_cast<const T*>(in[0]) : nullptr;
      const T* y = n > 1 && st[2] ? reinterpret_cast<const T*>(in[1]) : nullptr;
      par::parallel_for(a.shape.numel, grain, [&](int64_t b, int64_t e) {
        if constexpr (std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>)
          dense_half<op, T>(o, x, y, sval[0], sval[1], n, a.p, b, e);
        else if constexpr (n == 1) dense_unary<op, T, Out, O>(o, x, a.p, b, e);
        else dense_binary<op, T, Out, O>(o, x, y, sval[0], sval[1], a.p, b, e);
      });
      return rt::Status::Success;
    }
  }
#endif
  par::parallel_for(a.shape.numel, grain, [&](int64_t begin, int64_t end) {
    for_each_run(a.shape, st, 1 + n, begin, end, [&](const int64_t* off, int64_t cnt, const int64_t* s) {
      for (int64_t i = 0; i < cnt; ++i) {
        O v[3] = {sval[0], sval[1], sval[2]};
        for (int k = 0; k < n; ++k) {
          if (a.is_scalar[k]) continue;
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

} // namespace

MT_SIM_ENTRY rt::Status elementwise(const ElementwiseArgs& a, rt::Stream) {
  return ew_visit(
      a.op, [&](auto op) { return run_dtype<decltype(op)::value>(a); },
      [] { return rt::report(rt::Status::InvalidValue, "elementwise: unknown op"); });
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, elementwise, (const ElementwiseArgs& a, rt::Stream s), (a, s))
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
