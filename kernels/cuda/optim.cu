// CUDA multi-tensor ops (Note [Multi-tensor apply]): chunks of up to kMtTensors tensors and kMtBlocks
// chunks per launch, their metadata passed by value; a block per chunk.
#include <vector>

#include "common.cuh"
#include "mytorch/optim.h"

namespace mytorch::cuda {
namespace {

constexpr int kMtTensors = 24;
constexpr int kMtBlocks = 160;

struct Launch {
  MtTensor t[kMtTensors];
  int16_t block_tensor[kMtBlocks];
  int32_t block_chunk[kMtBlocks];
  int32_t block_partial[kMtBlocks];  // Norm: index of the chunk's partial in the workspace
};

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
__global__ void mt_kernel(MultiTensorArgs a, Launch l) {
  const MtTensor& m = l.t[l.block_tensor[blockIdx.x]];
  const int64_t begin = int64_t(l.block_chunk[blockIdx.x]) * kMtChunk;
  const int64_t end = begin + kMtChunk < m.numel ? begin + kMtChunk : m.numel;
  if ((a.kind == MtKind::Adam || a.kind == MtKind::AdamW || a.kind == MtKind::Sgd) && a.found_inf &&
      *a.found_inf != 0.0f)
    return;
  double part = 0;
  mt::AdamConsts<ew::opmath_t<T>> k{};
  if (!ew && (a.kind == MtKind::Adam || a.kind == MtKind::AdamW)) k = mt::adam_consts<T>(a, m);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if constexpr (ew) mt::elementwise<op, T>(a, m, i);
    else element<T>(a, m, i, &part, k);
  }
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

// Norm, second pass: each tensor's partials in order, then the root (one tiny launch per tensor).
template <typename T>
__global__ void norm_tensor(double ord, const double* partials, int64_t first, int64_t nchunks, void* out,
                            DType out_dtype) {
  double acc = 0;
  for (int64_t c = 0; c < nchunks; ++c) acc = mt::norm_combine(acc, partials[first + c], ord);
  const double r = mt::norm_finish(acc, ord);
  switch (out_dtype) {
    case DType::Half: *static_cast<c10::Half*>(out) = mt_cast<c10::Half>(r); break;
    case DType::BFloat16: *static_cast<c10::BFloat16*>(out) = mt_cast<c10::BFloat16>(r); break;
    case DType::Double: *static_cast<double*>(out) = r; break;
    default: *static_cast<float*>(out) = mt_cast<float>(r); break;
  }
}

template <typename T, EwOp op, bool ew>
rt::Status run(const MultiTensorArgs& a, cudaStream_t s) {
  Launch l{};
  int nt = 0, nb = 0;
  int32_t partial = 0;
  auto flush = [&]() -> rt::Status {
    if (nb > 0) {
      mt_kernel<T, op, ew><<<nb, kThreads, 0, s>>>(a, l);
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
    for (int64_t c = 0; c < mt_chunks(m.numel); ++c) {
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
  int64_t first = 0;
  for (int64_t i = 0; i < a.ntensors; ++i) {
    const MtTensor& m = a.tensors[i];
    const int64_t n = mt_chunks(m.numel);
    norm_tensor<T><<<1, 1, 0, s>>>(a.ord, static_cast<const double*>(a.workspace), first, n, m.ptr[0], a.out_dtype);
    first += n;
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
