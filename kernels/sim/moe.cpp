// Sim twin of cuda/moe.cu (Note [Fused MoE routing]): token rows in parallel, each row's math as the kernels'.
// Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/moe.h"
#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// The row's scores s from its logits x (float), with the softmax's max and 1 / sum for the backward.
void scores(const MoeTopkArgs& a, const float* x, float* s) {
  const int64_t e = a.experts;
  float mx = -INFINITY, sum = 0.f;
  if (a.score == MoeScore::Softmax) {
    for (int64_t j = 0; j < e; ++j) mx = (x[j] != x[j] || x[j] > mx) ? x[j] : mx;
    for (int64_t j = 0; j < e; ++j) sum += std::exp(x[j] - mx);
  }
  const float inv = a.score == MoeScore::Softmax ? 1.f / sum : 0.f;
  for (int64_t j = 0; j < e; ++j) s[j] = moe::score(a.score, x[j], mx, inv);
}

// Index of the best entry of v[0, n) not yet taken (moe::before's order).
int64_t best(const float* v, const std::vector<char>& taken, int64_t n) {
  int64_t b = -1;
  for (int64_t j = 0; j < n; ++j)
    if (!taken[j] && (b < 0 || moe::before(v[j], j, v[b], b))) b = j;
  return b;
}

template <typename T>
void topk(const MoeTopkArgs& a) {
  const int64_t e = a.experts;
  par::parallel_for(a.tokens, par::grain_for(8 * e), [&](int64_t rb, int64_t re) {
    std::vector<float> x(e), s(e), c(e), gs(a.n_group);
    std::vector<char> taken(e), gtaken(a.n_group);
    for (int64_t r = rb; r < re; ++r) {
      vec::to_opmath(static_cast<const T*>(a.logits) + r * a.ld, x.data(), e);
      scores(a, x.data(), s.data());
      for (int64_t j = 0; j < e; ++j) c[j] = s[j] + (a.bias ? a.bias[j] : 0.f);
      if (a.n_group > 1) {
        const int64_t per = e / a.n_group;
        for (int g = 0; g < a.n_group; ++g) {
          float m1 = -INFINITY, m2 = -INFINITY;
          for (int64_t j = g * per; j < (g + 1) * per; ++j) {
            if (c[j] > m1) {
              m2 = m1;
              m1 = c[j];
            } else if (c[j] > m2) {
              m2 = c[j];
            }
          }
          gs[g] = a.group_top == 2 ? m1 + m2 : m1;
          gtaken[g] = 0;
        }
        std::vector<char> keep(a.n_group, 0);
        for (int i = 0; i < a.topk_group; ++i) {
          const int64_t g = best(gs.data(), gtaken, a.n_group);
          gtaken[g] = keep[g] = 1;
        }
        for (int64_t j = 0; j < e; ++j)
          if (!keep[j / per]) c[j] = -INFINITY;
      }
      std::fill(taken.begin(), taken.end(), 0);
      float* w = a.weights + r * a.k;
      int64_t* id = a.ids + r * a.k;
      float z = 0.f;
      for (int i = 0; i < a.k; ++i) {
        const int64_t j = best(c.data(), taken, e);
        taken[j] = 1;
        id[i] = j;
        w[i] = s[j];
        z += s[j];
      }
      const float f = static_cast<float>(a.scaling) / (a.renormalize ? z + 1e-20f : 1.f);
      for (int i = 0; i < a.k; ++i) w[i] *= f;
    }
  });
}

template <typename T>
void topk_backward(const MoeTopkArgs& a) {
  const int64_t e = a.experts;
  par::parallel_for(a.tokens, par::grain_for(8 * e), [&](int64_t rb, int64_t re) {
    std::vector<float> x(e), s(e), ds(e);
    for (int64_t r = rb; r < re; ++r) {
      vec::to_opmath(static_cast<const T*>(a.logits) + r * a.ld, x.data(), e);
      scores(a, x.data(), s.data());
      const int64_t* id = a.ids_in + r * a.k;
      const float* g = a.dweights + r * a.k;
      float z = 0.f, gz = 0.f;
      for (int i = 0; i < a.k; ++i) {
        if (id[i] < 0 || id[i] >= e) continue;  // (ids from elsewhere than the forward: skipped)
        z += s[id[i]];
        gz += g[i] * s[id[i]];
      }
      z += 1e-20f;
      std::fill(ds.begin(), ds.end(), 0.f);
      const float sc = static_cast<float>(a.scaling);
      for (int i = 0; i < a.k; ++i)
        if (id[i] >= 0 && id[i] < e) ds[id[i]] += a.renormalize ? sc * (g[i] / z - gz / (z * z)) : sc * g[i];
      float dot = 0.f;
      if (a.score == MoeScore::Softmax)
        for (int64_t j = 0; j < e; ++j) dot += ds[j] * s[j];
      T* dx = static_cast<T*>(a.dlogits) + r * e;
      for (int64_t j = 0; j < e; ++j) {
        const float v = a.score == MoeScore::Softmax ? s[j] * (ds[j] - dot) : ds[j] * s[j] * (1.f - s[j]);
        dx[j] = static_cast<T>(v);
      }
    }
  });
}

template <typename T>
void combine(const MoeCombineArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t n = a.cols;
  // A row in column blocks of 4096: the sum and the converted slot row stay in the core's caches (a 7168-wide
  // bfloat16 row summed over 8 slots a whole row at a time ran at a third of the bandwidth; 1024-column blocks
  // were 8% slower than 4096 ones, the hardware prefetcher losing each short stream); the slots are added in the
  // same order for every element, so the bits do not depend on the blocking.
  constexpr int64_t kCols = 4096;
  par::parallel_for(a.tokens, par::grain_for(2 * a.k * n), [&](int64_t tb, int64_t te) {
    A acc[kCols], buf[kCols];
    int64_t rows[kMoeMaxTopk];
    A ws[kMoeMaxTopk];
    for (int64_t t = tb; t < te; ++t) {
      int used = 0;
      for (int64_t s = 0; s < a.k; ++s) {
        const int64_t p = moe::slot_row(a, t, s);
        if (p < 0) continue;
        rows[used] = p;
        ws[used++] = a.weights ? static_cast<A>(a.weights[t * a.k + s]) : A(1);
      }
      for (int64_t j0 = 0; j0 < n; j0 += kCols) {
        const int64_t m = std::min(kCols, n - j0);
        std::fill(acc, acc + m, A(0));
        for (int u = 0; u < used; ++u) {
          const A* row = vec::as_opmath(static_cast<const T*>(a.rows) + rows[u] * n + j0, buf, m);
          const A w = ws[u];
          for (int64_t j = 0; j < m; ++j) acc[j] += w * row[j];
        }
        vec::from_opmath(acc, static_cast<T*>(a.out) + t * n + j0, m);
      }
    }
  });
}

template <typename T>
void combine_backward(const MoeCombineArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t n = a.cols;
  par::parallel_for(a.tokens, par::grain_for(3 * a.k * n), [&](int64_t tb, int64_t te) {
    std::vector<A> d(n), buf(n), out(n);
    for (int64_t t = tb; t < te; ++t) {
      vec::to_opmath(static_cast<const T*>(a.dout) + t * n, d.data(), n);
      for (int64_t s = 0; s < a.k; ++s) {
        const int64_t p = moe::slot_row(a, t, s);
        if (p < 0) {
          if (a.dweights) a.dweights[t * a.k + s] = 0.f;
          continue;
        }
        const A w = a.weights ? static_cast<A>(a.weights[t * a.k + s]) : A(1);
        if (a.drows) {
          for (int64_t j = 0; j < n; ++j) out[j] = w * d[j];
          vec::from_opmath(out.data(), static_cast<T*>(a.drows) + p * n, n);
        }
        if (a.dweights) {
          const A* row = vec::as_opmath(static_cast<const T*>(a.rows) + p * n, buf.data(), n);
          a.dweights[t * a.k + s] = static_cast<float>(vec::dot(d.data(), row, n));
        }
      }
    }
  });
}

} // namespace

MT_SIM_ENTRY rt::Status moe_topk(const MoeTopkArgs& a, rt::Stream) {
  if (rt::Status st = moe_check_topk(a); st != rt::Status::Success) return st;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { topk<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "moe_topk: expected floating logits");
}

MT_SIM_ENTRY rt::Status moe_topk_backward(const MoeTopkArgs& a, rt::Stream) {
  if (rt::Status st = moe_check_topk(a); st != rt::Status::Success) return st;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { topk_backward<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "moe_topk: expected floating logits");
}

MT_SIM_ENTRY rt::Status moe_combine(const MoeCombineArgs& a, rt::Stream) {
  if (a.tokens == 0 || a.cols == 0) return rt::Status::Success;
  if (a.k > kMoeMaxTopk) return rt::report(rt::Status::InvalidValue, "moe_combine: expected at most 32 slots a token");
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { combine<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "moe_combine: expected a floating dtype");
}

MT_SIM_ENTRY rt::Status moe_combine_backward(const MoeCombineArgs& a, rt::Stream) {
  if (a.tokens == 0 || a.cols == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { combine_backward<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "moe_combine: expected a floating dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, moe_topk, (const MoeTopkArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, moe_topk_backward, (const MoeTopkArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, moe_combine, (const MoeCombineArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, moe_combine_backward, (const MoeCombineArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
