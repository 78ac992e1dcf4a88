// CUDA fused LayerNorm / RMSNorm (Note [Fused LayerNorm]). Three shapes by row width:
//   narrow (<= 1024 elements): a warp per row, eight rows per block, the row in registers;
//   wide (<= 16384): a block of 512 threads per row, the row in registers (32 elements per thread);
//   wider: a block per row re-reading the row from device memory (the statistics stay exact two-pass).
// Loads and stores are 16-byte vectors when every row pointer is 16-byte aligned and the width divides.
// The backward accumulates dw/db per thread in registers (or, for the widest rows, in the slot's own
// workspace row) and the reduction planner's column sums combine the slots in a fixed order: deterministic, no
// atomics.
#include <algorithm>

#include "common.cuh"
#include "mytorch/layernorm.h"
#include "mytorch/reduce.h"

namespace mytorch::cuda {
namespace {

constexpr int kWarpBlock = 256;   // narrow path: 8 warps, 8 rows per block
constexpr int kRowBlock = 512;    // wide paths: one row per block
constexpr int kPerThread = 32;    // elements a thread holds in registers
constexpr int64_t kNarrow = 32 * kPerThread;
constexpr int64_t kWide = kRowBlock * kPerThread;

enum Shape { Narrow, Wide, Wider };

Shape shape_of(int64_t cols) { return cols <= kNarrow ? Narrow : cols <= kWide ? Wide : Wider; }

template <typename T, int VEC, typename A>
__device__ inline void load(const T* p, A* v) {
  if constexpr (VEC == 1) {
    v[0] = static_cast<A>(p[0]);
  } else {
    alignas(16) T tmp[VEC];
    *reinterpret_cast<uint4*>(tmp) = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = static_cast<A>(tmp[k]);
  }
}

template <typename T, int VEC, typename A>
__device__ inline void store(T* p, const A* v) {
  if constexpr (VEC == 1) {
    p[0] = static_cast<T>(v[0]);
  } else {
    alignas(16) T tmp[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) tmp[k] = static_cast<T>(v[k]);
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(tmp);
  }
}

// Sum over the threads of one row: the warp (TPR == 32) or the whole block.
template <int TPR, typename A>
__device__ inline A row_sum(A v, A* red) {
  if constexpr (TPR == 32) return warp_sum(v);
  else return block_reduce(v, red, SumOp{}, A(0));
}

// The normalised input value(s) at column j: x (+ residual, rounded like the stored sum, which is written).
template <typename T, int VEC, typename A>
__device__ inline void input_at(const RowNormArgs& a, int64_t off, A* v, bool write_sum) {
  load<T, VEC>(static_cast<const T*>(a.x) + off, v);
  if (a.residual) {
    A r[VEC];
    load<T, VEC>(static_cast<const T*>(a.residual) + off, r);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = static_cast<A>(static_cast<T>(v[k] + r[k]));
    if (write_sum) store<T, VEC>(static_cast<T*>(a.sum) + off, v);
  }
}

// Forward. REGS: the row lives in registers (Narrow, Wide); else it is re-read (Wider; with a residual the
// re-read takes the stored sum).
template <typename T, typename P, int TPR, int VEC, bool REGS>
__global__ void __launch_bounds__(TPR == 32 ? kWarpBlock : kRowBlock) forward_kernel(RowNormArgs a) {
  using A = ew::opmath_t<T>;
  constexpr int K = kPerThread / VEC;
  __shared__ A red[32];
  const int rpb = blockDim.x / TPR, lane = threadIdx.x % TPR;
  const int64_t cols = a.cols;
  const A inv_n = A(1) / static_cast<A>(cols);
  for (const int64_t row : block_stride(a.rows, rpb, threadIdx.x / TPR)) {
    const int64_t base = row * cols;
    A vals[REGS ? kPerThread : 1];
    A s = 0;
    if constexpr (REGS) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = (int64_t(k) * TPR + lane) * VEC;
        if (j < cols) {
          input_at<T, VEC>(a, base + j, vals + k * VEC, true);
#pragma unroll
          for (int e = 0; e < VEC; ++e) s += vals[k * VEC + e];
        }
      }
    } else {
      for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
        A v[VEC];
        input_at<T, VEC>(a, base + j, v, true);
#pragma unroll
        for (int e = 0; e < VEC; ++e) s += v[e];
      }
    }
    const A mean = a.rms ? A(0) : row_sum<TPR>(s, red) * inv_n;
    const T* src = static_cast<const T*>(a.residual ? a.sum : a.x);
    A sq = 0;
    if constexpr (REGS) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = (int64_t(k) * TPR + lane) * VEC;
        if (j < cols) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) sq += (vals[k * VEC + e] - mean) * (vals[k * VEC + e] - mean);
        }
      }
    } else {
      for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
        A v[VEC];
        load<T, VEC>(src + base + j, v);
#pragma unroll
        for (int e = 0; e < VEC; ++e) sq += (v[e] - mean) * (v[e] - mean);
      }
    }
    const A rstd = lnm::overflow_is_nan(A(1) / sqrt(row_sum<TPR>(sq, red) * inv_n + static_cast<A>(a.eps)), a.rms);
    if (lane == 0) {
      if (a.mean) static_cast<A*>(a.mean)[row] = mean;
      static_cast<A*>(a.rstd)[row] = rstd;
    }
    auto write = [&](int64_t j, const A* v) {
      A out[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        out[e] = (v[e] - mean) * rstd * lnm::param<P, A>(a.weight, j + e, A(1)) + lnm::param<P, A>(a.bias, j + e, A(0));
      store<T, VEC>(static_cast<T*>(a.y) + base + j, out);
    };
    if constexpr (REGS) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = (int64_t(k) * TPR + lane) * VEC;
        if (j < cols) write(j, vals + k * VEC);
      }
    } else {
      for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
        A v[VEC];
        load<T, VEC>(src + base + j, v);
        write(j, v);
      }
    }
  }
}

// The narrow backward's warps' dw or db registers summed into warp 0's, in a fixed tree order (warp w += warp
// w + half, half = 4, 2, 1) through shared memory: a block writes one row of partials, not one per warp.
template <typename A, int K, int VEC>
__device__ inline void combine_warps(A* v, int cols, A* buf) {
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
#pragma unroll
  for (int half = kWarpBlock / 64; half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int j = (k * 32 + lane) * VEC + e;
          if (j < cols) buf[(warp - half) * kNarrow + j] = v[k * VEC + e];
        }
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const int j = (k * 32 + lane) * VEC + e;
          if (j < cols) v[k * VEC + e] += buf[warp * kNarrow + j];
        }
    }
    __syncthreads();
  }
}

// Backward: dx per row in two passes over (x, dy); dw/db partials per block (the narrow path's warps combined) in
// registers (REGS) or in the block's workspace row (Wider: one row per block).
template <typename T, typename P, int TPR, int VEC, bool REGS>
__global__ void __launch_bounds__(TPR == 32 ? kWarpBlock : kRowBlock)
    backward_kernel(RowNormArgs a, ew::opmath_t<T>* part_w, ew::opmath_t<T>* part_b) {
  using A = ew::opmath_t<T>;
  constexpr int K = kPerThread / VEC;
  __shared__ A red[32];
  const int rpb = blockDim.x / TPR, lane = threadIdx.x % TPR;
  const int64_t cols = a.cols, slot = int64_t(blockIdx.x) * rpb + threadIdx.x / TPR;
  const A inv_n = A(1) / static_cast<A>(cols);
  const bool want_w = a.dweight != nullptr, want_b = a.dbias != nullptr;
  A pw[REGS ? kPerThread : 1], pb[REGS ? kPerThread : 1];
#pragma unroll
  for (int e = 0; e < (REGS ? kPerThread : 1); ++e) pw[e] = pb[e] = A(0);
  A* slot_w = part_w + slot * cols;
  A* slot_b = part_b + slot * cols;
  if (!REGS) {  // the slot's workspace row, each element zeroed by the thread that accumulates it
    for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (want_w) slot_w[j + e] = A(0);
        if (want_b) slot_b[j + e] = A(0);
      }
    }
  }
  // The block path has one slot per block, so the trip count is uniform across the block (row_sum syncs).
  for (int64_t row = slot; row < a.rows; row += int64_t(gridDim.x) * rpb) {
    const int64_t base = row * cols;
    const A mean = a.rms ? A(0) : static_cast<const A*>(a.mean)[row];
    const A rstd = static_cast<const A*>(a.rstd)[row];
    A s1 = 0, s2 = 0;
    auto visit = [&](int64_t j, A* w_acc, A* b_acc, bool accumulate) {
      A x[VEC], g[VEC];
      load<T, VEC>(static_cast<const T*>(a.x) + base + j, x);
      load<T, VEC>(static_cast<const T*>(a.dy) + base + j, g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const A xhat = (x[e] - mean) * rstd;
        const A wdy = g[e] * lnm::param<P, A>(a.weight, j + e, A(1));
        s1 += wdy;
        s2 += wdy * xhat;
        if (accumulate) {
          w_acc[e] += g[e] * xhat;
          b_acc[e] += g[e];
        }
      }
    };
    if constexpr (REGS) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = (int64_t(k) * TPR + lane) * VEC;
        if (j < cols) visit(j, pw + k * VEC, pb + k * VEC, true);
      }
    } else {
      for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
        A w_acc[VEC] = {}, b_acc[VEC] = {};
        visit(j, w_acc, b_acc, true);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          if (want_w) slot_w[j + e] += w_acc[e];
          if (want_b) slot_b[j + e] += b_acc[e];
        }
      }
    }
    s1 = a.rms ? A(0) : row_sum<TPR>(s1, red);
    s2 = row_sum<TPR>(s2, red);
    if (!a.dx) continue;
    for (int64_t j = int64_t(lane) * VEC; j < cols; j += int64_t(TPR) * VEC) {
      A x[VEC], g[VEC], out[VEC];
      load<T, VEC>(static_cast<const T*>(a.x) + base + j, x);
      load<T, VEC>(static_cast<const T*>(a.dy) + base + j, g);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const A xhat = (x[e] - mean) * rstd;
        const A wdy = g[e] * lnm::param<P, A>(a.weight, j + e, A(1));
        out[e] = rstd * (wdy - s1 * inv_n - xhat * s2 * inv_n);
      }
      store<T, VEC>(static_cast<T*>(a.dx) + base + j, out);
    }
  }
  if constexpr (REGS) {
    if constexpr (TPR == 32) {
      __shared__ A buf[(kWarpBlock / 64) * kNarrow];
      if (want_w) combine_warps<A, K, VEC>(pw, int(cols), buf);
      if (want_b) combine_warps<A, K, VEC>(pb, int(cols), buf);
    }
    A* row_w = part_w + int64_t(blockIdx.x) * cols;
    A* row_b = part_b + int64_t(blockIdx.x) * cols;
    if (TPR != 32 || threadIdx.x < 32) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = (int64_t(k) * TPR + lane) * VEC;
        if (j < cols) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if (want_w) row_w[j + e] = pw[k * VEC + e];
            if (want_b) row_b[j + e] = pb[k * VEC + e];
          }
        }
      }
    }
  }
}

// Blocks for `rows`: every row gets its group, up to a few waves (the backward's slots stay bounded).
unsigned grid_rows(int64_t rows, int rpb) {
  const int64_t need = (rows + rpb - 1) / rpb;
  const int64_t cap = int64_t(device_sms()) * (rpb > 1 ? 8 : 4);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(need, cap)));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <typename T>
bool vectorizable(const RowNormArgs& a, bool backward) {
  constexpr int n = 16 / sizeof(T);
  if (a.cols % n) return false;
  const void* ptrs[] = {a.x, a.residual, a.sum, a.y, a.dy, a.dx};
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  (void)backward;
  return true;
}

template <typename T, typename P, int VEC>
void launch_forward(const RowNormArgs& a, cudaStream_t s) {
  switch (shape_of(a.cols)) {
    case Narrow:
      forward_kernel<T, P, 32, VEC, true><<<grid_rows(a.rows, kWarpBlock / 32), kWarpBlock, 0, s>>>(a);
      break;
    case Wide: forward_kernel<T, P, kRowBlock, VEC, true><<<grid_rows(a.rows, 1), kRowBlock, 0, s>>>(a); break;
    case Wider: forward_kernel<T, P, kRowBlock, VEC, false><<<grid_rows(a.rows, 1), kRowBlock, 0, s>>>(a); break;
  }
}

// The backward's workspace: dw and db partials ([slots, cols] each, in slot order, each 16-byte aligned), then the
// workspace of the column sums that combine them.
struct BackwardLayout {
  int64_t slots = 0;
  size_t part_b = 0, sums = 0, bytes = 0;  // byte offsets, total
};

// dw or db: column sums of the slots' partials by the reduction planner (Note [CUDA reduction plan]: its columns
// plan reads each row of partials coalesced and splits the slots over blocks when the columns are few), in a
// fixed order: deterministic, no atomics.
ReduceArgs partial_sums(const RowNormArgs& a, int64_t slots, const void* part, void* out, void* ws) {
  ReduceArgs r;
  r.op = RedOp::Sum;
  r.in_dtype = a.dtype == DType::Double ? DType::Double : DType::Float;  // the partials' opmath type
  r.out_dtype = a.param_dtype;
  r.in = part;
  r.out = out;
  r.out_ndim = 1;
  r.out_sizes[0] = a.cols;
  r.out_in_strides[0] = 1;
  r.out_strides[0] = 1;
  r.red_ndim = 1;
  r.red_sizes[0] = slots;
  r.red_in_strides[0] = a.cols;
  r.out_numel = a.cols;
  r.red_numel = slots;
  r.params.count = slots;
  r.workspace = ws;
  return r;
}

BackwardLayout backward_layout(const RowNormArgs& a) {
  BackwardLayout l;
  const int rpb = shape_of(a.cols) == Narrow ? kWarpBlock / 32 : 1;
  l.slots = int64_t(grid_rows(a.rows, rpb));  // a row of partials per block
  const size_t acc = a.dtype == DType::Double ? sizeof(double) : sizeof(float);
  const size_t part = (static_cast<size_t>(l.slots * a.cols) * acc + 255) / 256 * 256;
  l.part_b = part;
  l.sums = 2 * part;
  // planned for 16-byte aligned partials (the largest workspace: vector loads mean fewer blocks, more splits)
  l.bytes = l.sums + reduce_plan(partial_sums(a, l.slots, nullptr, nullptr, nullptr), device_sms()).workspace_bytes;
  return l;
}

template <typename T, typename P, int VEC>
rt::Status launch_backward(const RowNormArgs& a, cudaStream_t s) {
  using A = ew::opmath_t<T>;
  const Shape sh = shape_of(a.cols);
  const int rpb = sh == Narrow ? kWarpBlock / 32 : 1;
  const unsigned grid = grid_rows(a.rows, rpb);
  const BackwardLayout l = backward_layout(a);
  char* ws = static_cast<char*>(a.workspace);
  A* part_w = reinterpret_cast<A*>(ws);
  A* part_b = reinterpret_cast<A*>(ws + l.part_b);
  switch (sh) {
    case Narrow: backward_kernel<T, P, 32, VEC, true><<<grid, kWarpBlock, 0, s>>>(a, part_w, part_b); break;
    case Wide: backward_kernel<T, P, kRowBlock, VEC, true><<<grid, kRowBlock, 0, s>>>(a, part_w, part_b); break;
    case Wider: backward_kernel<T, P, kRowBlock, VEC, false><<<grid, kRowBlock, 0, s>>>(a, part_w, part_b); break;
  }
  rt::Status st = check_launch("layernorm backward");
  if (st == rt::Status::Success && a.dweight) st = reduce(partial_sums(a, l.slots, part_w, a.dweight, ws + l.sums), s);
  if (st == rt::Status::Success && a.dbias) st = reduce(partial_sums(a, l.slots, part_b, a.dbias, ws + l.sums), s);
  return st;
}

template <bool fwd>
rt::Status run(const RowNormArgs& a, rt::Stream stream) {
  if (a.rows == 0 || a.cols == 0) return rt::Status::Success;
  const cudaStream_t s = native(stream);
  rt::Status st = rt::Status::Success;
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    constexpr int N = 16 / sizeof(T);
    const bool vec = vectorizable<T>(a, !fwd);
    if (fwd) {
      if (vec) launch_forward<T, P, N>(a, s);
      else launch_forward<T, P, 1>(a, s);
    } else {
      st = vec ? launch_backward<T, P, N>(a, s) : launch_backward<T, P, 1>(a, s);
    }
  });
  if (!ok)
    return rt::report(rt::Status::InvalidValue,
                      "layernorm: expected floating inputs with parameters of the same dtype or float32");
  return fwd ? check_launch("layernorm forward") : st;
}

} // namespace

rt::Status layernorm_forward(const RowNormArgs& a, rt::Stream stream) { return run<true>(a, stream); }
rt::Status layernorm_backward(const RowNormArgs& a, rt::Stream stream) { return run<false>(a, stream); }

size_t layernorm_workspace_bytes(const RowNormArgs& a) {
  if (a.rows == 0 || a.cols == 0) return 0;
  return backward_layout(a).bytes;
}

} // namespace mytorch::cuda
