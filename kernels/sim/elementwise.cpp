// Sim twin of cuda/elementwise*.cu: each op's functor (ops_math.h) in plain loops over the strided description,
// for every row of the pointwise table (Note [Op tables] in ew_ops.h).
#include <cstring>

#include "mytorch/elementwise.h"
#include "mytorch/ops_math.h"

namespace mytorch::sim {
namespace {

// Visits the elements in runs along dimension 0: fn(offsets[4], count, run_strides[4]).
template <typename Fn>
void for_each_run(const StridedShape& s, const int64_t* const* st, int nops, Fn fn) {
  if (s.numel == 0) return;
  int64_t off[4] = {0, 0, 0, 0};
  int64_t inner[4] = {0, 0, 0, 0};
  if (s.ndim == 0) {
    fn(off, 1, inner);
    return;
  }
  for (int k = 0; k < nops; ++k) inner[k] = st[k] ? st[k][0] : 0;
  int64_t idx[kMaxDims] = {};
  const int64_t runs = s.numel / s.sizes[0];
  for (int64_t r = 0; r < runs; ++r) {
    fn(off, s.sizes[0], inner);
    for (int d = 1; d < s.ndim; ++d) {
      ++idx[d];
      for (int k = 0; k < nops; ++k) off[k] += st[k] ? st[k][d] : 0;
      if (idx[d] < s.sizes[d]) break;
      for (int k = 0; k < nops; ++k) off[k] -= st[k] ? st[k][d] * s.sizes[d] : 0;
      idx[d] = 0;
    }
  }
}

template <EwOp op, typename T>
rt::Status run(const ElementwiseArgs& a) {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  constexpr int n = ew_arity(op);
  constexpr bool masked = ew_has_mask(op);
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
  for_each_run(a.shape, st, 1 + n, [&](const int64_t* off, int64_t cnt, const int64_t* s) {
    for (int64_t i = 0; i < cnt; ++i) {
      O v[3] = {sval[0], sval[1], sval[2]};
      for (int k = 0; k < n; ++k) {
        if (a.is_scalar[k]) continue;
        const char* p = in[k] + off[k + 1] + i * s[k + 1];
        if (masked && k == 0) v[0] = static_cast<O>(*reinterpret_cast<const bool*>(p));
        else v[k] = static_cast<O>(*reinterpret_cast<const T*>(p));
      }
      *reinterpret_cast<Out*>(out + off[0] + i * s[0]) = static_cast<Out>(ew::apply<op, T>(v[0], v[1], v[2], a.p));
    }
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

rt::Status elementwise(const ElementwiseArgs& a, rt::Stream) {
  return ew_visit(
      a.op, [&](auto op) { return run_dtype<decltype(op)::value>(a); },
      [] { return rt::report(rt::Status::InvalidValue, "elementwise: unknown op"); });
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
