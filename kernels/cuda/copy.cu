// CUDA copy family: strided copy with dtype conversion and fill. Contiguous equal-type copies and
// byte-uniform fills go to the copy/memset engines; the rest is a grid-stride strided kernel indexing in 32 bits
// below 2^31 elements (Note [Fast divmod]).
#include "common.cuh"
#include "mytorch/copy.h"
#include "mytorch/strided_index.h"
#include "mytorch/runtime.h"

namespace mytorch::cuda {
namespace {

template <int ES>
__global__ void copy_bytes_kernel(CopyArgs p, StridedDivs v) {
  char* dst = static_cast<char*>(p.dst.data);
  const char* src = static_cast<const char*>(p.src.data);
  for (const int64_t i : grid_stride(p.shape.numel)) {
    int64_t o0, o1;
    strided_offsets(p.shape, v, p.dst.strides, p.src.strides, i, &o0, &o1);
    store_vec<unsigned char, ES>(dst + o0, load_vec<unsigned char, ES>(src + o1));
  }
}

template <typename To, typename From>
__global__ void cast_kernel(CopyArgs p, StridedDivs v) {
  char* dst = static_cast<char*>(p.dst.data);
  const char* src = static_cast<const char*>(p.src.data);
  for (const int64_t i : grid_stride(p.shape.numel)) {
    int64_t o0, o1;
    strided_offsets(p.shape, v, p.dst.strides, p.src.strides, i, &o0, &o1);
    *reinterpret_cast<To*>(dst + o0) = mt_cast<To, From>(mt_load(reinterpret_cast<const From*>(src + o1)));
  }
}

template <int ES>
__global__ void fill_kernel(FillArgs p, StridedDivs dv) {
  char* dst = static_cast<char*>(p.dst.data);
  const Vec<unsigned char, ES> v = load_vec<unsigned char, ES>(p.value);
  for (const int64_t i : grid_stride(p.shape.numel)) {
    int64_t o0, o1;
    strided_offsets(p.shape, dv, p.dst.strides, nullptr, i, &o0, &o1);
    store_vec<unsigned char, ES>(dst + o0, v);
  }
}

template <typename T>
__global__ void iota_kernel(IotaArgs p) {
  T* out = static_cast<T*>(p.data);
  for (const int64_t i : grid_stride(p.numel)) {
    out[i] = iota_value<T>(p, i);
  }
}

bool dense1d(const StridedShape& s, const StridedOperand& op) {
  return s.ndim <= 1 && (s.ndim == 0 || op.strides[0] == op.elem_size);
}

} // namespace

rt::Status copy(const CopyArgs& p, rt::Stream stream) {
  if (p.shape.numel == 0) return rt::Status::Success;
  const unsigned grid = grid_for(p.shape.numel);
  cudaStream_t st = native(stream);
  const StridedDivs v = strided_divs(p.shape);  // Note [Fast divmod]
  if (p.dst.dtype == p.src.dtype && p.dst.elem_size == p.src.elem_size) {
    if (dense1d(p.shape, p.dst) && dense1d(p.shape, p.src)) {
      return rt::memcpy_async(p.dst.data, p.src.data, size_t(p.shape.numel) * p.dst.elem_size,
                              rt::CopyKind::DeviceToDevice, stream);
    }
    switch (p.dst.elem_size) {
      case 1: copy_bytes_kernel<1><<<grid, kThreads, 0, st>>>(p, v); break;
      case 2: copy_bytes_kernel<2><<<grid, kThreads, 0, st>>>(p, v); break;
      case 4: copy_bytes_kernel<4><<<grid, kThreads, 0, st>>>(p, v); break;
      case 8: copy_bytes_kernel<8><<<grid, kThreads, 0, st>>>(p, v); break;
      case 16: copy_bytes_kernel<16><<<grid, kThreads, 0, st>>>(p, v); break;
      default: return rt::report(rt::Status::InvalidValue, "copy: unsupported element size");
    }
    return check_launch("copy");
  }
  bool ok = false;
  dispatch_dtype(p.dst.dtype, [&](auto to) {
    using To = decltype(to);
    ok = dispatch_dtype(p.src.dtype, [&](auto from) {
      using From = decltype(from);
      cast_kernel<To, From><<<grid, kThreads, 0, st>>>(p, v);
    });
  });
  if (!ok)
    return rt::report(rt::Status::InvalidValue,
                      "copy: conversion between these element types is not supported by the kernel");
  return check_launch("cast");
}

rt::Status fill(const FillArgs& p, rt::Stream stream) {
  if (p.shape.numel == 0) return rt::Status::Success;
  const int es = p.dst.elem_size;
  bool uniform = true;
  for (int i = 1; i < es; ++i) uniform = uniform && p.value[i] == p.value[0];
  if (uniform && dense1d(p.shape, p.dst)) {
    return rt::memset_async(p.dst.data, p.value[0], size_t(p.shape.numel) * es, stream);
  }
  const unsigned grid = grid_for(p.shape.numel);
  cudaStream_t st = native(stream);
  const StridedDivs v = strided_divs(p.shape);  // Note [Fast divmod]
  switch (es) {
    case 1: fill_kernel<1><<<grid, kThreads, 0, st>>>(p, v); break;
    case 2: fill_kernel<2><<<grid, kThreads, 0, st>>>(p, v); break;
    case 4: fill_kernel<4><<<grid, kThreads, 0, st>>>(p, v); break;
    case 8: fill_kernel<8><<<grid, kThreads, 0, st>>>(p, v); break;
    case 16: fill_kernel<16><<<grid, kThreads, 0, st>>>(p, v); break;
    default: return rt::report(rt::Status::InvalidValue, "fill: unsupported element size");
  }
  return check_launch("fill");
}

rt::Status iota(const IotaArgs& p, rt::Stream stream) {
  if (p.numel == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>) {
      iota_kernel<T><<<grid_for(p.numel), kThreads, 0, native(stream)>>>(p);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "iota: unsupported dtype");
  return check_launch("iota");
}

} // namespace mytorch::cuda
