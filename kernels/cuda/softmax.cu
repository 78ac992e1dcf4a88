// CUDA softmax (Note [Softmax family]): a block per line when the reduced dimension is the innermost one
// (the row staged in shared memory when it fits, so it is read once; longer rows take an online pass for the
// maximum and the sum, then the write pass), else a thread per line running the shared line function.
#include <cfloat>

#include "common.cuh"
#include "mytorch/softmax.h"

namespace mytorch::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr size_t kStageBytes = 40 * 1024;  // dynamic shared memory without an opt-in (48 KB) less the reductions'

// Rows that fit in shared memory are read from device memory once (`staged`): loaded into shared memory in
// opmath, then the max, the sum and the write all read the staged copy.
template <typename I, typename O, typename A, bool staged>
__global__ void forward_rows(SoftmaxArgs s) {
  __shared__ A smem[32];
  extern __shared__ unsigned char row_smem[];
  A* rowbuf = reinterpret_cast<A*>(row_smem);
  for (const int64_t row : block_stride(s.outer)) {
    const I* x = static_cast<const I*>(s.in) + row * s.dim;
    O* y = static_cast<O*>(s.out) + row * s.dim;
    auto val = [&](int64_t j) -> A { return staged ? rowbuf[j] : static_cast<A>(x[j]); };
    A mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) {
      const A v = static_cast<A>(x[j]);
      if (staged) rowbuf[j] = v;
      mx = (v != v || v > mx) ? v : mx;
    }
    mx = block_reduce(mx, smem, MaxOp{}, A(-INFINITY));
    A sum = 0;
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) sum += exp(val(j) - mx);
    sum = block_reduce(sum, smem, SumOp{}, A(0));
    const A lse = log(sum);
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) {
      const A v = val(j) - mx;
      y[j] = static_cast<O>(s.log ? v - lse : exp(v) / sum);
    }
    __syncthreads();  // the staged row is reused by the block's next row
  }
}

// The running maximum of a row and the sum of exp(x - maximum) so far (online softmax): one pass for both.
template <typename A>
struct MaxSum {
  A m;
  A s;
};
template <typename A>
__device__ inline void push_online(MaxSum<A>& a, A v) {
  const A m = (v != v || v > a.m) ? v : a.m;
  if (m == A(-INFINITY)) return;  // only -inf so far: adds nothing (and exp(-inf - -inf) would be NaN)
  a.s = (m == a.m ? a.s : a.s * exp(a.m - m)) + exp(v - m);
  a.m = m;
}
template <typename A>
__device__ inline void combine_online(MaxSum<A>& a, const MaxSum<A>& b) {
  const A m = (b.m != b.m || b.m > a.m) ? b.m : a.m;
  if (m == A(-INFINITY)) return;
  a.s = (a.m == m ? a.s : a.s * exp(a.m - m)) + (b.m == m ? b.s : b.s * exp(b.m - m));
  a.m = m;
}

// Rows too long for shared memory: the maximum and the sum in one pass (online, each thread rescaling its sum
// when its maximum grows, the threads' pairs combined in a fixed tree), then the write pass: the row is read twice,
// not three times.
template <typename I, typename O, typename A>
__global__ void forward_rows_online(SoftmaxArgs s) {
  __shared__ MaxSum<A> parts[kRowThreads];
  for (const int64_t row : block_stride(s.outer)) {
    const I* x = static_cast<const I*>(s.in) + row * s.dim;
    O* y = static_cast<O*>(s.out) + row * s.dim;
    MaxSum<A> acc{A(-INFINITY), A(0)};
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) push_online(acc, static_cast<A>(x[j]));
    parts[threadIdx.x] = acc;
    block_tree(parts, [](MaxSum<A>& a, const MaxSum<A>& b) { combine_online(a, b); });
    const A mx = parts[0].m, sum = parts[0].s;
    const A lse = log(sum);
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) {
      const A v = static_cast<A>(x[j]) - mx;
      y[j] = static_cast<O>(s.log ? v - lse : exp(v) / sum);
    }
    __syncthreads();  // parts is reused by the block's next row
  }
}

template <typename G, typename O, typename A, bool staged>
__global__ void backward_rows(SoftmaxArgs s) {
  __shared__ A smem[32];
  extern __shared__ unsigned char row_smem[];
  A* gbuf = reinterpret_cast<A*>(row_smem);
  A* ybuf = gbuf + s.dim;
  for (const int64_t row : block_stride(s.outer)) {
    const G* g = static_cast<const G*>(s.in) + row * s.dim;
    const G* y = static_cast<const G*>(s.out_saved) + row * s.dim;
    O* gi = static_cast<O*>(s.out) + row * s.dim;
    A sum = 0;
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) {
      const A gv = static_cast<A>(g[j]), yv = static_cast<A>(y[j]);
      if (staged) {
        gbuf[j] = gv;
        ybuf[j] = yv;
      }
      sum += s.log ? gv : gv * yv;
    }
    sum = block_reduce(sum, smem, SumOp{}, A(0));
    for (int64_t j = threadIdx.x; j < s.dim; j += blockDim.x) {
      const A gv = staged ? gbuf[j] : static_cast<A>(g[j]), yv = staged ? ybuf[j] : static_cast<A>(y[j]);
      gi[j] = static_cast<O>(s.log ? gv - exp(yv) * sum : yv * (gv - sum));
    }
    __syncthreads();
  }
}

template <typename I, typename O, typename A>
__global__ void lines(SoftmaxArgs s) {
  const int64_t n = s.outer * s.inner;
  for (const int64_t l : grid_stride(n)) {
    if (s.backward) smx::backward_line<I, O, A>(s, l);
    else smx::forward_line<I, O, A>(s, l);
  }
}

template <typename I, typename O>
void launch(const SoftmaxArgs& s, cudaStream_t st) {
  using A = ew::opmath_t<I>;
  if (s.inner == 1) {
    const unsigned grid = grid_blocks(s.outer);  // a block per row
    const size_t row_bytes = static_cast<size_t>(s.dim) * sizeof(A) * (s.backward ? 2 : 1);
    const bool staged = row_bytes <= kStageBytes;
    if (s.backward) {
      if (staged) backward_rows<I, O, A, true><<<grid, kRowThreads, row_bytes, st>>>(s);
      else backward_rows<I, O, A, false><<<grid, kRowThreads, 0, st>>>(s);
    } else {
      if (staged) forward_rows<I, O, A, true><<<grid, kRowThreads, row_bytes, st>>>(s);
      else forward_rows_online<I, O, A><<<grid, kRowThreads, 0, st>>>(s);
    }
  } else {
    lines<I, O, A><<<grid_for(s.outer * s.inner), kThreads, 0, st>>>(s);
  }
}

} // namespace

rt::Status softmax(const SoftmaxArgs& s, rt::Stream stream) {
  if (s.outer * s.inner == 0 || s.dim == 0) return rt::Status::Success;
  bool ok = false;
  dispatch_floating(s.in_dtype, [&](auto in_tag) {
    using I = decltype(in_tag);
    ok = dispatch_floating(s.out_dtype, [&](auto out_tag) { launch<I, decltype(out_tag)>(s, native(stream)); });
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "softmax: expected floating dtypes");
  return check_launch("softmax");
}

} // namespace mytorch::cuda
