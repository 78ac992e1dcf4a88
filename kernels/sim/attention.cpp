// sim fused attention (Note [Fused attention]): the tiled online-softmax algorithm in loops, fp32
// accumulation — the C++ reference of the attention kernels.
#include <algorithm>
#include <vector>

#include "mytorch/attention.h"

namespace mytorch::sim {
namespace {

constexpr int64_t kTile = 64;

template <typename T>
void forward(const AttentionArgs& a) {
  using A = attn::acc_t<T>;
  std::vector<A> acc(static_cast<size_t>(a.dv)), s(kTile);
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.hq; ++h) {
      const int64_t hk = attn::kv_head(a, h);
      for (int64_t i = 0; i < a.lq; ++i) {
        A m = -INFINITY, l = 0.f;
        std::fill(acc.begin(), acc.end(), 0.f);
        const int64_t end = a.causal ? std::min(a.lk, i + 1) : a.lk;
        for (int64_t t0 = 0; t0 < end; t0 += kTile) {
          const int64_t t1 = std::min(end, t0 + kTile);
          A tile_max = -INFINITY;
          for (int64_t j = t0; j < t1; ++j) {
            A dot = 0.f;
            for (int64_t e = 0; e < a.d; ++e) dot += attn::ld<T>(a.q, b, h, i, e) * attn::ld<T>(a.k, b, hk, j, e);
            s[j - t0] = dot * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j);
            tile_max = std::max(tile_max, s[j - t0]);
          }
          const A m_new = std::max(m, tile_max);
          if (m_new == -INFINITY) continue;  // everything so far masked
          const A correction = std::exp(m - m_new);
          l *= correction;
          for (A& x : acc) x *= correction;
          for (int64_t j = t0; j < t1; ++j) {
            const A p = std::exp(s[j - t0] - m_new);
            l += p;
            const A pz = p * attn::dropout_factor(a, b, h, i, j);
            if (pz != 0.f)
              for (int64_t e = 0; e < a.dv; ++e) acc[e] += pz * attn::ld<T>(a.v, b, hk, j, e);
          }
          m = m_new;
        }
        T* o = static_cast<T*>(a.out.data) + b * a.out.sb + h * a.out.sh + i * a.out.ss;
        const A inv = 1.f / l;  // a fully masked row (l == 0) gives 0 (Note [Fused attention])
        for (int64_t e = 0; e < a.dv; ++e) o[e] = static_cast<T>(l > 0 ? acc[e] * inv : A(0));
        static_cast<A*>(a.lse)[(b * a.hq + h) * a.lq + i] = attn::row_lse(m, l);
      }
    }
}

template <typename T>
void backward(const AttentionArgs& a) {
  using A = attn::acc_t<T>;
  const int64_t group = a.hq / a.hkv;
  std::vector<A> dq(static_cast<size_t>(a.d)), dk(static_cast<size_t>(a.hkv * a.lk * a.d)),
      dvv(static_cast<size_t>(a.hkv * a.lk * a.dv));
  for (int64_t b = 0; b < a.b; ++b) {
    std::fill(dk.begin(), dk.end(), 0.f);
    std::fill(dvv.begin(), dvv.end(), 0.f);
    for (int64_t h = 0; h < a.hq; ++h) {
      const int64_t hk = attn::kv_head(a, h);
      for (int64_t i = 0; i < a.lq; ++i) {
        A delta = 0.f;
        for (int64_t e = 0; e < a.dv; ++e) delta += attn::ld<T>(a.dout, b, h, i, e) * attn::ld<T>(a.out, b, h, i, e);
        const A lse = static_cast<const A*>(a.lse)[(b * a.hq + h) * a.lq + i];
        std::fill(dq.begin(), dq.end(), 0.f);
        const int64_t end = a.causal ? std::min(a.lk, i + 1) : a.lk;
        for (int64_t j = 0; j < end; ++j) {
          A dot = 0.f;
          for (int64_t e = 0; e < a.d; ++e) dot += attn::ld<T>(a.q, b, h, i, e) * attn::ld<T>(a.k, b, hk, j, e);
          const A p = std::exp(dot * static_cast<A>(a.scale) + attn::bias_at(a, b, h, i, j) - lse);
          const A z = attn::dropout_factor(a, b, h, i, j);
          A dp = 0.f;
          for (int64_t e = 0; e < a.dv; ++e) {
            const A g = attn::ld<T>(a.dout, b, h, i, e);
            dvv[(hk * a.lk + j) * a.dv + e] += z * p * g;
            dp += g * attn::ld<T>(a.v, b, hk, j, e);
          }
          const A ds = p * (z * dp - delta) * static_cast<A>(a.scale);
          for (int64_t e = 0; e < a.d; ++e) {
            dq[e] += ds * attn::ld<T>(a.k, b, hk, j, e);
            dk[(hk * a.lk + j) * a.d + e] += ds * attn::ld<T>(a.q, b, h, i, e);
          }
        }
        T* dqp = static_cast<T*>(a.dq.data) + b * a.dq.sb + h * a.dq.sh + i * a.dq.ss;
        for (int64_t e = 0; e < a.d; ++e) dqp[e] = static_cast<T>(dq[e]);
      }
    }
    (void)group;
    for (int64_t hk = 0; hk < a.hkv; ++hk)
      for (int64_t j = 0; j < a.lk; ++j) {
        T* dkp = static_cast<T*>(a.dk.data) + b * a.dk.sb + hk * a.dk.sh + j * a.dk.ss;
        T* dvp = static_cast<T*>(a.dvv.data) + b * a.dvv.sb + hk * a.dvv.sh + j * a.dvv.ss;
        for (int64_t e = 0; e < a.d; ++e) dkp[e] = static_cast<T>(dk[(hk * a.lk + j) * a.d + e]);
        for (int64_t e = 0; e < a.dv; ++e) dvp[e] = static_cast<T>(dvv[(hk * a.lk + j) * a.dv + e]);
      }
  }
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

rt::Status attention_forward(const AttentionArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    if (a.split_ws) forward_split<decltype(tag)>(a);
    else forward<decltype(tag)>(a);
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
}

rt::Status attention_backward(const AttentionArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { backward<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "attention: expected a floating dtype");
}

} // namespace mytorch::sim
