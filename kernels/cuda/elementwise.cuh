// CUDA elementwise kernels over ops_math.h: a contiguous path with 16-byte vector loads and stores, and a
// strided path computing each operand's offset from the coalesced shape. Grid size comes from the
// kernel's occupancy on the current device (grid-stride loops cover the rest).
#pragma once

#include "common.cuh"
#include "mytorch/elementwise.h"
#include "mytorch/strided_index.h"
#include "mytorch/ops_math.h"

namespace mytorch::cuda {

template <EwOp op, typename T>
struct EwTraits {
  using O = ew::opmath_t<T>;
  using Out = std::conditional_t<ew_is_predicate(op), bool, T>;
  static constexpr int n = ew_arity(op);
  static constexpr bool masked = ew_has_mask(op);  // operand 0 is a bool mask
  static constexpr int vec = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
};

template <EwOp op, typename T>
__device__ inline typename EwTraits<op, T>::Out ew_compute(const typename EwTraits<op, T>::O* v, const EwParams& p) {
  return static_cast<typename EwTraits<op, T>::Out>(ew::apply<op, T>(v[0], v[1], v[2], p));
}

// Operand k of a tensor: a bool mask (where's operand 0, passed to the functor as 0 or 1) or a value of T.
template <EwOp op, typename T>
__device__ inline typename EwTraits<op, T>::O ew_load(const void* base, int k, int64_t i) {
  using O = typename EwTraits<op, T>::O;
  if (EwTraits<op, T>::masked && k == 0) return static_cast<O>(mt_load(static_cast<const bool*>(base) + i));
  return static_cast<O>(mt_load(static_cast<const T*>(base) + i));
}

template <EwOp op, typename T>
__device__ inline void ew_scalars(const ElementwiseArgs& a, typename EwTraits<op, T>::O* s) {
  using O = typename EwTraits<op, T>::O;
#pragma unroll
  for (int k = 0; k < EwTraits<op, T>::n; ++k) {
    s[k] = O(0);
    if (!a.is_scalar[k]) continue;
    if (EwTraits<op, T>::masked && k == 0) s[k] = static_cast<O>(mt_load(reinterpret_cast<const bool*>(a.scalar[0])));
    else if (EwTraits<op, T>::masked) s[k] = static_cast<O>(*reinterpret_cast<const T*>(a.scalar[k])); // compute dtype
    else s[k] = *reinterpret_cast<const O*>(a.scalar[k]); // arithmetic scalars stay in opmath precision
  }
}

template <EwOp op, typename T, int VEC>
__global__ void ew_contiguous(ElementwiseArgs a) {
  using Tr = EwTraits<op, T>;
  using O = typename Tr::O;
  using Out = typename Tr::Out;
  O s[3];
  ew_scalars<op, T>(a, s);
  const int64_t n = a.shape.numel;
  for (int64_t base = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * VEC; base < n;
       base += int64_t(gridDim.x) * blockDim.x * VEC) {
    if (base + VEC <= n) {
      O v[VEC][3];
#pragma unroll
      for (int k = 0; k < Tr::n; ++k) {
        if (a.is_scalar[k]) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[j][k] = s[k];
        } else if (Tr::masked && k == 0) {
          const Vec<bool, VEC> mv = load_vec<bool, VEC>(static_cast<const bool*>(a.in[0].data) + base);
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[j][0] = static_cast<O>(mt_load(&mv.v[j]));
        } else {
          const Vec<T, VEC> iv = load_vec<T, VEC>(static_cast<const T*>(a.in[k].data) + base);
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[j][k] = static_cast<O>(mt_load(&iv.v[j]));
        }
      }
      Vec<Out, VEC> ov;
#pragma unroll
      for (int j = 0; j < VEC; ++j) ov.v[j] = ew_compute<op, T>(v[j], a.p);
      store_vec<Out, VEC>(static_cast<Out*>(a.out.data) + base, ov);
    } else {
      for (int64_t i = base; i < n; ++i) {
        O v[3] = {s[0], s[1], s[2]};
#pragma unroll
        for (int k = 0; k < Tr::n; ++k) {
          if (!a.is_scalar[k]) v[k] = ew_load<op, T>(a.in[k].data, k, i);
        }
        static_cast<Out*>(a.out.data)[i] = ew_compute<op, T>(v, a.p);
      }
    }
  }
}

template <EwOp op, typename T>
__global__ void ew_strided(ElementwiseArgs a, StridedDivs dv) {
  using Tr = EwTraits<op, T>;
  using O = typename Tr::O;
  using Out = typename Tr::Out;
  O s[3];
  ew_scalars<op, T>(a, s);
  for (const int64_t i : grid_stride(a.shape.numel)) {
    int64_t off[4] = {0, 0, 0, 0};
    strided_visit(a.shape, dv, i, [&](int d, int64_t idx) { // Note [Fast divmod]
      off[0] += idx * a.out.strides[d];
#pragma unroll
      for (int k = 0; k < Tr::n; ++k) off[k + 1] += idx * a.in[k].strides[d];
    });
    O v[3] = {s[0], s[1], s[2]};
#pragma unroll
    for (int k = 0; k < Tr::n; ++k) {
      if (!a.is_scalar[k]) v[k] = ew_load<op, T>(static_cast<const char*>(a.in[k].data) + off[k + 1], k, 0);
    }
    *reinterpret_cast<Out*>(static_cast<char*>(a.out.data) + off[0]) = ew_compute<op, T>(v, a.p);
  }
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
  // The kernels are named in the launches (the emulator's trace records the launched expression).
  if (ew_contiguous_ok(a, Tr::n, sizeof(typename Tr::Out), sizeof(T), Tr::masked)) {
    constexpr int V = Tr::vec;
    if (ew_aligned16(a, Tr::n)) {
      const unsigned grid = grid_resident(ew_contiguous<op, T, V>, (a.shape.numel + V - 1) / V);
      ew_contiguous<op, T, V><<<grid, kThreads, 0, st>>>(a);
    } else {
      const unsigned grid = grid_resident(ew_contiguous<op, T, 1>, a.shape.numel);
      ew_contiguous<op, T, 1><<<grid, kThreads, 0, st>>>(a);
    }
  } else {
    const unsigned grid = grid_resident(ew_strided<op, T>, a.shape.numel);
    ew_strided<op, T><<<grid, kThreads, 0, st>>>(a, strided_divs(a.shape)); // Note [Fast divmod]
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

// The ops of one CUDA group (the table's group column): one translation unit per group keeps nvcc's units small.
// elementwise_<group>.cu instantiates its group's (MT_EW_GROUP_UNIT); the router in elementwise.cu calls them.
template <EwGroup G>
rt::Status ew_group_launch(const ElementwiseArgs& a, rt::Stream stream) {
  return ew_visit(
      a.op,
      [&](auto op) {
        if constexpr (ew_group(decltype(op)::value) == G) return ew_dispatch<decltype(op)::value>(a, stream);
        else return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
      },
      [] { return rt::report(rt::Status::InvalidValue, "elementwise: unknown op"); });
}
#define MT_EW_GROUP_EXTERN(g) \
  extern template rt::Status ew_group_launch<EwGroup::g>(const ElementwiseArgs&, rt::Stream);
MT_EW_GROUPS(MT_EW_GROUP_EXTERN)
#undef MT_EW_GROUP_EXTERN
#define MT_EW_GROUP_UNIT(g) template rt::Status ew_group_launch<EwGroup::g>(const ElementwiseArgs&, rt::Stream);

} // namespace mytorch::cuda
