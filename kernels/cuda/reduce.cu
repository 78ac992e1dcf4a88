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
  using A = red::acc_t<op, T>;
  extern __shared__ unsigned char smem[];
  auto* parts = reinterpret_cast<red::Acc<A>*>(smem);
  const T* in = static_cast<const T*>(r.in);
  for (int64_t o = blockIdx.x; o < r.out_numel; o += gridDim.x) {
    int64_t rem = o, in_base = 0, out_off = 0, out2_off = 0;
    for (int d = r.out_ndim - 1; d >= 0; --d) {
      const int64_t i = rem % r.out_sizes[d];
      rem /= r.out_sizes[d];
      in_base += i * r.out_in_strides[d];
      out_off += i * r.out_strides[d];
      out2_off += i * r.out2_strides[d];
    }
    red::Acc<A> acc = red::init<op, A>(r.p);
    for (int64_t j = threadIdx.x; j < r.red_numel; j += blockDim.x) {
      red::push<op, A>(acc, static_cast<A>(in[in_base + red::red_offset(r, j)]), j, r.p);
    }
    parts[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) red::combine<op, A>(parts[threadIdx.x], parts[threadIdx.x + s], r.p);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      A mean = A(0);
      const A v = red::finish<op, A>(parts[0], r, &mean);
      if (r.want_values) store_any(r.out_dtype, r.out, out_off, v);
      if (r.out2 != nullptr) {
        if constexpr (op == RedOp::ArgMax || op == RedOp::ArgMin || op == RedOp::Max || op == RedOp::Min) {
          static_cast<int64_t*>(r.out2)[out2_off] = parts[0].n < 0 ? 0 : parts[0].n;
        } else if constexpr (op == RedOp::Var) {
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
    if constexpr (!is_complex_t<T>::value) {
      constexpr bool floating = !std::is_integral_v<T>;
      if constexpr ((op != RedOp::Norm && op != RedOp::Var && op != RedOp::Mean) || floating) {
        using A = red::acc_t<op, T>;
        const unsigned grid = static_cast<unsigned>(r.out_numel < 65535 ? r.out_numel : 65535);
        reduce_kernel<op, T><<<grid, kThreads, kThreads * sizeof(red::Acc<A>), native(stream)>>>(r);
        st = check_launch("reduce");
      }
    }
  });
  return st;
}

template <typename T>
__global__ void scan_kernel(ScanArgs s) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < s.lines; l += int64_t(gridDim.x) * blockDim.x) {
    red::scan_line<T>(s, l);
  }
}

} // namespace

rt::Status reduce(const ReduceArgs& r, rt::Stream stream) {
  if (r.out_numel == 0) return rt::Status::Success;
  switch (r.op) {
    case RedOp::Sum: return launch<RedOp::Sum>(r, stream);
    case RedOp::Mean: return launch<RedOp::Mean>(r, stream);
    case RedOp::Prod: return launch<RedOp::Prod>(r, stream);
    case RedOp::Max: return launch<RedOp::Max>(r, stream);
    case RedOp::Min: return launch<RedOp::Min>(r, stream);
    case RedOp::ArgMax: return launch<RedOp::ArgMax>(r, stream);
    case RedOp::ArgMin: return launch<RedOp::ArgMin>(r, stream);
    case RedOp::All: return launch<RedOp::All>(r, stream);
    case RedOp::Any: return launch<RedOp::Any>(r, stream);
    case RedOp::CountNonzero: return launch<RedOp::CountNonzero>(r, stream);
    case RedOp::Norm: return launch<RedOp::Norm>(r, stream);
    case RedOp::Var: return launch<RedOp::Var>(r, stream);
  }
  return rt::report(rt::Status::InvalidValue, "reduce: unknown op");
}

rt::Status scan(const ScanArgs& s, rt::Stream stream) {
  if (s.lines == 0 || s.length == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>) {
      scan_kernel<T><<<grid_for(s.lines), kThreads, 0, native(stream)>>>(s);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "scan: unsupported dtype");
  return check_launch("scan");
}

} // namespace mytorch::cuda
