// CUDA fused LLM family (Note [Fused LLM ops]): the gated-MLP activations, the rotary embedding and the
// cross-entropy rows of the fused linear + cross-entropy, each a memory-bound pass. glu: a thread per 16 bytes of each operand's row where every row stride and base allows it
// (else per element), the flat index split into (row, column) by fast division. rope: a thread per pair of a
// head's rotated elements (and per copied element past the rotary dims), so the op may run in place.
#include "common.cuh"
#include "mytorch/llm.h"
#include "mytorch/strided_index.h"

namespace mytorch::cuda {
namespace {

template <typename T, int V>
__global__ void glu_kernel(GluArgs a, DivMod per_row, bool forward) {
  using A = ew::opmath_t<T>;
  const int64_t total = a.rows * per_row.d;
  for (const int64_t i : grid_stride(total)) {
    int64_t c;
    const int64_t r = per_row.div(i, &c);
    c *= V;
    const Vec<T, V> g = load_vec<T, V>(static_cast<const T*>(a.gate) + r * a.gate_ld + c);
    const Vec<T, V> u = load_vec<T, V>(static_cast<const T*>(a.up) + r * a.up_ld + c);
    if (forward) {
      Vec<T, V> y;
#pragma unroll
      for (int k = 0; k < V; ++k) y.v[k] = T(llm::glu_act<T, A>(a.act, A(g.v[k])) * A(u.v[k]));
      store_vec<T, V>(static_cast<T*>(a.y) + r * a.y_ld + c, y);
      continue;
    }
    const Vec<T, V> d = load_vec<T, V>(static_cast<const T*>(a.dy) + r * a.dy_ld + c);
    Vec<T, V> dg, du;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const A dk = A(d.v[k]), gk = A(g.v[k]);
      dg.v[k] = T(llm::glu_act_backward<T, A>(a.act, dk * A(u.v[k]), gk));
      du.v[k] = T(dk * llm::glu_act<T, A>(a.act, gk));
    }
    store_vec<T, V>(static_cast<T*>(a.dgate) + r * a.dgate_ld + c, dg);
    store_vec<T, V>(static_cast<T*>(a.dup) + r * a.dup_ld + c, du);
  }
}

template <typename T>
void launch_glu(const GluArgs& a, bool forward, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  auto fits = [](const void* p, int64_t ld) {
    return p == nullptr || (reinterpret_cast<uintptr_t>(p) % 16 == 0 && ld % V == 0);
  };
  bool vec = a.cols % V == 0 && fits(a.gate, a.gate_ld) && fits(a.up, a.up_ld);
  vec =
      vec && (forward ? fits(a.y, a.y_ld) : fits(a.dy, a.dy_ld) && fits(a.dgate, a.dgate_ld) && fits(a.dup, a.dup_ld));
  const int64_t per_row = vec ? a.cols / V : a.cols, total = a.rows * per_row;
  const DivMod div(per_row, total);
  if (vec) glu_kernel<T, V><<<grid_for(total), kThreads, 0, s>>>(a, div, forward);
  else glu_kernel<T, 1><<<grid_for(total), kThreads, 0, s>>>(a, div, forward);
}

rt::Status run_glu(const GluArgs& a, bool forward, rt::Stream stream) {
  if (a.rows == 0 || a.cols == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { launch_glu<decltype(tag)>(a, forward, native(stream)); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "glu: expected a floating dtype");
  return check_launch(forward ? "glu_forward" : "glu_backward");
}

// A thread per item of a row: the rot / 2 pairs, then (out of place) the elements past rot.
template <typename T, typename C>
__global__ void rope_kernel(RopeArgs a, DivMod items, DivMod n2, DivMod n1) {
  using A = ew::opmath_t<T>;
  const int64_t total = a.n[0] * a.n[1] * a.n[2] * items.d, pairs = a.rot / 2;
  for (const int64_t i : grid_stride(total)) {
    int64_t k, i2, i1;
    const int64_t row = items.div(i, &k), rest = n2.div(row, &i2), i0 = n1.div(rest, &i1);
    const T* x = static_cast<const T*>(a.x) + i0 * a.x_st[0] + i1 * a.x_st[1] + i2 * a.x_st[2];
    T* y = static_cast<T*>(a.out) + i0 * a.out_st[0] + i1 * a.out_st[1] + i2 * a.out_st[2];
    if (k >= pairs) { // past the rotary dims
      y[a.rot + k - pairs] = x[a.rot + k - pairs];
      continue;
    }
    int64_t cs;
    if (!llm::rope_cs_row(a, i0, i1, i2, &cs)) continue;
    int64_t j0, j1;
    llm::rope_pair(a, k, &j0, &j1);
    const int64_t c0 = cs + llm::rope_cs_index(a, j0), c1 = cs + llm::rope_cs_index(a, j1);
    const C* cr = static_cast<const C*>(a.cos);
    const C* sr = static_cast<const C*>(a.sin);
    A y0, y1;
    llm::rope_rotate<A>(a.inverse, A(x[j0]), A(x[j1]), A(cr[c0]), A(sr[c0]), A(cr[c1]), A(sr[c1]), &y0, &y1);
    y[j0] = T(y0);
    y[j1] = T(y1);
  }
}

// A block per row (grid-stride over rows): one read for the online max / sum of exponentials and the logit sum,
// one read-and-write for the gradient over the logits.
template <typename T>
__global__ void ce_rows_kernel(CeRowsArgs a) {
  using A = ew::opmath_t<T>;
  __shared__ A smem[32];
  const A cap = A(a.softcap);
  for (const int64_t r : block_stride(a.rows)) {
    T* x = static_cast<T*>(a.logits) + r * a.ld;
    const int64_t t = a.target[r];
    bool ignored = t == a.ignore_index;
    if (!ignored && (t < 0 || t >= a.vocab)) {
      if (threadIdx.x == 0) record_error(a.error, t);
      ignored = true;
    }
    const A ct = !ignored && threadIdx.x == 0 ? llm::ce_cap(A(x[t]), cap) : A(0);
    A m = -INFINITY, s = 0, cs = 0;
    for (int64_t j = threadIdx.x; j < a.vocab; j += blockDim.x) {
      const A c = llm::ce_cap(A(x[j]), cap);
      cs += c;
      if (c > m) {
        s = s * std::exp(m - c) + A(1);
        m = c;
      } else {
        s += std::exp(c - m);
      }
    }
    const A mx = block_reduce(m, smem, MaxOp{}, A(-INFINITY));
    s = m == A(-INFINITY) ? A(0) : s * std::exp(m - mx);
    const A sum = block_reduce(s, smem, SumOp{}, A(0));
    const A csum = block_reduce(cs, smem, SumOp{}, A(0)); // (its barrier: x[t] read before any write below)
    const A lse = mx + std::log(sum);
    if (threadIdx.x == 0) {
      a.lse[r] = float(lse);
      a.loss[r] = ignored ? 0.f : float(llm::ce_row_loss(a, lse, ct, csum));
    }
    if (!a.grad) continue;
    const A scale = A(llm::ce_scale(a, r));
    for (int64_t j = threadIdx.x; j < a.vocab; j += blockDim.x) {
      const A c = llm::ce_cap(A(x[j]), cap);
      A g = llm::ce_grad(a, std::exp(c - lse), c, lse, scale);
      if (j == t) g += llm::ce_target_grad(a, c, scale);
      x[j] = ignored ? T(0.f) : T(g);
    }
  }
}

} // namespace

rt::Status glu_forward(const GluArgs& a, rt::Stream stream) { return run_glu(a, true, stream); }
rt::Status glu_backward(const GluArgs& a, rt::Stream stream) { return run_glu(a, false, stream); }

rt::Status rope(const RopeArgs& a, rt::Stream stream) {
  if (rt::Status st = rope_check(a); st != rt::Status::Success) return st;
  const int64_t rows = a.n[0] * a.n[1] * a.n[2];
  if (rows == 0 || a.head_dim == 0) return rt::Status::Success;
  const int64_t per_row = a.rot / 2 + (a.out != a.x ? a.head_dim - a.rot : 0);
  if (per_row == 0) return rt::Status::Success;
  const int64_t total = rows * per_row;
  const DivMod items(per_row, total), n2(a.n[2], rows), n1(a.n[1], rows);
  const cudaStream_t s = native(stream);
  const bool ok = dispatch_floating_with_param(a.dtype, a.cs_dtype, [&](auto t, auto c) {
    rope_kernel<decltype(t), decltype(c)><<<grid_for(total), kThreads, 0, s>>>(a, items, n2, n1);
  });
  if (!ok)
    return rt::report(rt::Status::InvalidValue, "rope: expected a floating x with cos/sin of its dtype or float32");
  return check_launch("rope");
}

rt::Status cross_entropy_rows(const CeRowsArgs& a, rt::Stream stream) {
  if (a.rows == 0) return rt::Status::Success;
  if (a.vocab <= 0) return rt::report(rt::Status::InvalidValue, "cross_entropy_rows: expected a non-empty vocabulary");
  const unsigned grid = grid_blocks(a.rows);
  const cudaStream_t s = native(stream);
  const bool ok =
      dispatch_floating(a.dtype, [&](auto tag) { ce_rows_kernel<decltype(tag)><<<grid, kThreads, 0, s>>>(a); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "cross_entropy_rows: expected floating logits");
  return check_launch("cross_entropy_rows");
}

} // namespace mytorch::cuda
