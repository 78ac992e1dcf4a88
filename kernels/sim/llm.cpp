// Sim twin of cuda/llm.cu (Note [Fused LLM ops]): rows in parallel, each row through opmath buffers with the
// activation fixed at compile time, so the AVX2 variant's loops vectorise over libmvec (Note [Sim vector math]).
// Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/llm.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// f(std::integral_constant<GluAct, act>{}) for the runtime act.
template <typename F>
void with_act(GluAct act, F&& f) {
  switch (act) {
    case GluAct::Gelu: f(std::integral_constant<GluAct, GluAct::Gelu>{}); break;
    case GluAct::GeluTanh: f(std::integral_constant<GluAct, GluAct::GeluTanh>{}); break;
    case GluAct::Sigmoid: f(std::integral_constant<GluAct, GluAct::Sigmoid>{}); break;
    default: f(std::integral_constant<GluAct, GluAct::Silu>{}); break;
  }
}

template <typename T, GluAct act>
void glu(const GluArgs& a, bool forward) {
  using A = ew::opmath_t<T>;
  const int64_t n = a.cols;
  par::parallel_for(a.rows, par::grain_for((forward ? 12 : 24) * n), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(5 * n));
    A *gb = buf.data(), *ub = gb + n, *db = ub + n, *o0 = db + n, *o1 = o0 + n;
    for (int64_t r = rb; r < re; ++r) {
      const A* g = vec::as_opmath(static_cast<const T*>(a.gate) + r * a.gate_ld, gb, n);
      const A* u = vec::as_opmath(static_cast<const T*>(a.up) + r * a.up_ld, ub, n);
      if (forward) {
        for (int64_t j = 0; j < n; ++j) o0[j] = llm::glu_act<T, A>(act, g[j]) * u[j];
        vec::from_opmath(o0, static_cast<T*>(a.y) + r * a.y_ld, n);
        continue;
      }
      const A* d = vec::as_opmath(static_cast<const T*>(a.dy) + r * a.dy_ld, db, n);
      for (int64_t j = 0; j < n; ++j) {
        o0[j] = llm::glu_act_backward<T, A>(act, d[j] * u[j], g[j]);
        o1[j] = d[j] * llm::glu_act<T, A>(act, g[j]);
      }
      vec::from_opmath(o0, static_cast<T*>(a.dgate) + r * a.dgate_ld, n);
      vec::from_opmath(o1, static_cast<T*>(a.dup) + r * a.dup_ld, n);
    }
  });
}

rt::Status run_glu(const GluArgs& a, bool forward) {
  if (a.rows == 0 || a.cols == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    with_act(a.act, [&](auto act) { glu<decltype(tag), decltype(act)::value>(a, forward); });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "glu: expected a floating dtype");
}

// A row through opmath buffers (x, and cos/sin expanded to one value per element), so that the Llama/NeoX layout's
// loop over the first half of the pairs vectorises (the pairs are (j, j + rot / 2)).
template <typename T, typename C>
void rope(const RopeArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t rot = a.rot, half = rot / 2, rows = a.n[0] * a.n[1] * a.n[2];
  par::parallel_for(rows, par::grain_for(6 * a.head_dim), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(4 * rot));
    A *xb = buf.data(), *cb = xb + rot, *sb = cb + rot, *yb = sb + rot;
    for (int64_t r = rb; r < re; ++r) {
      const int64_t i2 = r % a.n[2], i1 = r / a.n[2] % a.n[1], i0 = r / (a.n[2] * a.n[1]);
      int64_t cs;
      if (!llm::rope_cs_row(a, i0, i1, i2, &cs)) continue;
      const T* x = static_cast<const T*>(a.x) + i0 * a.x_st[0] + i1 * a.x_st[1] + i2 * a.x_st[2];
      T* y = static_cast<T*>(a.out) + i0 * a.out_st[0] + i1 * a.out_st[1] + i2 * a.out_st[2];
      const C* cr = static_cast<const C*>(a.cos) + cs;
      const C* sr = static_cast<const C*>(a.sin) + cs;
      // (each pair is read before it is written, so writing y directly is safe in place too)
      const A* xo = vec::as_opmath(x, xb, rot);
      const A *co = cb, *so = sb;
      if (a.cs_width == rot) {
        co = vec::as_opmath(cr, cb, rot);
        so = vec::as_opmath(sr, sb, rot);
      } else {
        for (int64_t j = 0; j < rot; ++j) {
          cb[j] = static_cast<A>(cr[llm::rope_cs_index(a, j)]);
          sb[j] = static_cast<A>(sr[llm::rope_cs_index(a, j)]);
        }
      }
      A* yo = yb;
      if constexpr (std::is_same_v<T, A>) yo = y;
      if (!a.interleaved) {
        for (int64_t j = 0; j < half; ++j)
          llm::rope_rotate<A>(a.inverse, xo[j], xo[j + half], co[j], so[j], co[j + half], so[j + half], &yo[j],
                              &yo[j + half]);
      } else {
        for (int64_t j = 0; j < rot; j += 2)
          llm::rope_rotate<A>(a.inverse, xo[j], xo[j + 1], co[j], so[j], co[j + 1], so[j + 1], &yo[j], &yo[j + 1]);
      }
      if constexpr (!std::is_same_v<T, A>) vec::from_opmath(yb, y, rot);
      if (y != x)
        for (int64_t j = rot; j < a.head_dim; ++j) y[j] = x[j];
    }
  });
}

template <typename T>
void ce_rows(const CeRowsArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t v = a.vocab;
  const A cap = static_cast<A>(a.softcap);
  par::parallel_for(a.rows, par::grain_for(12 * v), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(2 * v));
    A *c = buf.data(), *e = c + v;
    for (int64_t r = rb; r < re; ++r) {
      T* x = static_cast<T*>(a.logits) + r * a.ld;
      const int64_t t = a.target[r];
      bool ignored = t == a.ignore_index;
      if (!ignored && (t < 0 || t >= v)) {
        record_error(a.error, t);
        ignored = true;
      }
      vec::to_opmath(x, c, v);
      if (a.softcap > 0)
        for (int64_t j = 0; j < v; ++j) c[j] = llm::ce_cap(c[j], cap);
      const A m = vec::max_nan(c, v);
      vec::exp_shifted(c, m, e, v);
      const A sum = vec::sum(e, v), lse = m + std::log(sum);
      a.lse[r] = static_cast<float>(lse);
      a.loss[r] = ignored ? 0.f : static_cast<float>(llm::ce_row_loss(a, lse, c[t], vec::sum(c, v)));
      if (!a.grad) continue;
      if (ignored) {
        std::fill(e, e + v, A(0));
      } else {
        const A scale = static_cast<A>(llm::ce_scale(a, r)), inv = A(1) / sum;
        for (int64_t j = 0; j < v; ++j) e[j] = llm::ce_grad(a, e[j] * inv, c[j], lse, scale);  // p = e / sum
        e[t] += llm::ce_target_grad(a, c[t], scale);
      }
      vec::from_opmath(e, x, v);
    }
  });
}

} // namespace

MT_SIM_ENTRY rt::Status glu_forward(const GluArgs& a, rt::Stream) { return run_glu(a, true); }
MT_SIM_ENTRY rt::Status glu_backward(const GluArgs& a, rt::Stream) { return run_glu(a, false); }

MT_SIM_ENTRY rt::Status rope(const RopeArgs& a, rt::Stream) {
  if (rt::Status st = rope_check(a); st != rt::Status::Success) return st;
  if (a.n[0] * a.n[1] * a.n[2] == 0 || a.head_dim == 0) return rt::Status::Success;
  const bool ok =
      dispatch_floating_with_param(a.dtype, a.cs_dtype, [&](auto t, auto c) { rope<decltype(t), decltype(c)>(a); });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "rope: expected a floating x with cos/sin of its dtype or float32");
}

MT_SIM_ENTRY rt::Status cross_entropy_rows(const CeRowsArgs& a, rt::Stream) {
  if (a.rows == 0) return rt::Status::Success;
  if (a.vocab <= 0) return rt::report(rt::Status::InvalidValue, "cross_entropy_rows: expected a non-empty vocabulary");
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { ce_rows<decltype(tag)>(a); });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "cross_entropy_rows: expected floating logits");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, glu_forward, (const GluArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, glu_backward, (const GluArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, rope, (const RopeArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, cross_entropy_rows, (const CeRowsArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
