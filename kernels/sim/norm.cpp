// sim normalisation (Note [Normalisation family]): per group / per channel loops, the groups (statistics, input
// gradients), the channels (weight gradients) and the (n, c) planes (the affine apply) split over the threads
// (Note [Sim parallelism]): each writes only its own group's, channel's or plane's outputs, in the order one thread
// would, so the bits do not depend on the thread count. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "mytorch/norm.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Note [Sim norm statistics]
// A group's (group norm) or channel's (batch norm in training) mean and squared deviations in two passes over its
// runs of consecutive elements (the group, or a plane per sample), each run summed in lanes, short runs too
// (vec::lanes_sum_of; Note [Sim row loops]):
// Welford's update (nrm::lane_stats, shared with CUDA) divides once per element in one dependency chain (group
// norm of 16x64x28x28 at 0.08x the CPU). Batch norm over runs shorter than kMinRun (1-D features) goes by columns
// (column_stats); group norm over such runs keeps lane_stats.
// Fixed by the shapes: the same bits at any thread count.
constexpr int64_t kMinRun = 8;

// The runs of consecutive elements of group g, in order: f(offset, length, channel). By channel: its planes (hw
// elements of one channel: group norm's channels, batch norm's channel in each sample), for what depends on the
// channel (the weight); else the longest runs (group norm's whole group, as its channels are consecutive planes).
template <typename F>
void for_each_run(const NormArgs& a, int64_t g, bool by_channel, F f) {
  if (a.kind == NormKind::Group) {
    const int64_t cpg = a.c / a.groups;
    int64_t ch = 0;
    const int64_t off = nrm::group_offset(a, g, 0, &ch);
    if (!by_channel) return f(off, cpg * a.hw, ch);
    for (int64_t k = 0; k < cpg; ++k) f(off + k * a.hw, a.hw, ch + k);
  } else {
    for (int64_t r = 0; r < a.n; ++r) f((r * a.c + g) * a.hw, a.hw, g);
  }
}

template <typename T, typename A>
bool run_stats(const NormArgs& a, int64_t g, red::Acc<A>* out) {
  const int64_t len = nrm::group_len(a), run = a.kind == NormKind::Group ? len : a.hw;
  if (run < kMinRun || len == 0) return false;
  const T* x0 = static_cast<const T*>(a.x);
  A s = 0;
  for_each_run(a, g, false, [&](int64_t off, int64_t n, int64_t) {
    const T* x = x0 + off;
    s += vec::lanes_sum_of<A>(n, [x](int64_t i) { return static_cast<A>(x[i]); });
  });
  const A mean = s / static_cast<A>(len);
  A m2 = 0;
  for_each_run(a, g, false, [&](int64_t off, int64_t n, int64_t) {
    const T* x = x0 + off;
    m2 += vec::lanes_sum_of<A>(n, [x, mean](int64_t i) {
      const A d = static_cast<A>(x[i]) - mean;
      return d * d;
    });
  });
  *out = red::Acc<A>{mean, m2, len};
  return true;
}

// Batch norm in training with planes shorter than kMinRun (BatchNorm1d's [N, C] and [N, C, L] with a short L): each
// channel's statistics by columns. Slot j of a row (channel j / hw) sums its column over the rows in row order, the
// rows read in memory order, so the loop over a row's slots vectorises; a channel then adds its hw slots in order.
// Two passes (the means, then the squared deviations). Slots split over the threads: fixed by the shapes.
template <typename T, typename P, typename A>
void column_stats(const NormArgs& a) {
  const int64_t width = a.c * a.hw, hw = a.hw;
  const T* x = static_cast<const T*>(a.x);
  std::vector<A> sum(static_cast<size_t>(width)), m2(static_cast<size_t>(width));
  std::vector<A> mean(static_cast<size_t>(a.c));
  auto columns = [&](auto&& f) {
    par::parallel_for(width, par::grain_for(4 * a.n), [&](int64_t b, int64_t e) {
      for (int64_t r = 0; r < a.n; ++r) f(x + r * width, b, e);
    });
  };
  columns([&](const T* row, int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) sum[j] += static_cast<A>(row[j]);
  });
  const A len = static_cast<A>(a.n * hw);
  for (int64_t ch = 0; ch < a.c; ++ch) {
    A s = 0;
    for (int64_t i = 0; i < hw; ++i) s += sum[ch * hw + i];
    mean[ch] = s / len;
  }
  std::vector<A> slot_mean(static_cast<size_t>(width));
  for (int64_t j = 0; j < width; ++j) slot_mean[j] = mean[j / hw];
  columns([&](const T* row, int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const A d = static_cast<A>(row[j]) - slot_mean[j];
      m2[j] += d * d;
    }
  });
  for (int64_t ch = 0; ch < a.c; ++ch) {
    A q = 0;
    for (int64_t i = 0; i < hw; ++i) q += m2[ch * hw + i];
    nrm::finish_stats<T, P, A>(a, ch, red::Acc<A>{mean[ch], q, a.n * hw});
  }
}

// One plane of the apply, y = nrm::affine(x) with the plane's constants. bfloat16 through sim_vec.h's bit conversions
// (c10's bits, in a loop GCC vectorises whole) and half through blocks converted by vec::to_opmath / from_opmath:
// c10's conversion per element kept the loop scalar (batch norm in eval over bfloat16 at 0.28x the CPU).
template <typename T, typename A>
void apply_plane(const T* x, T* y, int64_t hw, A mean, A rstd, A w, A bias) {
  if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<A, float>) {
    const auto* xb = reinterpret_cast<const uint16_t*>(x);
    auto* yb = reinterpret_cast<uint16_t*>(y);
    for (int64_t i = 0; i < hw; ++i)
      yb[i] = vec::float_to_bf16_bits(nrm::affine<A>(vec::bf16_bits_to_float(xb[i]), mean, rstd, w, bias));
  } else if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
    constexpr int64_t kBlock = 512;
    A buf[kBlock];
    for (int64_t c = 0; c < hw; c += kBlock) {
      const int64_t n = std::min(kBlock, hw - c);
      vec::to_opmath(x + c, buf, n);
      for (int64_t i = 0; i < n; ++i) buf[i] = nrm::affine<A>(buf[i], mean, rstd, w, bias);
      vec::from_opmath(buf, y + c, n);
    }
  } else {
    for (int64_t i = 0; i < hw; ++i) y[i] = static_cast<T>(nrm::affine<A>(static_cast<A>(x[i]), mean, rstd, w, bias));
  }
}

template <typename T, typename P>
void forward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
  if (a.kind == NormKind::Batch && !a.training) {
    for (int64_t g = 0; g < groups; ++g) nrm::eval_stats<P, A>(a, g);
  } else if (a.kind == NormKind::Batch && a.hw < kMinRun && a.n > 0) {
    column_stats<T, P, A>(a);
  } else {
    par::parallel_for(groups, par::grain_for(4 * len), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        red::Acc<A> acc;
        if (!run_stats<T, A>(a, g, &acc)) acc = nrm::lane_stats<T, A>(a, g, 0, 1);
        nrm::finish_stats<T, P, A>(a, g, acc);
      }
    });
  }
  // The apply, plane by plane: nrm::affine with the plane's constants hoisted (a loop that vectorises).
  const int64_t hw = a.hw;
  par::parallel_for(a.n * a.c, par::grain_for(hw), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t ch = pl % a.c, n = pl / a.c;
      const int64_t g = a.kind == NormKind::Group ? n * a.groups + ch / (a.c / a.groups) : ch;
      const A mean = static_cast<const A*>(a.mean)[g], rstd = static_cast<const A*>(a.rstd)[g];
      const A w = nrm::param<P, A>(a.weight, ch, A(1)), bias = nrm::param<P, A>(a.bias, ch, A(0));
      apply_plane<T, A>(static_cast<const T*>(a.x) + pl * hw, static_cast<T*>(a.y) + pl * hw, hw, mean, rstd, w, bias);
    }
  });
}

// The backward by planes (Note [Sim norm statistics]): a group's dx sums and a channel's weight and bias gradients as
// sums of planes in lanes, and dx with each plane's constants hoisted; nrm's per-element forms (a division per
// element for its position) otherwise.
template <typename T, typename P, typename A>
void dx_by_planes(const NormArgs& a, int64_t g) {
  namespace v = MT_SIM_ISA_NS::vec;
  const A mean = static_cast<const A*>(a.mean)[g], rstd = static_cast<const A*>(a.rstd)[g];
  const T *x0 = static_cast<const T*>(a.x), *dy0 = static_cast<const T*>(a.dy);
  const bool eval = a.kind == NormKind::Batch && !a.training;
  A s1 = 0, s2 = 0;
  if (!eval) {
    for_each_run(a, g, true, [&](int64_t off, int64_t, int64_t ch) {
      const A w = nrm::param<P, A>(a.weight, ch, A(1));
      const T *x = x0 + off, *dy = dy0 + off;
      s1 += v::lanes_sum_of<A>(a.hw, [=](int64_t i) { return static_cast<A>(dy[i]) * w; });
      s2 += v::lanes_sum_of<A>(
          a.hw, [=](int64_t i) { return static_cast<A>(dy[i]) * w * ((static_cast<A>(x[i]) - mean) * rstd); });
    });
  }
  const A inv_n = A(1) / static_cast<A>(nrm::group_len(a)), c1 = s1 * inv_n, c2 = s2 * inv_n;
  for_each_run(a, g, true, [&](int64_t off, int64_t, int64_t ch) {
    const A w = nrm::param<P, A>(a.weight, ch, A(1));
    const T *x = x0 + off, *dy = dy0 + off;
    T* dx = static_cast<T*>(a.dx) + off;
    if (eval) {
      for (int64_t i = 0; i < a.hw; ++i) dx[i] = static_cast<T>(static_cast<A>(dy[i]) * w * rstd);
    } else {
      for (int64_t i = 0; i < a.hw; ++i) {
        const A xhat = (static_cast<A>(x[i]) - mean) * rstd;
        dx[i] = static_cast<T>(nrm::dx_value<A>(static_cast<A>(dy[i]) * w, xhat, rstd, c1, c2));
      }
    }
  });
}

template <typename T, typename A>
void dw_by_planes(const NormArgs& a, int64_t ch, A* dw, A* db) {
  namespace v = MT_SIM_ISA_NS::vec;
  const T *x0 = static_cast<const T*>(a.x), *dy0 = static_cast<const T*>(a.dy);
  for (int64_t n = 0; n < a.n; ++n) {
    const int64_t g = a.kind == NormKind::Group ? n * a.groups + ch / (a.c / a.groups) : ch;
    const A mean = static_cast<const A*>(a.mean)[g], rstd = static_cast<const A*>(a.rstd)[g];
    const T *x = x0 + (n * a.c + ch) * a.hw, *dy = dy0 + (n * a.c + ch) * a.hw;
    *dw += v::lanes_sum_of<A>(
        a.hw, [=](int64_t i) { return static_cast<A>(dy[i]) * ((static_cast<A>(x[i]) - mean) * rstd); });
    *db += v::lanes_sum_of<A>(a.hw, [=](int64_t i) { return static_cast<A>(dy[i]); });
  }
}

// The backward of column_stats' case (batch norm over planes shorter than kMinRun): per channel, the sums of dy and of
// dy (x - mean) by columns as there, then dx row by row with each slot's channel constants (a loop that vectorises).
// The column sums run down all n rows one term at a time, so they are kept in double, as the CPU's batch norm
// backward keeps its sums (acc_type<float> is double on the CPU): in float, the weight and bias gradients of
// [96, 24, 3] were up to 10x the CPU's error (2 seeds in 300 outside the alignment rule).
template <typename T, typename P, typename A>
void column_backward(const NormArgs& a) {
  using S = double;
  const int64_t width = a.c * a.hw, hw = a.hw;
  const T *x = static_cast<const T*>(a.x), *dy = static_cast<const T*>(a.dy);
  const A *mean = static_cast<const A*>(a.mean), *rstd = static_cast<const A*>(a.rstd);
  std::vector<A> smean(static_cast<size_t>(width));
  std::vector<S> sdy(static_cast<size_t>(width)), sdyx(static_cast<size_t>(width));
  for (int64_t j = 0; j < width; ++j) smean[j] = mean[j / hw];
  par::parallel_for(width, par::grain_for(4 * a.n), [&](int64_t b, int64_t e) {
    for (int64_t r = 0; r < a.n; ++r) {
      const T *xr = x + r * width, *dyr = dy + r * width;
      for (int64_t j = b; j < e; ++j) {
        const A g = static_cast<A>(dyr[j]);
        sdy[j] += static_cast<S>(g);
        sdyx[j] += static_cast<S>(g) * static_cast<S>(static_cast<A>(xr[j]) - smean[j]);
      }
    }
  });
  const bool eval = !a.training;
  const A inv_n = A(1) / static_cast<A>(a.n * hw);
  std::vector<A> k_w(static_cast<size_t>(width)), k_r(static_cast<size_t>(width)), k_c1(static_cast<size_t>(width)),
      k_c2(static_cast<size_t>(width));
  for (int64_t ch = 0; ch < a.c; ++ch) {
    S sum_dy = 0, sum_dyx = 0;
    for (int64_t i = 0; i < hw; ++i) sum_dy += sdy[ch * hw + i], sum_dyx += sdyx[ch * hw + i];
    const A s_dy = static_cast<A>(sum_dy), s_dyx = static_cast<A>(sum_dyx);
    const A w = nrm::param<P, A>(a.weight, ch, A(1)), rs = rstd[ch];
    if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(s_dyx * rs);
    if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(s_dy);
    for (int64_t i = 0; i < hw; ++i) {
      const int64_t j = ch * hw + i;
      k_w[j] = w, k_r[j] = rs;
      k_c1[j] = w * s_dy * inv_n;        // sum(w dy) / n
      k_c2[j] = w * s_dyx * rs * inv_n;  // sum(w dy xhat) / n
    }
  }
  if (!a.dx) return;
  T* dx = static_cast<T*>(a.dx);
  par::parallel_for(a.n, par::grain_for(4 * width), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T *xr = x + r * width, *dyr = dy + r * width;
      T* dxr = dx + r * width;
      if (eval) {
        for (int64_t j = 0; j < width; ++j) dxr[j] = static_cast<T>(static_cast<A>(dyr[j]) * k_w[j] * k_r[j]);
        continue;
      }
      for (int64_t j = 0; j < width; ++j) {
        const A xhat = (static_cast<A>(xr[j]) - smean[j]) * k_r[j];
        dxr[j] = static_cast<T>(nrm::dx_value<A>(static_cast<A>(dyr[j]) * k_w[j], xhat, k_r[j], k_c1[j], k_c2[j]));
      }
    }
  });
}

template <typename T, typename P>
void backward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  if (a.kind == NormKind::Batch && a.hw < kMinRun && a.n > 0 && a.c > 0) return column_backward<T, P, A>(a);
  const bool planes = a.hw >= kMinRun;
  if (a.dx && planes) {
    par::parallel_for(nrm::group_count(a), par::grain_for(8 * nrm::group_len(a)), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) dx_by_planes<T, P, A>(a, g);
    });
  } else if (a.dx) {
    const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
    par::parallel_for(groups, par::grain_for(8 * len), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        A s1 = 0, s2 = 0;
        if (!(a.kind == NormKind::Batch && !a.training)) nrm::lane_dx_sums<T, P, A>(a, g, 0, 1, &s1, &s2);
        for (int64_t j = 0; j < len; ++j) nrm::dx_element<T, P, A>(a, g, j, s1, s2);
      }
    });
  }
  if (a.dweight || a.dbias) {
    par::parallel_for(a.c, par::grain_for(4 * nrm::channel_len(a)), [&](int64_t b, int64_t e) {
      for (int64_t ch = b; ch < e; ++ch) {
        A dw = 0, db = 0;
        if (planes) dw_by_planes<T, A>(a, ch, &dw, &db);
        else nrm::lane_dw_terms<T, A>(a, ch, 0, 1, &dw, &db);
        if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(dw);
        if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(db);
      }
    });
  }
}

template <bool fwd>
rt::Status run(const NormArgs& a) {
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    fwd ? forward<decltype(t), decltype(p)>(a) : backward<decltype(t), decltype(p)>(a);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue,
                         "norm: expected floating inputs with parameters of the same dtype or float32");
}

} // namespace

MT_SIM_ENTRY rt::Status norm_forward(const NormArgs& a, rt::Stream) { return run<true>(a); }
MT_SIM_ENTRY rt::Status norm_backward(const NormArgs& a, rt::Stream) { return run<false>(a); }

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
size_t norm_workspace_bytes(const NormArgs&) { return 0; }
MT_SIM_DISPATCH(rt::Status, norm_forward, (const NormArgs& a, rt::Stream st), (a, st))
MT_SIM_DISPATCH(rt::Status, norm_backward, (const NormArgs& a, rt::Stream st), (a, st))
} // namespace mytorch::sim
#endif
