// CUDA reductions and scans (Note [Reduction engine]): a block per output element, threads striding over
// the reduced elements, accumulators combined through shared memory; scans run one thread per line.
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

template <RedOp op, typename T>
__global__ void reduce_kernel(ReduceArgs r) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);
  const T* in = static_cast<const T*>(r.in);
  for (int64_t o = blockIdx.x; o < r.out_numel; o += gridDim.x) {
    const red::RedOffsets at = red::red_output_offsets(r, o);
    const int64_t in_base = at.in_base, out_off = at.out, out2_off = at.out2;
    red::Acc<A> acc = R::template init<A>(r.params);
    for (int64_t j = threadIdx.x; j < r.red_numel; j += blockDim.x) {
      R::push(acc, static_cast<A>(in[in_base + red::red_offset(r, j)]), j, r.params);
    }
    parts[threadIdx.x] = acc;
    block_tree(parts, [&](red::Acc<A>& x, const red::Acc<A>& y) { R::combine(x, y, r.params); });
    if (threadIdx.x == 0) {
      A mean = A(0);
      const A v = R::project(parts[0], r.params, &mean);
      if (r.want_values) store_any(r.out_dtype, r.out, out_off, v);
      if (r.out2 != nullptr) {
        if constexpr (R::kOut2 == red::Out2::Index) {
          static_cast<int64_t*>(r.out2)[out2_off] = parts[0].n < 0 ? 0 : parts[0].n;
        } else if constexpr (R::kOut2 == red::Out2::Mean) {
          store_any(r.out_dtype, r.out2, out2_off, mean);
        }
      }
    }
    __syncthreads();
  }
}

template <RedOp op>
rt::Status launch(const ReduceArgs& r, rt::Stream stream) {
  rt::Status st = rt::report(rt::Status::InvalidValue, "reduce: unsupported input dtype");
  dispatch_dtype(r.in_dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (red::supported<op, T>()) {
      using A = red::acc_t<op, T>;
      const unsigned grid = grid_blocks(r.out_numel);  // a block per output
      reduce_kernel<op, T><<<grid, kThreads, kThreads * sizeof(red::Acc<A>), native(stream)>>>(r);
      st = check_launch("reduce");
    }
  });
  return st;
}

template <ScanOp op, typename T>
__global__ void scan_kernel(ScanArgs s) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < s.lines; l += int64_t(gridDim.x) * blockDim.x) {
    red::scan_line<op, T>(s, l);
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
  return scan_visit(
      s.op,
      [&](auto op) {
        bool ok = false;
        dispatch_dtype(s.dtype, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (red::scan_supported<decltype(op)::value, T>()) {
            scan_kernel<decltype(op)::value, T><<<grid_for(s.lines), kThreads, 0, native(stream)>>>(s);
            ok = true;
          }
        });
        if (!ok) return rt::report(rt::Status::InvalidValue, "scan: unsupported dtype");
        return check_launch("scan");
      },
      [] { return rt::report(rt::Status::InvalidValue, "scan: unknown op"); });
}

} // namespace mytorch::cuda
