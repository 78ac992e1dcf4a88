// sim fused attention (Note [Fused attention]): FlashAttention's tiled algorithm (Note [Sim attention]) with the
// blocks multiplied by the CPU BLAS (Note [Sim GEMM]) and the softmax steps in vectorised loops; tasks (a query
// tile, or a key tile for dK/dV) in parallel. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/attention.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_blas.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Note [Sim attention]
// Forward, per (batch, head, tile of kBq queries): for each tile of kBk keys (up to the diagonal when causal),
// S = scale Q K^T (one GEMM), bias and mask added, the online softmax update of the rows' max m and sum l in
// vectorised loops (P = exp(S - m), overwriting S), O += P V (one GEMM); at the end O / l and lse = m + log l.
// Backward, as FlashAttention-2 splits it: delta_i = dO_i . O_i per row; then per (batch, kv head, key tile),
// over its query heads and query tiles in order, P = exp(S + bias - lse) recomputed, dV += (Z P)^T dO,
// dP = dO V^T, dS = P (Z dP - delta) scale, dK += dS^T Q; and per (batch, head, query tile), over the key tiles in
// order, dQ += dS K (S, P and dS recomputed). Every task writes its own rows and accumulates in a fixed order:
// the same bits at any thread count, no atomics. Rows are converted to the accumulation type once per tile
// (float32 rows with contiguous elements are read in place). The fully masked row rule is attn::row_lse's.
constexpr int64_t kBq = 128, kBk = 128;

// Rows [r0, r0 + n) of head (b, h) of t (width w) as accumulation-type rows: in place when T is A, else converted
// into buf. *ld: the returned rows' stride.
template <typename T, typename A>
const A* rows(const AttnTensor& t, int64_t b, int64_t h, int64_t r0, int64_t n, int64_t w, A* buf, int64_t* ld) {
  const T* src = static_cast<const T*>(t.data) + b * t.sb + h * t.sh + r0 * t.ss;
  if constexpr (std::is_same_v<T, A>) {
    *ld = t.ss;
    return src;
  } else {
    for (int64_t r = 0; r < n; ++r) vec::to_opmath(src + r * t.ss, buf + r * w, w);
    *ld = w;
    return buf;
  }
}

// Bias and causal mask on the scores s[nq x nk] (row stride kBk) of queries i0.. and keys j0..
template <typename A>
void bias_and_mask(const AttentionArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t nk, A* s) {
  for (int64_t r = 0; r < nq; ++r) {
    A* row = s + r * kBk;
    const int64_t i = i0 + r;
    if (a.bias)
      for (int64_t c = 0; c < nk; ++c) row[c] += attn::bias_at(a, b, h, i, j0 + c);
    if (a.causal)
      for (int64_t c = std::max<int64_t>(0, i - j0 + 1); c < nk; ++c) row[c] = -INFINITY;
  }
}

template <typename T>
void forward(const AttentionArgs& a) {
  using A = attn::acc_t<T>;
  const int64_t qtiles = (a.lq + kBq - 1) / kBq;
  par::parallel_for(a.b * a.hq * qtiles, 1, [&](int64_t tb, int64_t te) {
    std::vector<A> qb(kBq * a.d), kb(kBk * a.d), vb(kBk * a.dv), s(kBq * kBk), acc(kBq * a.dv), m(kBq), l(kBq);
    for (int64_t task = tb; task < te; ++task) {
      const int64_t b = task / (a.hq * qtiles), h = task / qtiles % a.hq, i0 = task % qtiles * kBq;
      const int64_t nq = std::min(kBq, a.lq - i0), hk = attn::kv_head(a, h);
      int64_t ldq = 0, ldk = 0, ldv = 0;
      const A* Q = rows<T, A>(a.q, b, h, i0, nq, a.d, qb.data(), &ldq);
      std::fill(m.begin(), m.end(), -INFINITY);
      std::fill(l.begin(), l.end(), A(0));
      std::fill(acc.begin(), acc.end(), A(0));
      const int64_t kend = a.causal ? std::min(a.lk, i0 + nq) : a.lk;
      for (int64_t j0 = 0; j0 < kend; j0 += kBk) {
        const int64_t nk = std::min(kBk, kend - j0);
        const A* K = rows<T, A>(a.k, b, hk, j0, nk, a.d, kb.data(), &ldk);
        const A* V = rows<T, A>(a.v, b, hk, j0, nk, a.dv, vb.data(), &ldv);
        blas::gemm<A>(false, true, nq, nk, a.d, static_cast<A>(a.scale), Q, ldq, K, ldk, A(0), s.data(), kBk);
        bias_and_mask(a, b, h, i0, nq, j0, nk, s.data());
        for (int64_t r = 0; r < nq; ++r) {
          A* p = s.data() + r * kBk;
          A tile_max = -INFINITY;
          for (int64_t c = 0; c < nk; ++c) tile_max = p[c] > tile_max ? p[c] : tile_max;
          const A m_new = std::max(m[r], tile_max);
          if (m_new == -INFINITY) {  // everything so far masked
            std::fill(p, p + nk, A(0));
            continue;
          }
          const A corr = std::exp(m[r] - m_new);
          vec::exp_shifted(p, m_new, p, nk);
          l[r] = l[r] * corr + vec::sum(p, nk);
          A* o = acc.data() + r * a.dv;
          for (int64_t e = 0; e < a.dv; ++e) o[e] *= corr;
          if (a.dropout_p > 0)
            for (int64_t c = 0; c < nk; ++c) p[c] *= attn::dropout_factor(a, b, h, i0 + r, j0 + c);
          m[r] = m_new;
        }
        blas::gemm<A>(false, false, nq, a.dv, nk, A(1), s.data(), kBk, V, ldv, A(1), acc.data(), a.dv);
      }
      for (int64_t r = 0; r < nq; ++r) {
        A* o = acc.data() + r * a.dv;
        const A inv = l[r] > 0 ? A(1) / l[r] : A(0);  // a fully masked row (l == 0) gives 0
        for (int64_t e = 0; e < a.dv; ++e) o[e] *= inv;
        vec::from_opmath(o, static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh + (i0 + r) * a.out.ss, a.dv);
        static_cast<A*>(a.lse)[(b * a.hq + h) * a.lq + i0 + r] = attn::row_lse(m[r], l[r]);
      }
    }
  });
}

// P = exp(S + bias - lse) (0 where masked) and dS = P (Z dP - delta) scale of queries i0.. and keys j0.., from
// Q, K, V and dO rows: the shared step of both backward passes. On return p holds Z P, ds holds dS.
template <typename A>
void backward_tile(const AttentionArgs& a, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                   const A* Q, int64_t ldq, const A* K, int64_t ldk, const A* V, int64_t ldv, const A* dO, int64_t lddo,
                   A* p, A* ds) {
  blas::gemm<A>(false, true, nq, nk, a.d, static_cast<A>(a.scale), Q, ldq, K, ldk, A(0), p, kBk);
  bias_and_mask(a, b, h, i0, nq, j0, nk, p);
  blas::gemm<A>(false, true, nq, nk, a.dv, A(1), dO, lddo, V, ldv, A(0), ds, kBk);
  const A* lse = static_cast<const A*>(a.lse) + (b * a.hq + h) * a.lq + i0;
  const A* delta = static_cast<const A*>(a.delta) + (b * a.hq + h) * a.lq + i0;
  const A scale = static_cast<A>(a.scale);
  for (int64_t r = 0; r < nq; ++r) {
    A* pr = p + r * kBk;
    A* dr = ds + r * kBk;
    const A lr = lse[r], dl = delta[r];
    vec::exp_shifted(pr, lr, pr, nk);
    if (a.dropout_p > 0) {
      for (int64_t c = 0; c < nk; ++c) {
        const A z = attn::dropout_factor(a, b, h, i0 + r, j0 + c);
        dr[c] = pr[c] * (z * dr[c] - dl) * scale;
        pr[c] *= z;
      }
    } else {
      for (int64_t c = 0; c < nk; ++c) dr[c] = pr[c] * (dr[c] - dl) * scale;
    }
  }
}

template <typename T>
void backward(const AttentionArgs& a) {
  using A = attn::acc_t<T>;
  const int64_t qtiles = (a.lq + kBq - 1) / kBq, ktiles = (a.lk + kBk - 1) / kBk, group = a.hq / a.hkv;
  // delta_i = dO_i . O_i
  par::parallel_for(a.b * a.hq * a.lq, par::grain_for(2 * a.dv), [&](int64_t rb, int64_t re) {
    std::vector<A> x(a.dv), y(a.dv);
    for (int64_t row = rb; row < re; ++row) {
      const int64_t b = row / (a.hq * a.lq), h = row / a.lq % a.hq, i = row % a.lq;
      int64_t ld = 0;
      const A* g = rows<T, A>(a.dout, b, h, i, 1, a.dv, x.data(), &ld);
      const A* o = rows<T, A>(a.out, b, h, i, 1, a.dv, y.data(), &ld);
      static_cast<A*>(a.delta)[row] = vec::dot(g, o, a.dv);
    }
  });
  // dK, dV per key tile
  par::parallel_for(a.b * a.hkv * ktiles, 1, [&](int64_t tb, int64_t te) {
    std::vector<A> qb(kBq * a.d), gb(kBq * a.dv), kb(kBk * a.d), vb(kBk * a.dv), p(kBq * kBk), ds(kBq * kBk),
        dk(kBk * a.d), dv(kBk * a.dv);
    for (int64_t task = tb; task < te; ++task) {
      const int64_t b = task / (a.hkv * ktiles), hk = task / ktiles % a.hkv, j0 = task % ktiles * kBk;
      const int64_t nk = std::min(kBk, a.lk - j0);
      int64_t ldq = 0, ldg = 0, ldk = 0, ldv = 0;
      const A* K = rows<T, A>(a.k, b, hk, j0, nk, a.d, kb.data(), &ldk);
      const A* V = rows<T, A>(a.v, b, hk, j0, nk, a.dv, vb.data(), &ldv);
      std::fill(dk.begin(), dk.end(), A(0));
      std::fill(dv.begin(), dv.end(), A(0));
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t i0 = a.causal ? j0 / kBq * kBq : 0; i0 < a.lq; i0 += kBq) {
          const int64_t nq = std::min(kBq, a.lq - i0);
          const A* Q = rows<T, A>(a.q, b, h, i0, nq, a.d, qb.data(), &ldq);
          const A* dO = rows<T, A>(a.dout, b, h, i0, nq, a.dv, gb.data(), &ldg);
          backward_tile<A>(a, b, h, i0, nq, j0, nk, Q, ldq, K, ldk, V, ldv, dO, ldg, p.data(), ds.data());
          blas::gemm<A>(true, false, nk, a.dv, nq, A(1), p.data(), kBk, dO, ldg, A(1), dv.data(), a.dv);
          blas::gemm<A>(true, false, nk, a.d, nq, A(1), ds.data(), kBk, Q, ldq, A(1), dk.data(), a.d);
        }
      }
      for (int64_t r = 0; r < nk; ++r) {
        vec::from_opmath(dk.data() + r * a.d,
                         static_cast<T*>(a.dk.data) + b * a.dk.sb + hk * a.dk.sh + (j0 + r) * a.dk.ss, a.d);
        vec::from_opmath(dv.data() + r * a.dv,
                         static_cast<T*>(a.dvv.data) + b * a.dvv.sb + hk * a.dvv.sh + (j0 + r) * a.dvv.ss, a.dv);
      }
    }
  });
  // dQ per query tile
  par::parallel_for(a.b * a.hq * qtiles, 1, [&](int64_t tb, int64_t te) {
    std::vector<A> qb(kBq * a.d), gb(kBq * a.dv), kb(kBk * a.d), vb(kBk * a.dv), p(kBq * kBk), ds(kBq * kBk),
        dq(kBq * a.d);
    for (int64_t task = tb; task < te; ++task) {
      const int64_t b = task / (a.hq * qtiles), h = task / qtiles % a.hq, i0 = task % qtiles * kBq;
      const int64_t nq = std::min(kBq, a.lq - i0), hk = attn::kv_head(a, h);
      int64_t ldq = 0, ldg = 0, ldk = 0, ldv = 0;
      const A* Q = rows<T, A>(a.q, b, h, i0, nq, a.d, qb.data(), &ldq);
      const A* dO = rows<T, A>(a.dout, b, h, i0, nq, a.dv, gb.data(), &ldg);
      std::fill(dq.begin(), dq.end(), A(0));
      const int64_t kend = a.causal ? std::min(a.lk, i0 + nq) : a.lk;
      for (int64_t j0 = 0; j0 < kend; j0 += kBk) {
        const int64_t nk = std::min(kBk, kend - j0);
        const A* K = rows<T, A>(a.k, b, hk, j0, nk, a.d, kb.data(), &ldk);
        const A* V = rows<T, A>(a.v, b, hk, j0, nk, a.dv, vb.data(), &ldv);
        backward_tile<A>(a, b, h, i0, nq, j0, nk, Q, ldq, K, ldk, V, ldv, dO, ldg, p.data(), ds.data());
        blas::gemm<A>(false, false, nq, a.d, nk, A(1), ds.data(), kBk, K, ldk, A(1), dq.data(), a.d);
      }
      for (int64_t r = 0; r < nq; ++r)
        vec::from_opmath(dq.data() + r * a.d,
                         static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh + (i0 + r) * a.dq.ss, a.d);
    }
  });
}

// Decoding: the split-KV form (Note [Fused attention]), the reference of the cuda decoding kernels.
template <typename T>
void forward_split(const AttentionArgs& a) {
  using A = attn::acc_t<T>;
  const int64_t chunks = (a.lk + a.split_chunk - 1) / a.split_chunk, stride = a.dv + 2;
  A* ws = static_cast<A*>(a.split_ws);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.hq; ++h) {
      const int64_t hk = attn::kv_head(a, h), row = b * a.hq + h;
      for (int64_t c = 0; c < chunks; ++c) {  // the partials, one chunk at a time
        A* part = ws + (row * chunks + c) * stride;
        A m = -INFINITY, l = 0;
        for (int64_t e = 0; e < a.dv; ++e) part[2 + e] = 0;
        const int64_t j1 = std::min(a.lk, (c + 1) * a.split_chunk);
        for (int64_t j = c * a.split_chunk; j < j1; ++j) {
          A dot = 0;
          for (int64_t e = 0; e < a.d; ++e) dot += attn::ld<T>(a.q, b, h, 0, e) * attn::ld<T>(a.k, b, hk, j, e);
          const A sc = dot * static_cast<A>(a.scale) + attn::bias_at(a, b, h, 0, j);
          const A m_new = std::max(m, sc);
          if (m_new == -INFINITY) continue;
          const A corr = std::exp(m - m_new), p = std::exp(sc - m_new);
          l = l * corr + p;
          const A pz = p * attn::dropout_factor(a, b, h, 0, j);
          for (int64_t e = 0; e < a.dv; ++e) part[2 + e] = part[2 + e] * corr + pz * attn::ld<T>(a.v, b, hk, j, e);
          m = m_new;
        }
        part[0] = m;
        part[1] = l;
      }
      A mx = -INFINITY;  // the combine
      for (int64_t c = 0; c < chunks; ++c) mx = std::max(mx, ws[(row * chunks + c) * stride]);
      A l = 0;
      std::vector<A> o(static_cast<size_t>(a.dv), A(0));
      for (int64_t c = 0; c < chunks; ++c) {
        const A* part = ws + (row * chunks + c) * stride;
        if (part[0] == -INFINITY) continue;
        const A w = std::exp(part[0] - mx);
        l += part[1] * w;
        for (int64_t e = 0; e < a.dv; ++e) o[e] += part[2 + e] * w;
      }
      T* out = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh;
      for (int64_t e = 0; e < a.dv; ++e) out[e] = static_cast<T>(l > 0 ? o[e] / l : A(0));
      static_cast<A*>(a.lse)[row] = attn::row_lse(mx, l);
    }
}

} // namespace

MT_SIM_ENTRY rt::Status attention_forward(const AttentionArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    if (a.split_ws) forward_split<decltype(tag)>(a);
    else forward<decltype(tag)>(a);
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
}

MT_SIM_ENTRY rt::Status attention_backward(const AttentionArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { backward<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, attention_forward, (const AttentionArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, attention_backward, (const AttentionArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
