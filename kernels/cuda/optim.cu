// CUDA multi-tensor ops (Note [Multi-tensor apply]): up to kMtTensors tensors and kMtBlocks spans per launch,
// their metadata passed by value; a block per span. A span is kMtChunk elements when the list is long, shorter when
// that would leave the device without about four blocks per SM (norms keep kMtChunk: their partials are the sim's).
// Where every pointer the op touches is 16-byte aligned a thread moves 16 bytes of each operand at once (vec_step);
// Copy, SGD, unaligned lists and the tails one element at a time.
#include <vector>

#include "common.cuh"
#include "mytorch/optim.h"

namespace mytorch::cuda {
namespace {

constexpr int kMtTensors = 24;
constexpr int kMtBlocks = 320;

struct Launch {
  MtTensor t[kMtTensors];
  int16_t block_tensor[kMtBlocks];
  int32_t block_chunk[kMtBlocks];    // the block's span is [chunk * span, (chunk + 1) * span)
  int32_t block_partial[kMtBlocks];  // Norm: index of the chunk's partial in the workspace
  int32_t span = kMtChunk;
};

// The slots an op reads and writes per element (bit k: slot k; none: the op has no vector path); slot 5 of the
// optimizers is the step, a scalar.
struct SlotMask { unsigned read = 0, written = 0; };
inline SlotMask slot_mask(const MultiTensorArgs& a) {
  SlotMask m;
  switch (a.kind) {
    case MtKind::Elementwise:
      for (int k = 0; k < a.ninputs; ++k)
        if (a.operand[k] == MtOperand::List) m.read |= 1u << (k + 1);
      m.written = 1;
      break;
    case MtKind::Fill: m.written = 1; break;
    case MtKind::Norm: m.read = 2; break;
    case MtKind::Adam:
    case MtKind::AdamW:
      m.read = 0xF | (a.amsgrad ? 0x10 : 0);
      m.written = 0xD | (a.grad_scale ? 0x2 : 0) | (a.amsgrad ? 0x10 : 0);
      break;
    default: break;  // Copy (it changes the dtype) and Sgd: element by element
  }
  return m;
}

template <typename T>
__device__ inline void element(const MultiTensorArgs& a, const MtTensor& m, int64_t i, double* part,
                               const mt::AdamConsts<ew::opmath_t<T>>& k) {
  switch (a.kind) {
    case MtKind::Fill: static_cast<T*>(m.ptr[0])[i] = static_cast<T>(m.scalar); break;
    case MtKind::Copy:
      switch (a.out_dtype) {
        case DType::Half:
          static_cast<c10::Half*>(m.ptr[0])[i] = mt_cast<c10::Half>(static_cast<const T*>(m.ptr[1])[i]);
          break;
        case DType::BFloat16:
          static_cast<c10::BFloat16*>(m.ptr[0])[i] = mt_cast<c10::BFloat16>(static_cast<const T*>(m.ptr[1])[i]);
          break;
        case DType::Double:
          static_cast<double*>(m.ptr[0])[i] = mt_cast<double>(static_cast<const T*>(m.ptr[1])[i]);
          break;
        default: static_cast<float*>(m.ptr[0])[i] = mt_cast<float>(static_cast<const T*>(m.ptr[1])[i]); break;
      }
      break;
    case MtKind::Norm: *part = mt::norm_push(*part, mt::load<T>(m.ptr[1], i), a.ord); break;
    case MtKind::Adam: mt::adam<T>(a, m, i, false, k); break;
    case MtKind::AdamW: mt::adam<T>(a, m, i, true, k); break;
    case MtKind::Sgd: mt::sgd<T>(a, m, i); break;
    default: break;
  }
}

template <typename T, EwOp op, bool ew>
__device__ inline void step(const MultiTensorArgs& a, const MtTensor& m, int64_t i, double* part,
                            const mt::AdamConsts<ew::opmath_t<T>>& k) {
  if constexpr (ew) mt::elementwise<op, T>(a, m, i);
  else element<T>(a, m, i, part, k);
}

// N consecutive elements from i, every slot the op reads and writes moved 16 bytes at once, the math on values
// (ew::apply, mt::adam_math, mt::norm_push: the element functions' own).
template <typename T, EwOp op, bool ew, int N>
__device__ inline void vec_step(const MultiTensorArgs& a, const MtTensor& m, int64_t i, double* part,
                                const mt::AdamConsts<ew::opmath_t<T>>& k) {
  using O = ew::opmath_t<T>;
  if constexpr (ew) {
    EwParams p = a.p;
    if (a.alpha_per_tensor) p.alpha = m.scalar;
    Vec<T, N> in[3], out;
    O c[3] = {O(0), O(0), O(0)};
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      if (q >= a.ninputs) break;
      if (a.operand[q] == MtOperand::List) in[q] = load_vec<T, N>(static_cast<const T*>(m.ptr[q + 1]) + i);
      else c[q] = mt::operand<T>(a, m, q, 0);  // the same for every element
    }
    auto at = [&](int q, int u) { return a.operand[q] == MtOperand::List ? static_cast<O>(in[q].v[u]) : c[q]; };
#pragma unroll
    for (int u = 0; u < N; ++u)
      out.v[u] = static_cast<T>(
          ew::apply<op, T>(at(0, u), a.ninputs > 1 ? at(1, u) : O(0), a.ninputs > 2 ? at(2, u) : O(0), p));
    store_vec<T, N>(static_cast<T*>(m.ptr[0]) + i, out);
  } else if (a.kind == MtKind::Fill) {
    Vec<T, N> v;
#pragma unroll
    for (int u = 0; u < N; ++u) v.v[u] = static_cast<T>(m.scalar);
    store_vec<T, N>(static_cast<T*>(m.ptr[0]) + i, v);
  } else if (a.kind == MtKind::Norm) {
    const Vec<T, N> v = load_vec<T, N>(static_cast<const T*>(m.ptr[1]) + i);
#pragma unroll
    for (int u = 0; u < N; ++u) *part = mt::norm_push(*part, static_cast<double>(v.v[u]), a.ord);
  } else {  // Adam, AdamW (vec_kind)
    Vec<T, N> pv = load_vec<T, N>(static_cast<const T*>(m.ptr[0]) + i),
              gv = load_vec<T, N>(static_cast<const T*>(m.ptr[1]) + i);
    Vec<T, N> m1 = load_vec<T, N>(static_cast<const T*>(m.ptr[2]) + i),
              m2 = load_vec<T, N>(static_cast<const T*>(m.ptr[3]) + i), mx{};
    if (a.amsgrad) mx = load_vec<T, N>(static_cast<const T*>(m.ptr[4]) + i);
#pragma unroll
    for (int u = 0; u < N; ++u) {
      O param = static_cast<O>(pv.v[u]), grad = static_cast<O>(gv.v[u]);
      O exp_avg = static_cast<O>(m1.v[u]), exp_avg_sq = static_cast<O>(m2.v[u]), mxu = static_cast<O>(mx.v[u]);
      if (a.grad_scale) {
        grad = static_cast<O>(grad / static_cast<double>(*a.grad_scale));
        gv.v[u] = static_cast<T>(grad);
      }
      mt::adam_math<O>(a, a.kind == MtKind::AdamW, k, param, grad, exp_avg, exp_avg_sq, a.amsgrad ? &mxu : nullptr);
      pv.v[u] = static_cast<T>(param);
      m1.v[u] = static_cast<T>(exp_avg);
      m2.v[u] = static_cast<T>(exp_avg_sq);
      mx.v[u] = static_cast<T>(mxu);
    }
    store_vec<T, N>(static_cast<T*>(m.ptr[0]) + i, pv);
    store_vec<T, N>(static_cast<T*>(m.ptr[2]) + i, m1);
    store_vec<T, N>(static_cast<T*>(m.ptr[3]) + i, m2);
    if (a.grad_scale) store_vec<T, N>(static_cast<T*>(m.ptr[1]) + i, gv);
    if (a.amsgrad) store_vec<T, N>(static_cast<T*>(m.ptr[4]) + i, mx);
  }
}

template <typename T, EwOp op, bool ew>
__global__ void mt_kernel(MultiTensorArgs a, Launch l, SlotMask mask) {
  constexpr int N = 16 / sizeof(T);
  const MtTensor& m = l.t[l.block_tensor[blockIdx.x]];
  const int64_t begin = int64_t(l.block_chunk[blockIdx.x]) * l.span;
  const int64_t end = begin + l.span < m.numel ? begin + l.span : m.numel;
  if ((a.kind == MtKind::Adam || a.kind == MtKind::AdamW || a.kind == MtKind::Sgd) && a.found_inf &&
      *a.found_inf != 0.0f)
    return;
  double part = 0;
  mt::AdamConsts<ew::opmath_t<T>> k{};
  if (!ew && (a.kind == MtKind::Adam || a.kind == MtKind::AdamW)) k = mt::adam_consts<T>(a, m);
  bool vec = N > 1 && (mask.read | mask.written) != 0;
  for (int s = 0; s < kMtSlots - 1; ++s)
    if ((mask.read | mask.written) >> s & 1) vec = vec && reinterpret_cast<uintptr_t>(m.ptr[s]) % 16 == 0;
  int64_t i = begin + threadIdx.x;
  if (vec) {  // begin is a multiple of N (spans are); the tail below
    const int64_t whole = begin + (end - begin) / N * N;
    for (int64_t j = begin + int64_t(threadIdx.x) * N; j < whole; j += int64_t(blockDim.x) * N)
      vec_step<T, op, ew, N>(a, m, j, &part, k);
    i = whole + threadIdx.x;
  }
  for (; i < end; i += blockDim.x) step<T, op, ew>(a, m, i, &part, k);
  if (!ew && a.kind == MtKind::Norm) {
    __shared__ double s[kThreads];
    s[threadIdx.x] = part;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
      if (threadIdx.x < k) s[threadIdx.x] = mt::norm_combine(s[threadIdx.x], s[threadIdx.x + k], a.ord);
      __syncthreads();
    }
    if (threadIdx.x == 0) static_cast<double*>(a.workspace)[l.block_partial[blockIdx.x]] = s[0];
  }
}

// Norm, second pass: a thread per tensor sums its partials in order and takes the root; one launch per
// kMtNormTensors tensors.
constexpr int kMtNormTensors = 64;
struct NormFinish {
  void* out[kMtNormTensors];
  int64_t first[kMtNormTensors + 1];  // tensor t's partials are [first[t], first[t + 1])
  int count = 0;
};

__global__ void norm_finish_kernel(double ord, const double* partials, NormFinish f, DType out_dtype) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= f.count) return;
  double acc = 0;
  for (int64_t c = f.first[t]; c < f.first[t + 1]; ++c) acc = mt::norm_combine(acc, partials[c], ord);
  const double r = mt::norm_finish(acc, ord);
  switch (out_dtype) {
    case DType::Half: *static_cast<c10::Half*>(f.out[t]) = mt_cast<c10::Half>(r); break;
    case DType::BFloat16: *static_cast<c10::BFloat16*>(f.out[t]) = mt_cast<c10::BFloat16>(r); break;
    case DType::Double: *static_cast<double*>(f.out[t]) = r; break;
    default: *static_cast<float*>(f.out[t]) = mt_cast<float>(r); break;
  }
}

// Elements per block: kMtChunk, or less (a power of two, at least 1,024: a 16-byte vector per thread) so that the list makes about four blocks
// per SM; norms keep kMtChunk.
int64_t span_for(const MultiTensorArgs& a) {
  if (a.kind == MtKind::Norm) return kMtChunk;
  int64_t total = 0;
  for (int64_t i = 0; i < a.ntensors; ++i) total += a.tensors[i].numel;
  const int64_t want = total / (4 * int64_t(device_sms()));
  int64_t span = 1024;
  while (span < want && span < kMtChunk) span *= 2;
  return span;
}

template <typename T, EwOp op, bool ew>
rt::Status run(const MultiTensorArgs& a, cudaStream_t s) {
  Launch l{};
  l.span = static_cast<int32_t>(span_for(a));
  const SlotMask mask = slot_mask(a);
  int nt = 0, nb = 0;
  int32_t partial = 0;
  auto flush = [&]() -> rt::Status {
    if (nb > 0) {
      mt_kernel<T, op, ew><<<nb, kThreads, 0, s>>>(a, l, mask);
      rt::Status st = check_launch("multi_tensor");
      if (st != rt::Status::Success) return st;
    }
    nt = 0;
    nb = 0;
    return rt::Status::Success;
  };
  for (int64_t i = 0; i < a.ntensors; ++i) {
    const MtTensor& m = a.tensors[i];
    if (m.numel == 0) continue;
    if (nt == kMtTensors) {
      rt::Status st = flush();
      if (st != rt::Status::Success) return st;
    }
    l.t[nt] = m;
    const int64_t spans = (m.numel + l.span - 1) / l.span;
    for (int64_t c = 0; c < spans; ++c) {
      if (nb == kMtBlocks) {
        rt::Status st = flush();
        if (st != rt::Status::Success) return st;
        l.t[0] = m;  // the tensor continues in the next launch
      }
      l.block_tensor[nb] = static_cast<int16_t>(nt);
      l.block_chunk[nb] = static_cast<int32_t>(c);
      l.block_partial[nb] = partial++;
      ++nb;
    }
    ++nt;
  }
  rt::Status st = flush();
  if (st != rt::Status::Success || a.kind != MtKind::Norm) return st;
  NormFinish f{};
  int64_t first = 0;
  for (int64_t i = 0; i < a.ntensors; ++i) {
    f.out[f.count] = a.tensors[i].ptr[0];
    f.first[f.count] = first;
    first += mt_chunks(a.tensors[i].numel);
    f.first[++f.count] = first;
    if (f.count == kMtNormTensors || i + 1 == a.ntensors) {
      norm_finish_kernel<<<1, kMtNormTensors, 0, s>>>(a.ord, static_cast<const double*>(a.workspace), f, a.out_dtype);
      f.count = 0;
    }
  }
  return check_launch("multi_tensor norm");
}

template <typename T>
rt::Status dispatch_op(const MultiTensorArgs& a, cudaStream_t s) {
  if (a.kind != MtKind::Elementwise) return run<T, EwOp::Add, false>(a, s);
  return ew_visit(
      a.op,
      [&](auto op) {
        if constexpr (ew_foreach(decltype(op)::value)) return run<T, decltype(op)::value, true>(a, s);
        else return rt::report(rt::Status::InvalidValue, "multi_tensor: the op is not on the multi-tensor path");
      },
      [] { return rt::report(rt::Status::InvalidValue, "multi_tensor: unsupported op"); });
}

} // namespace

rt::Status multi_tensor(const MultiTensorArgs& a, rt::Stream stream) {
  if (a.ntensors == 0) return rt::Status::Success;
  rt::Status st = rt::report(rt::Status::InvalidValue, "multi_tensor: expected a floating dtype");
  dispatch_floating(a.dtype, [&](auto tag) { st = dispatch_op<decltype(tag)>(a, native(stream)); });
  return st;
}

} // namespace mytorch::cuda
