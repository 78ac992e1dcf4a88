// CUDA reductions and scans (Note [Reduction engine]): reductions spread as Note [CUDA reduction plan] says
// (rows, columns, split chunks combined by a second pass); scans as Note [CUDA scan plan] says.
#include "common.cuh"
#include "mytorch/reduce.h"

namespace mytorch::cuda {
namespace {

template <typename O, typename A>
__device__ inline void store(void* base, int64_t off, A v) {
  static_cast<O*>(base)[off] = mt_cast<O, A>(v);
}

template <typename A>
__device__ inline void store_any(DType t, void* base, int64_t off, A v) {
  switch (t) {
    case DType::Bool: store<bool>(base, off, v); break;
    case DType::UInt8: store<uint8_t>(base, off, v); break;
    case DType::Int8: store<int8_t>(base, off, v); break;
    case DType::Int16: store<int16_t>(base, off, v); break;
    case DType::Int32: store<int32_t>(base, off, v); break;
    case DType::Int64: store<int64_t>(base, off, v); break;
    case DType::Half: store<c10::Half>(base, off, v); break;
    case DType::BFloat16: store<c10::BFloat16>(base, off, v); break;
    case DType::Float: store<float>(base, off, v); break;
    case DType::Double: store<double>(base, off, v); break;
    default: break;
  }
}

// Writes output o's result from its final accumulator (Note [CUDA reduction plan]).
template <RedOp op, typename A>
__device__ inline void finish(const ReduceArgs& r, int64_t o, const red::Acc<A>& acc) {
  using R = red::Reduction<op>;
  const red::RedOffsets at = red::red_output_offsets(r, o);
  A mean = A(0);
  const A v = R::project(acc, r.params, &mean);
  if (r.want_values) store_any(r.out_dtype, r.out, at.out, v);
  if (r.out2 != nullptr) {
    if constexpr (R::kOut2 == red::Out2::Index) {
      static_cast<int64_t*>(r.out2)[at.out2] = acc.n < 0 ? 0 : acc.n;
    } else if constexpr (R::kOut2 == red::Out2::Mean) {
      store_any(r.out_dtype, r.out2, at.out2, mean);
    }
  }
}

// A split plan's partial accumulator in the workspace: just the value when push and combine touch no more
// (red::kOneValue: sums, extrema, norms), else the whole state.
template <RedOp op, typename A>
__device__ inline void put_partial(void* ws, int64_t i, const red::Acc<A>& acc) {
  if constexpr (red::kOneValue<red::Reduction<op>>) static_cast<A*>(ws)[i] = acc.a;
  else static_cast<red::Acc<A>*>(ws)[i] = acc;
}
template <RedOp op, typename A>
__device__ inline red::Acc<A> get_partial(const void* ws, int64_t i, const RedParams& params) {
  if constexpr (red::kOneValue<red::Reduction<op>>) {
    red::Acc<A> acc = red::Reduction<op>::template init<A>(params);
    acc.a = static_cast<const A*>(ws)[i];
    return acc;
  } else {
    return static_cast<const red::Acc<A>*>(ws)[i];
  }
}

// 16 bytes of T, loaded at once.
template <typename T>
using Pack = Vec<T, 16 / sizeof(T)>;

// Rows: a block per (output, chunk); threads stride over the chunk's reduced elements, 16 bytes a load when
// they are one aligned contiguous run. kPartial: the block's accumulator goes to ws[o * splits + chunk].
template <RedOp op, typename T, bool kPartial>
__global__ void reduce_rows_kernel(ReduceArgs r, ReducePlan p) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);
  const T* in = static_cast<const T*>(r.in);
  const int64_t lo = int64_t(blockIdx.y) * p.chunk;
  const int64_t hi = lo + p.chunk < r.red_numel ? lo + p.chunk : r.red_numel;
  constexpr int kPack = 16 / sizeof(T);
  const bool dense = r.red_ndim == 1 && r.red_in_strides[0] == 1;
  for (const int64_t o : block_stride(r.out_numel)) {
    const int64_t in_base = red::red_output_offsets(r, o).in_base;
    red::Acc<A> acc = R::template init<A>(r.params);
    int64_t j = lo + threadIdx.x;
    if (dense && kPack > 1 && reinterpret_cast<uintptr_t>(in + in_base + lo) % 16 == 0) {
      const int64_t packs = (hi - lo) / kPack;
      const T* pk = in + in_base + lo;
      for (int64_t q = threadIdx.x; q < packs; q += blockDim.x) {
        const Pack<T> v = load_vec<T, kPack>(pk + q * kPack);
        for (int e = 0; e < kPack; ++e) R::push(acc, static_cast<A>(mt_load(&v.v[e])), lo + q * kPack + e, r.params);
      }
      j = lo + packs * kPack + threadIdx.x;  // the tail
    }
    for (; j < hi; j += blockDim.x)
      R::push(acc, static_cast<A>(mt_load(in + in_base + red::red_offset(r, j))), j, r.params);
    parts[threadIdx.x] = acc;
    block_tree(parts, [&](red::Acc<A>& x, const red::Acc<A>& y) { R::combine(x, y, r.params); });
    if (threadIdx.x == 0) {
      if constexpr (kPartial) put_partial<op>(r.workspace, o * p.splits + blockIdx.y, parts[0]);
      else finish<op>(r, o, parts[0]);
    }
    __syncthreads();
  }
}

// Columns: a block of kRedColumns x kRedColumnRows threads per (32 adjacent outputs, chunk): a warp reads one
// reduced row of its 32 outputs (adjacent in memory: coalesced), the block's rows interleave through the chunk
// and combine in shared memory in a fixed order. kPartial: the result goes to ws[chunk * out_numel + o].
template <typename A, typename Combine>
__device__ inline void column_tree(red::Acc<A>* parts, Combine combine) {
  __syncthreads();
  for (unsigned s = blockDim.y / 2; s > 0; s /= 2) {
    if (threadIdx.y < s)
      combine(parts[threadIdx.y * blockDim.x + threadIdx.x], parts[(threadIdx.y + s) * blockDim.x + threadIdx.x]);
    __syncthreads();
  }
}

template <RedOp op, typename T, bool kPartial, int kVec>
__global__ void reduce_columns_kernel(ReduceArgs r, ReducePlan p) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  using Group = Vec<T, kVec>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);  // [kVec][rows][blockDim.x]: lanes adjacent, no conflicts
  const T* in = static_cast<const T*>(r.in);
  const int64_t lo = int64_t(blockIdx.y) * p.chunk;
  const int64_t hi = lo + p.chunk < r.red_numel ? lo + p.chunk : r.red_numel;
  const int width = int(blockDim.x) * kVec;
  for (const int64_t base : block_stride(r.out_numel, width)) {
    const int64_t o = base + int64_t(threadIdx.x) * kVec;  // this thread's first output; kVec adjacent ones
    red::Acc<A> acc[kVec];
    for (int k = 0; k < kVec; ++k) acc[k] = R::template init<A>(r.params);
    if (o < r.out_numel) {
      const int64_t in_base = red::red_output_offsets(r, o).in_base;
      for (int64_t j = lo + threadIdx.y; j < hi; j += blockDim.y) {
        if constexpr (kVec == 1) {
          R::push(acc[0], static_cast<A>(mt_load(in + in_base + red::red_offset(r, j))), j, r.params);
        } else {  // the plan checked that the group starts 16-byte aligned in every reduced row
          const Group g = load_vec<T, kVec>(in + in_base + red::red_offset(r, j));
          for (int k = 0; k < kVec; ++k) R::push(acc[k], static_cast<A>(mt_load(&g.v[k])), j, r.params);
        }
      }
    }
    const int plane = int(blockDim.y * blockDim.x), at = int(threadIdx.y * blockDim.x + threadIdx.x);
    for (int k = 0; k < kVec; ++k) parts[k * plane + at] = acc[k];
    __syncthreads();
    for (unsigned s = blockDim.y / 2; s > 0; s /= 2) {
      if (threadIdx.y < s) {
        for (int k = 0; k < kVec; ++k) {
          R::combine(parts[k * plane + at], parts[k * plane + at + int(s * blockDim.x)], r.params);
        }
      }
      __syncthreads();
    }
    if (threadIdx.y == 0) {
      for (int k = 0; k < kVec && o + k < r.out_numel; ++k) {
        const red::Acc<A>& total = parts[k * plane + int(threadIdx.x)];
        if constexpr (kPartial) put_partial<op>(r.workspace, blockIdx.y * r.out_numel + o + k, total);
        else finish<op>(r, o + k, total);
      }
    }
    __syncthreads();
  }
}

// The second pass of a split plan: output o's partials combined in chunk order (a block per output for rows,
// a thread per output for columns).
template <RedOp op, typename T>
__global__ void __launch_bounds__(1024) reduce_finish_rows_kernel(ReduceArgs r, ReducePlan p) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);
  for (const int64_t o : block_stride(r.out_numel)) {
    red::Acc<A> acc = R::template init<A>(r.params);
    for (int64_t s = threadIdx.x; s < p.splits; s += blockDim.x) {
      R::combine(acc, get_partial<op, A>(r.workspace, o * p.splits + s, r.params), r.params);
    }
    parts[threadIdx.x] = acc;
    block_tree(parts, [&](red::Acc<A>& x, const red::Acc<A>& y) { R::combine(x, y, r.params); });
    if (threadIdx.x == 0) finish<op>(r, o, parts[0]);
    __syncthreads();
  }
}

template <RedOp op, typename T>
__global__ void __launch_bounds__(1024) reduce_finish_columns_kernel(ReduceArgs r, ReducePlan p) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);
  for (const int64_t base : block_stride(r.out_numel, blockDim.x)) {
    const int64_t o = base + threadIdx.x;
    red::Acc<A> acc = R::template init<A>(r.params);
    if (o < r.out_numel) {
      for (int64_t s = threadIdx.y; s < p.splits; s += blockDim.y) {
        R::combine(acc, get_partial<op, A>(r.workspace, s * r.out_numel + o, r.params), r.params);
      }
    }
    parts[threadIdx.y * blockDim.x + threadIdx.x] = acc;
    column_tree(parts, [&](red::Acc<A>& x, const red::Acc<A>& y) { R::combine(x, y, r.params); });
    if (threadIdx.y == 0 && o < r.out_numel) finish<op>(r, o, parts[threadIdx.x]);
    __syncthreads();
  }
}

constexpr int kRedFinishThreads = 1024;  // the finish kernels' __launch_bounds__

template <RedOp op>
rt::Status launch(const ReduceArgs& r, rt::Stream stream) {
  rt::Status st = rt::report(rt::Status::InvalidValue, "reduce: unsupported input dtype");
  dispatch_dtype(r.in_dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (red::supported<op, T>()) {
      using A = red::acc_t<op, T>;
      static_assert(sizeof(red::Acc<A>) <= kRedPartialBytes, "a partial accumulator larger than the plan's");
      const ReducePlan p = reduce_plan(r, device_sms());
      if (p.splits > 1 && r.workspace == nullptr) {
        st = rt::report(rt::Status::InvalidValue, "reduce: a split plan needs the workspace reduce_plan sizes");
        return;
      }
      const size_t shm = kRedThreads * sizeof(red::Acc<A>);
      const dim3 block(kRedThreads);
      const cudaStream_t s = native(stream);
      if (p.columns) {
        const dim3 cblock(kRedColumns, kRedColumnRows);
        const dim3 grid(grid_blocks(r.out_numel, kRedColumns * p.vec), static_cast<unsigned>(p.splits));
        const size_t cshm = kRedColumns * p.vec * kRedColumnRows * sizeof(red::Acc<A>);
        const bool vec = p.vec == 4;
        if constexpr (sizeof(T) == 4) {
          if (vec && p.splits > 1) reduce_columns_kernel<op, T, true, 4><<<grid, cblock, cshm, s>>>(r, p);
          else if (vec) reduce_columns_kernel<op, T, false, 4><<<grid, cblock, cshm, s>>>(r, p);
        }
        if (!vec && p.splits > 1) reduce_columns_kernel<op, T, true, 1><<<grid, cblock, cshm, s>>>(r, p);
        else if (!vec) reduce_columns_kernel<op, T, false, 1><<<grid, cblock, cshm, s>>>(r, p);
        if (p.splits > 1) {
          const dim3 fblock(kRedColumns, kRedFinishThreads / kRedColumns);
          const size_t fshm = kRedFinishThreads * sizeof(red::Acc<A>);
          reduce_finish_columns_kernel<op, T><<<grid_blocks(r.out_numel, kRedColumns), fblock, fshm, s>>>(r, p);
        }
      } else {
        const dim3 grid(grid_blocks(r.out_numel), static_cast<unsigned>(p.splits));
        if (p.splits > 1) {
          reduce_rows_kernel<op, T, true><<<grid, block, shm, s>>>(r, p);
          // few outputs, thousands of partials each: 1024 threads keep four times the loads in flight
          const size_t fshm = kRedFinishThreads * sizeof(red::Acc<A>);
          reduce_finish_rows_kernel<op, T><<<grid_blocks(r.out_numel), kRedFinishThreads, fshm, s>>>(r, p);
        } else {
          reduce_rows_kernel<op, T, false><<<grid, block, shm, s>>>(r, p);
        }
      }
      st = check_launch("reduce");
    }
  });
  return st;
}

template <ScanOp op, typename T>
__global__ void scan_kernel(ScanArgs s) {
  for (const int64_t l : grid_stride(s.lines)) {
    red::scan_line<op, T>(s, l);
  }
}

// A chunk's published state for the look-back (Note [CUDA scan plan]): flag 0 nothing yet, 1 aggregate, 2
// inclusive prefix (the aggregate of every chunk up to and including this one).
template <typename St>
struct ScanTile {
  St aggregate;
  St inclusive;
  int flag;
};

template <typename St>
__device__ inline int tile_flag(const ScanTile<St>* t) {
  return *reinterpret_cast<const volatile int*>(&t->flag);
}
// A published value, read past the cache (another block wrote it).
template <typename A>
__device__ inline A load_published(const A* p) {
  return *reinterpret_cast<const volatile A*>(p);
}
template <typename A>
__device__ inline red::IndexedState<A> load_published(const red::IndexedState<A>* p) {
  return {load_published(&p->v), load_published(&p->i)};
}
template <typename A>
__device__ inline A shfl_up_state(A v, int d) {
  return __shfl_up_sync(0xffffffffu, v, d);
}
template <typename A>
__device__ inline red::IndexedState<A> shfl_up_state(red::IndexedState<A> v, int d) {
  return {__shfl_up_sync(0xffffffffu, v.v, d), __shfl_up_sync(0xffffffffu, v.i, d)};
}

template <ScanOp op, typename T>
__global__ void scan_chunked_kernel(ScanArgs s, int64_t chunks) {
  using A = red::sum_acc_t<T>;
  using P = red::ScanPolicy<op, A>;
  using St = typename P::State;
  extern __shared__ unsigned char smem[];
  St* items = reinterpret_cast<St*>(smem);                // kScanChunk (+ padding) states
  St* warp_totals = items + padded_slot(int(kScanChunk));   // one per warp, then the chunk's prefix
  auto* tiles = static_cast<ScanTile<St>*>(s.workspace);
  __shared__ unsigned long long ticket;
  __shared__ int has_prefix;
  if (threadIdx.x == 0) {
    ticket = chunks > 1 ? atomicAdd(reinterpret_cast<unsigned long long*>(static_cast<char*>(s.workspace) +
                                                                          s.lines * chunks * sizeof(ScanTile<St>)),
                                    1ull)
                        : blockIdx.x;
  }
  __syncthreads();
  const int64_t v = static_cast<int64_t>(ticket);
  const int64_t line = v / chunks, chunk = v % chunks;
  const red::ScanLine at = red::scan_line_offsets(s, line);
  const int64_t start = chunk * kScanChunk;
  const int64_t n = s.length - start < kScanChunk ? s.length - start : kScanChunk;
  const T* in = static_cast<const T*>(s.in) + at.in + start;
  T* out = static_cast<T*>(s.out) + at.out + start;
  // coalesced loads: element k * kScanThreads + t by thread t
  for (int k = 0; k < kScanItems; ++k) {
    const int i = k * int(kScanThreads) + int(threadIdx.x);
    items[padded_slot(i)] = i < n ? P::make(static_cast<A>(mt_load(in + i)), start + i) : P::identity();
  }
  __syncthreads();
  // each thread scans its kScanItems consecutive elements
  const int first = int(threadIdx.x) * int(kScanItems);
  St run = items[padded_slot(first)];
  for (int k = 1; k < kScanItems; ++k) {
    run = P::combine(run, items[padded_slot(first + k)]);
    items[padded_slot(first + k)] = run;
  }
  // the threads' totals scanned across the warp (shuffles), then across the warps
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  St incl = run;
  for (int d = 1; d < 32; d *= 2) {
    const St other = shfl_up_state(incl, d);
    if (lane >= d) incl = P::combine(other, incl);
  }
  if (lane == 31) warp_totals[warp] = incl;
  __syncthreads();
  if (threadIdx.x == 0) {
    St acc = warp_totals[0];
    for (int w = 1; w < int(kScanThreads / 32); ++w) {
      acc = P::combine(acc, warp_totals[w]);
      warp_totals[w] = acc;
    }
    // the chunk's aggregate is acc; publish it and look back for the prefix of the chunks before
    St prefix = P::identity();
    bool chunk_has_prefix = false;
    if (chunks > 1) {
      ScanTile<St>* tile = tiles + line * chunks + chunk;
      if (chunk == 0) {
        tile->inclusive = acc;
        __threadfence();
        atomicExch(&tile->flag, 2);
      } else {
        tile->aggregate = acc;
        __threadfence();
        atomicExch(&tile->flag, 1);
        int64_t j = chunk - 1;
        while (true) {  // the nearest chunk with its inclusive prefix published
          int f;
          while ((f = tile_flag(tiles + line * chunks + j)) == 0) {}
          if (f == 2) break;
          --j;
        }
        __threadfence();
        prefix = load_published(&tiles[line * chunks + j].inclusive);
        for (int64_t k = j + 1; k < chunk; ++k) {
          prefix = P::combine(prefix, load_published(&tiles[line * chunks + k].aggregate));
        }
        chunk_has_prefix = true;
        tile->inclusive = P::combine(prefix, acc);
        __threadfence();
        atomicExch(&tile->flag, 2);
      }
    }
    warp_totals[kScanThreads / 32] = prefix;
    has_prefix = chunk_has_prefix ? 1 : 0;
  }
  __syncthreads();
  // this thread's exclusive prefix within the block: the chunks before, the warps before, the lanes before
  St before = P::identity();
  bool any = false;
  if (warp > 0) {
    before = warp_totals[warp - 1];
    any = true;
  }
  const St lane_excl = shfl_up_state(incl, 1);
  if (lane > 0) {
    before = any ? P::combine(before, lane_excl) : lane_excl;
    any = true;
  }
  if (has_prefix) {
    before = any ? P::combine(warp_totals[kScanThreads / 32], before) : warp_totals[kScanThreads / 32];
    any = true;
  }
  for (int k = 0; k < kScanItems; ++k) {
    St& x = items[padded_slot(first + k)];
    if (any) x = P::combine(before, x);
  }
  __syncthreads();
  int64_t* idx = s.indices ? static_cast<int64_t*>(s.indices) + at.idx + start : nullptr;
  for (int k = 0; k < kScanItems; ++k) {
    const int i = k * int(kScanThreads) + int(threadIdx.x);
    if (i < n) {
      out[i] = static_cast<T>(P::value(items[padded_slot(i)]));
      if constexpr (red::scan_indexed<op>()) idx[i] = P::index(items[padded_slot(i)]);
    }
  }
}

} // namespace

rt::Status reduce(const ReduceArgs& r, rt::Stream stream) {
  if (r.out_numel == 0) return rt::Status::Success;
  return red_visit(
      r.op, [&](auto op) { return launch<decltype(op)::value>(r, stream); },
      [] { return rt::report(rt::Status::InvalidValue, "reduce: unknown op"); });
}

rt::Status scan(const ScanArgs& s, rt::Stream stream) {
  if (s.lines == 0 || s.length == 0) return rt::Status::Success;
  const ScanPlan p = scan_plan(s);
  if (p.chunks > 1) {
    if (s.workspace == nullptr) {
      return rt::report(rt::Status::InvalidValue, "scan: a chunked scan needs the workspace scan_plan sizes");
    }
    if (cudaMemsetAsync(s.workspace, 0, p.workspace_bytes, native(stream)) != cudaSuccess) {
      return check_launch("scan: clearing the look-back tiles");
    }
  }
  return scan_visit(
      s.op,
      [&](auto op) {
        bool ok = false;
        dispatch_dtype(s.dtype, [&](auto tag) {
          using T = decltype(tag);
          constexpr ScanOp o = decltype(op)::value;
          if constexpr (red::scan_supported<o, T>()) {
            using A = red::sum_acc_t<T>;
            using St = typename red::ScanPolicy<o, A>::State;
            static_assert(sizeof(ScanTile<St>) <= kScanTileBytes, "a scan tile larger than the plan's");
            const cudaStream_t st = native(stream);
            if (p.chunked) {
              const size_t shm = (padded_slot(int(kScanChunk)) + kScanThreads / 32 + 1) * sizeof(St);
              const unsigned grid = static_cast<unsigned>(s.lines * p.chunks);
              scan_chunked_kernel<o, T><<<grid, kScanThreads, shm, st>>>(s, p.chunks);
            } else {
              scan_kernel<o, T><<<grid_for(s.lines), kThreads, 0, st>>>(s);
            }
            ok = true;
          }
        });
        if (!ok) return rt::report(rt::Status::InvalidValue, "scan: unsupported dtype");
        return check_launch("scan");
      },
      [] { return rt::report(rt::Status::InvalidValue, "scan: unknown op"); });
}

} // namespace mytorch::cuda
