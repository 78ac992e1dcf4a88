// CUDA normalisation (Note [Normalisation family]): a block per group for statistics and dx, a block per
// channel for the weight/bias gradients, a thread per element for the apply; when the groups (channels) are too few
// to fill the device, each is split over blocks (NormSplit): partial sums per range, combined in range order by a
// thread per group, and dx as an elementwise pass.
#include "common.cuh"
#include "mytorch/norm.h"
#include "mytorch/reduce.h"  // the split plan's constants (Note [CUDA reduction plan])

namespace mytorch::cuda {
namespace {

template <typename A>
struct Sum2 {
  A a, b;
};

// Two block-wide sums at once; every thread gets both.
template <typename A>
__device__ inline void block_sum2(A* v1, A* v2) {
  __shared__ Sum2<A> parts[kThreads];
  parts[threadIdx.x] = {*v1, *v2};
  block_tree(parts, [](Sum2<A>& x, const Sum2<A>& y) {
    x.a += y.a;
    x.b += y.b;
  });
  *v1 = parts[0].a;
  *v2 = parts[0].b;
  __syncthreads();
}

template <typename T, typename P, typename A>
__global__ void stats_kernel(NormArgs a) {
  __shared__ red::Acc<A> parts[kThreads];
  const int64_t groups = nrm::group_count(a);
  for (const int64_t g : block_stride(groups)) {
    if (a.kind == NormKind::Batch && !a.training) {
      if (threadIdx.x == 0) nrm::eval_stats<P, A>(a, g);
      continue;
    }
    parts[threadIdx.x] = nrm::lane_stats<T, A>(a, g, threadIdx.x, blockDim.x);
    block_tree(parts, [](red::Acc<A>& x, const red::Acc<A>& y) { red::welford_combine(x, y); });
    if (threadIdx.x == 0) nrm::finish_stats<T, P, A>(a, g, parts[0]);
    __syncthreads();
  }
}

template <typename T, typename P, typename A>
__global__ void apply_kernel(NormArgs a, int64_t total) {
  for (const int64_t off : grid_stride(total)) nrm::apply<T, P, A>(a, off);
}

template <typename T, typename P, typename A>
__global__ void dx_kernel(NormArgs a) {
  const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
  const bool eval = a.kind == NormKind::Batch && !a.training;
  for (const int64_t g : block_stride(groups)) {
    A s1 = 0, s2 = 0;
    if (!eval) {
      nrm::lane_dx_sums<T, P, A>(a, g, threadIdx.x, blockDim.x, &s1, &s2);
      block_sum2(&s1, &s2);
    }
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) nrm::dx_element<T, P, A>(a, g, j, s1, s2);
  }
}

template <typename T, typename P, typename A>
__global__ void dw_kernel(NormArgs a) {
  for (const int64_t ch : block_stride(a.c)) {
    A dw = 0, db = 0;
    nrm::lane_dw_terms<T, A>(a, ch, threadIdx.x, blockDim.x, &dw, &db);
    block_sum2(&dw, &db);
    if (threadIdx.x == 0) {
      if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(dw);
      if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(db);
    }
  }
}

// ---- split sums --------------------------------------------------------------------------------------------
// `items` groups (or channels) of `len` elements, each cut into `splits` ranges of `chunk` when the items alone
// would not make kRedTargetWaves waves of resident blocks (the reduction planner's rule); a range is at least
// kNormMinSplit elements.
constexpr int64_t kNormMinSplit = 4096;
struct NormSplit { int64_t items = 0, len = 0, splits = 1, chunk = 0; };
NormSplit norm_split(int64_t items, int64_t len) {
  NormSplit p{items, len, 1, len};
  const int64_t target = kRedTargetWaves * kRedBlocksPerSm * int64_t(device_sms());
  if (items <= 0 || len <= 0 || items >= target) return p;
  int64_t splits = std::min((target + items - 1) / items, len / kNormMinSplit);
  splits = std::min(splits, kRedMaxSplits);
  if (splits <= 1) return p;
  p.chunk = (len + splits - 1) / splits;
  p.splits = (len + p.chunk - 1) / p.chunk;
  return p;
}
bool batch_eval(const NormArgs& a) { return a.kind == NormKind::Batch && !a.training; }
// The workspace: the statistics' (or dx sums') partials per (group, range), the dx sums per group, the weight
// and bias partials per (channel, range).
struct NormLayout {
  NormSplit groups, channels;
  size_t finals = 0, channel_parts = 0, bytes = 0;
};
NormLayout norm_layout(const NormArgs& a) {
  NormLayout l;
  l.groups = norm_split(nrm::group_count(a), nrm::group_len(a));
  l.channels = norm_split(a.c, nrm::channel_len(a));
  l.finals = size_t(l.groups.items * l.groups.splits) * sizeof(red::Acc<double>);
  l.channel_parts = l.finals + size_t(l.groups.items) * 2 * sizeof(double);
  l.bytes = l.channel_parts + size_t(l.channels.items * l.channels.splits) * 2 * sizeof(double);
  return l;
}

template <typename T, typename A>
__global__ void stats_partial_kernel(NormArgs a, NormSplit p) {
  __shared__ red::Acc<double> parts[kThreads];
  const int64_t g = blockIdx.x, lo = int64_t(blockIdx.y) * p.chunk;
  const int64_t hi = lo + p.chunk < p.len ? lo + p.chunk : p.len;
  const red::Acc<A> acc = nrm::lane_stats<T, A>(a, g, lo + threadIdx.x, blockDim.x, hi);
  parts[threadIdx.x] = red::Acc<double>{double(acc.a), double(acc.b), acc.n};
  block_tree(parts, [](red::Acc<double>& x, const red::Acc<double>& y) { red::welford_combine(x, y); });
  if (threadIdx.x == 0) static_cast<red::Acc<double>*>(a.workspace)[g * p.splits + blockIdx.y] = parts[0];
}

template <typename T, typename P, typename A>
__global__ void stats_finish_kernel(NormArgs a, NormSplit p) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= p.items) return;
  const auto* part = static_cast<const red::Acc<double>*>(a.workspace) + g * p.splits;
  red::Acc<double> t = part[0];
  for (int64_t s = 1; s < p.splits; ++s) red::welford_combine(t, part[s]);
  nrm::finish_stats<T, P, A>(a, g, red::Acc<A>{static_cast<A>(t.a), static_cast<A>(t.b), t.n});
}

// dx sums (kind 0) of a range of a group, or weight/bias terms (kind 1) of a range of a channel: two partials.
template <typename T, typename P, typename A, int kind>
__global__ void sums_partial_kernel(NormArgs a, NormSplit p, double* out) {
  const int64_t item = blockIdx.x, lo = int64_t(blockIdx.y) * p.chunk;
  const int64_t hi = lo + p.chunk < p.len ? lo + p.chunk : p.len;
  A s1 = 0, s2 = 0;
  if constexpr (kind == 0) nrm::lane_dx_sums<T, P, A>(a, item, lo + threadIdx.x, blockDim.x, &s1, &s2, hi);
  else nrm::lane_dw_terms<T, A>(a, item, lo + threadIdx.x, blockDim.x, &s1, &s2, hi);
  block_sum2(&s1, &s2);
  if (threadIdx.x == 0) {
    out[2 * (item * p.splits + blockIdx.y)] = double(s1);
    out[2 * (item * p.splits + blockIdx.y) + 1] = double(s2);
  }
}

// The item's partials in range order: the dx sums into `finals` (kind 0), or dweight / dbias (kind 1) and, when
// `finals` is set (batch norm, whose groups are its channels), also the dx sums from them: sum(w dy) = w db and
// sum(w dy xhat) = w dw, so that one pass over x and dy serves both.
template <typename P, int kind>
__global__ void sums_finish_kernel(NormArgs a, NormSplit p, const double* parts, double* finals) {
  const int64_t item = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= p.items) return;
  double s1 = 0, s2 = 0;
  for (int64_t s = 0; s < p.splits; ++s) {
    s1 += parts[2 * (item * p.splits + s)];
    s2 += parts[2 * (item * p.splits + s) + 1];
  }
  if constexpr (kind == 0) {
    finals[2 * item] = s1;
    finals[2 * item + 1] = s2;
  } else {
    if (a.dweight) static_cast<P*>(a.dweight)[item] = static_cast<P>(s1);
    if (a.dbias) static_cast<P*>(a.dbias)[item] = static_cast<P>(s2);
    if (finals) {
      const double w = nrm::param<P, double>(a.weight, item, 1.0);
      finals[2 * item] = w * s2;
      finals[2 * item + 1] = w * s1;
    }
  }
}

template <typename T, typename P, typename A>
__global__ void dx_apply_kernel(NormArgs a, int64_t total, const double* finals) {
  for (const int64_t off : grid_stride(total)) {
    int64_t ch = 0;
    const int64_t g = nrm::group_of(a, off, &ch);
    nrm::dx_at<T, P, A>(a, off, g, ch, static_cast<A>(finals[2 * g]), static_cast<A>(finals[2 * g + 1]));
  }
}

template <typename T, typename P>
void forward(const NormArgs& a, cudaStream_t s) {
  using A = ew::opmath_t<T>;
  const int64_t groups = nrm::group_count(a), total = groups * nrm::group_len(a);
  const NormLayout l = norm_layout(a);
  if (l.groups.splits > 1 && !batch_eval(a) && a.workspace) {
    const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(l.groups.splits));
    stats_partial_kernel<T, A><<<grid, kThreads, 0, s>>>(a, l.groups);
    stats_finish_kernel<T, P, A><<<grid_for(groups), kThreads, 0, s>>>(a, l.groups);
  } else {
    stats_kernel<T, P, A><<<grid_blocks(groups), kThreads, 0, s>>>(a);
  }
  if (total > 0) apply_kernel<T, P, A><<<grid_for(total), kThreads, 0, s>>>(a, total);
}

template <typename T, typename P>
void backward(const NormArgs& a, cudaStream_t s) {
  using A = ew::opmath_t<T>;
  const NormLayout l = norm_layout(a);
  char* ws = static_cast<char*>(a.workspace);
  const int64_t groups = nrm::group_count(a), total = groups * nrm::group_len(a);
  double* finals = reinterpret_cast<double*>(ws + l.finals);
  const bool split_dx = a.dx && l.groups.splits > 1 && !batch_eval(a) && ws;
  const bool split_dw = (a.dweight || a.dbias) && l.channels.splits > 1 && ws;
  // batch norm in training: its channels are its groups, one pass of weight/bias sums gives the dx sums too
  const bool shared = split_dx && a.kind == NormKind::Batch;
  if (split_dw || shared) {
    double* parts = reinterpret_cast<double*>(ws + l.channel_parts);
    const dim3 grid(static_cast<unsigned>(a.c), static_cast<unsigned>(l.channels.splits));
    sums_partial_kernel<T, P, A, 1><<<grid, kThreads, 0, s>>>(a, l.channels, parts);
    sums_finish_kernel<P, 1><<<grid_for(a.c), kThreads, 0, s>>>(a, l.channels, parts, shared ? finals : nullptr);
  } else if (a.dweight || a.dbias) {
    dw_kernel<T, P, A><<<grid_blocks(a.c), kThreads, 0, s>>>(a);
  }
  if (split_dx) {
    if (!shared) {
      double* parts = reinterpret_cast<double*>(ws);
      const dim3 grid(static_cast<unsigned>(groups), static_cast<unsigned>(l.groups.splits));
      sums_partial_kernel<T, P, A, 0><<<grid, kThreads, 0, s>>>(a, l.groups, parts);
      sums_finish_kernel<P, 0><<<grid_for(groups), kThreads, 0, s>>>(a, l.groups, parts, finals);
    }
    if (total > 0) dx_apply_kernel<T, P, A><<<grid_for(total), kThreads, 0, s>>>(a, total, finals);
  } else if (a.dx) {
    dx_kernel<T, P, A><<<grid_blocks(groups), kThreads, 0, s>>>(a);
  }
}

template <bool fwd>
rt::Status run(const NormArgs& a, rt::Stream stream) {
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    fwd ? forward<T, P>(a, native(stream)) : backward<T, P>(a, native(stream));
  });
  if (!ok)
    return rt::report(rt::Status::InvalidValue,
                      "norm: expected floating inputs with parameters of the same dtype or float32");
  return check_launch(fwd ? "norm forward" : "norm backward");
}

} // namespace

size_t norm_workspace_bytes(const NormArgs& a) {
  const NormLayout l = norm_layout(a);
  return l.groups.splits > 1 || l.channels.splits > 1 ? l.bytes : 0;
}
rt::Status norm_forward(const NormArgs& a, rt::Stream stream) { return run<true>(a, stream); }
rt::Status norm_backward(const NormArgs& a, rt::Stream stream) { return run<false>(a, stream); }

} // namespace mytorch::cuda
