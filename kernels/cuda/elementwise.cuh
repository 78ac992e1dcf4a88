// CUDA elementwise kernels over ops_math.h: a contiguous path with 16-byte vector loads and stores, and a
// strided path computing each operand's offset from the coalesced shape. Grid size comes from the
// kernel's occupancy on the current device (grid-stride loops cover the rest).
#pragma once

#include "common.cuh"
#include "mytorch/elementwise.h"
#include "mytorch/ops_math.h"

namespace mytorch::cuda {

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <EwOp op, typename T>
struct EwTraits {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  static constexpr int n = ew_arity(op);
  static constexpr int vec = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
};

template <EwOp op, typename T>
__device__ inline typename EwTraits<op, T>::Out ew_compute(const typename EwTraits<op, T>::O* v, bool mask,
                                                            const EwParams& p) {
  using Out = typename EwTraits<op, T>::Out;
  if constexpr (op == EwOp::Where) return static_cast<Out>(mask ? v[1] : v[2]);
  else return static_cast<Out>(ew::apply<op, T>(v[0], v[1], v[2], p));
}

template <EwOp op, typename T>
__device__ inline void ew_scalars(const ElementwiseArgs& a, typename EwTraits<op, T>::O* s, bool* smask) {
  using O = typename EwTraits<op, T>::O;
#pragma unroll
  for (int k = 0; k < EwTraits<op, T>::n; ++k) {
    s[k] = O(0);
    if (!a.is_scalar[k]) continue;
    if (op == EwOp::Where && k == 0) *smask = *reinterpret_cast<const bool*>(a.scalar[0]);
    else if (op == EwOp::Where) s[k] = static_cast<O>(*reinterpret_cast<const T*>(a.scalar[k]));
    else s[k] = *reinterpret_cast<const O*>(a.scalar[k]);  // arithmetic scalars stay in opmath precision
  }
}

template <EwOp op, typename T, int VEC>
__global__ void ew_contiguous(ElementwiseArgs a) {
  using Tr = EwTraits<op, T>;
  using O = typename Tr::O;
  using Out = typename Tr::Out;
  O s[3];
  bool smask = false;
  ew_scalars<op, T>(a, s, &smask);
  const int64_t n = a.shape.numel;
  for (int64_t base = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC; base < n;
       base += int64_t(gridDim.x) * blockDim.x * VEC) {
    if (base + VEC <= n) {
      O v[VEC][3];
      bool m[VEC];
#pragma unroll
      for (int k = 0; k < Tr::n; ++k) {
        if (a.is_scalar[k]) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            v[j][k] = s[k];
            if (op == EwOp::Where && k == 0) m[j] = smask;  // only the mask operand sets the mask
          }
        } else if (op == EwOp::Where && k == 0) {
          const Vec<bool, VEC> mv = *reinterpret_cast<const Vec<bool, VEC>*>(static_cast<const bool*>(a.in[0].data) + base);
#pragma unroll
          for (int j = 0; j < VEC; ++j) m[j] = mv.v[j];
        } else {
          const Vec<T, VEC> iv = *reinterpret_cast<const Vec<T, VEC>*>(static_cast<const T*>(a.in[k].data) + base);
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[j][k] = static_cast<O>(iv.v[j]);
        }
      }
      Vec<Out, VEC> ov;
#pragma unroll
      for (int j = 0; j < VEC; ++j) ov.v[j] = ew_compute<op, T>(v[j], m[j], a.p);
      *reinterpret_cast<Vec<Out, VEC>*>(static_cast<Out*>(a.out.data) + base) = ov;
    } else {
      for (int64_t i = base; i < n; ++i) {
        O v[3] = {s[0], s[1], s[2]};
        bool m = smask;
#pragma unroll
        for (int k = 0; k < Tr::n; ++k) {
          if (a.is_scalar[k]) continue;
          if (op == EwOp::Where && k == 0) m = static_cast<const bool*>(a.in[0].data)[i];
          else v[k] = static_cast<O>(static_cast<const T*>(a.in[k].data)[i]);
        }
        static_cast<Out*>(a.out.data)[i] = ew_compute<op, T>(v, m, a.p);
      }
    }
  }
}

template <EwOp op, typename T>
__global__ void ew_strided(ElementwiseArgs a) {
  using Tr = EwTraits<op, T>;
  using O = typename Tr::O;
  using Out = typename Tr::Out;
  O s[3];
  bool smask = false;
  ew_scalars<op, T>(a, s, &smask);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < a.shape.numel; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[4] = {0, 0, 0, 0};
    int64_t rem = i;
    for (int d = 0; d < a.shape.ndim; ++d) {
      const int64_t idx = rem % a.shape.sizes[d];
      rem /= a.shape.sizes[d];
      off[0] += idx * a.out.strides[d];
#pragma unroll
      for (int k = 0; k < Tr::n; ++k) off[k + 1] += idx * a.in[k].strides[d];
    }
    O v[3] = {s[0], s[1], s[2]};
    bool m = smask;
#pragma unroll
    for (int k = 0; k < Tr::n; ++k) {
      if (a.is_scalar[k]) continue;
      const char* p = static_cast<const char*>(a.in[k].data) + off[k + 1];
      if (op == EwOp::Where && k == 0) m = *reinterpret_cast<const bool*>(p);
      else v[k] = static_cast<O>(*reinterpret_cast<const T*>(p));
    }
    *reinterpret_cast<Out*>(static_cast<char*>(a.out.data) + off[0]) = ew_compute<op, T>(v, m, a.p);
  }
}

// Blocks for n work items: enough to cover them, capped at what the device keeps resident at once.
template <typename Kernel>
unsigned ew_grid(Kernel kernel, int64_t items) {
  static int resident = 0; // per instantiation: blocks per SM x SMs
  if (resident == 0) {
    int dev = 0, sms = 1, per_sm = 1;
    ignore_error(cudaGetDevice(&dev));
    ignore_error(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ignore_error(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
    resident = sms * (per_sm > 0 ? per_sm : 1);
  }
  int64_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < resident ? blocks : resident);
}

inline bool ew_contiguous_ok(const ElementwiseArgs& a, int n, int out_size, int in_size, bool where) {
  if (a.shape.ndim > 1) return false;
  auto dense = [&](const StridedOperand& o, int es) { return a.shape.ndim == 0 || o.strides[0] == es; };
  if (!dense(a.out, out_size)) return false;
  for (int k = 0; k < n; ++k) {
    if (a.is_scalar[k]) continue;
    if (!dense(a.in[k], (where && k == 0) ? 1 : in_size)) return false;
  }
  return true;
}

inline bool ew_aligned16(const ElementwiseArgs& a, int n) {
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!al(a.out.data)) return false;
  for (int k = 0; k < n; ++k) {
    if (!a.is_scalar[k] && !al(a.in[k].data)) return false;
  }
  return true;
}

template <EwOp op, typename T>
rt::Status ew_launch(const ElementwiseArgs& a, rt::Stream stream) {
  using Tr = EwTraits<op, T>;
  if (a.shape.numel == 0) return rt::Status::Success;
  cudaStream_t st = native(stream);
  const bool where = op == EwOp::Where;
  if (ew_contiguous_ok(a, Tr::n, sizeof(typename Tr::Out), sizeof(T), where)) {
    constexpr int V = Tr::vec;
    if (ew_aligned16(a, Tr::n)) {
      auto k = ew_contiguous<op, T, V>;
      k<<<ew_grid(k, (a.shape.numel + V - 1) / V), kThreads, 0, st>>>(a);
    } else {
      auto k = ew_contiguous<op, T, 1>;
      k<<<ew_grid(k, a.shape.numel), kThreads, 0, st>>>(a);
    }
  } else {
    auto k = ew_strided<op, T>;
    k<<<ew_grid(k, a.shape.numel), kThreads, 0, st>>>(a);
  }
  return check_launch("elementwise");
}

template <EwOp op>
rt::Status ew_dispatch(const ElementwiseArgs& a, rt::Stream stream) {
  rt::Status st = rt::report(rt::Status::InvalidValue, "elementwise: the op does not support this dtype");
  dispatch_dtype(a.compute, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      if constexpr (ew::supported<op, T>()) st = ew_launch<op, T>(a, stream);
    }
  });
  return st;
}

// One translation unit per op group keeps nvcc's units small (see elementwise_*.cu).
rt::Status ew_binary_arith(const ElementwiseArgs& a, rt::Stream s);
rt::Status ew_binary_logic(const ElementwiseArgs& a, rt::Stream s);
rt::Status ew_ternary(const ElementwiseArgs& a, rt::Stream s);
rt::Status ew_unary_float(const ElementwiseArgs& a, rt::Stream s);
rt::Status ew_unary_other(const ElementwiseArgs& a, rt::Stream s);
rt::Status ew_nn(const ElementwiseArgs& a, rt::Stream s);

} // namespace mytorch::cuda
